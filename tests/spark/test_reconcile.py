"""The reconciliation job on small data made by the real ledger, with exact expected counts."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from moto import mock_aws
from ulid import ULID

from brokersync.ledger import Ledger, LedgerEntry, PendingKey
from tests.spark.ledger_export import export_lines, moto_ledger, write_export, write_manifest, write_snapshot

NOW_MS = int(time.time() * 1000)
HOUR_MS = 3_600_000


def _ulids(n: int) -> list[str]:
    """Keys created three hours ago, before the scenario consumed them (the ledger searches from creation)."""
    return [str(ULID.from_timestamp((NOW_MS - 3 * HOUR_MS) / 1000)) for _ in range(n)]


def _mid(key: str) -> str:
    """The message id the scenario's broker gave the message keyed ``key`` (message-id keys are their own)."""
    return (
        key if key.startswith("ID:") else f"ID:snapshot-41000-1795340000000-1:1:-1:1:{int(ULID.from_str(key)) % 10**15}"
    )


def _message(key: str, timestamp: int = NOW_MS - HOUR_MS, *, copied: bool = True, **extra: Any) -> dict[str, Any]:
    """A snapshot line; ``copied`` ones arrived through the copy path (``original-destination`` is set)."""
    origin = {"original_destination": "/queue/ORDERS.DR"} if copied else {}
    return {"key": key, "message_id": _mid(key), "correlation_id": key, "timestamp": timestamp,
            "broker_in_time": timestamp, "size": 100, **origin, **extra}  # fmt: skip


class World:
    """The scenario: who was consumed, purged, given up on, and what each broker still holds."""

    def __init__(self, root: Path, ledger: Ledger) -> None:
        self.root = root
        self.k = _ulids(10)
        self.unconsumed, self.gone, self.recent = _ulids(5), _ulids(2), _ulids(1)
        # Produced on the DR broker itself: stranded there while it was primary, before a failover
        # and failback made it DR again. Not on the new primary, never consumed: never "gone".
        self.stranded = _ulids(1)
        self.m = [f"ID:broker-a-41231-1700000000000-5:1:1:1:{n}" for n in range(1, 4)]
        consumed_at = NOW_MS - 2 * HOUR_MS
        ledger.record("ORDERS", [LedgerEntry(key, consumed_at + i, _mid(key)) for i, key in enumerate(self.k)])
        ledger.record("ORDERS", [LedgerEntry(self.k[0], consumed_at + 5_000, _mid(self.k[0]))])  # replayed
        ledger.record("PAYMENTS", [(key, consumed_at + i) for i, key in enumerate(self.m)])
        pending = {p.key: p for p in ledger.pending("ORDERS", limit=100)}
        ledger.mark_purged("ORDERS", [pending[k] for k in self.k[1:5]])
        ledger.mark_missing("ORDERS", [pending[self.k[5]]])
        pay = {p.key: p for p in ledger.pending("PAYMENTS", limit=100)}
        ledger.mark_purged("PAYMENTS", [pay[k] for k in self.m[:2]])
        lines = [*export_lines(), "not json at all", '{"Item": {"pk": {"S": "C#ORDERS#0"}, "sk": {"S": "abc"}}}']
        self.export = write_export(root / "export", lines)
        dr_orders = [_message(k) for k in [self.k[0], self.k[6], self.k[7], *self.unconsumed, *self.gone]]
        dr_orders.append(_message(self.recent[0], timestamp=NOW_MS - 1_000))
        dr_orders.append(_message(self.stranded[0], copied=False))
        self.dr = write_snapshot(root / "dr", "ORDERS", dr_orders, extra_lines=["{broken"])
        write_snapshot(root / "dr", "PAYMENTS", [{**_message(self.m[2]), "key": self.m[2]}])
        primary = [_message(k) for k in [*self.unconsumed, self.k[9]]]
        self.primary = write_snapshot(root / "primary", "ORDERS", primary)
        write_manifest(root / "primary", NOW_MS, {"ORDERS": len(primary), "PAYMENTS": 0})


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[World, Ledger]]:
    with pytest.MonkeyPatch.context() as mp:
        for name, value in {
            "AWS_ACCESS_KEY_ID": "t",
            "AWS_SECRET_ACCESS_KEY": "t",
            "AWS_DEFAULT_REGION": "us-west-2",
        }.items():
            mp.setenv(name, value)
        with mock_aws():
            ledger = moto_ledger()
            yield World(tmp_path_factory.mktemp("reconcile"), ledger), ledger


@pytest.fixture(scope="module")
def result(job: ModuleType, spark: Any, world: tuple[World, Ledger]) -> dict[str, Any]:
    w = world[0]
    inputs = job.Inputs(str(w.export), str(w.dr), str(w.primary))
    return job.reconcile(spark, inputs, job.snapshot_manifest(str(w.primary)))


def _keys(frame: Any, **where: str) -> set[str]:
    rows = frame.collect()
    return {r.key for r in rows if all(getattr(r, k) == v for k, v in where.items())}


def test_keys_on_dr_already_consumed_on_the_primary_are_listed_for_purge(result: dict[str, Any], world: Any) -> None:
    w = world[0]

    assert _keys(result["purge_list"], reason="ledger", queue="ORDERS") == {w.k[0], w.k[6], w.k[7]}
    assert _keys(result["purge_list"], reason="ledger", queue="PAYMENTS") == {w.m[2]}


def test_messages_gone_from_a_complete_primary_snapshot_are_listed_as_such(result: dict[str, Any], world: Any) -> None:
    assert _keys(result["purge_list"], reason="gone_from_primary") == set(world[0].gone)


def test_gone_rows_name_the_dr_copies_own_message_ids(result: dict[str, Any], world: Any) -> None:
    rows = [r for r in result["purge_list"].collect() if r.reason == "gone_from_primary"]

    assert {r.message_id for r in rows} == {_mid(key) for key in world[0].gone}


def test_a_message_stranded_on_dr_after_a_failback_is_never_taken_as_gone(result: dict[str, Any], world: Any) -> None:
    """It never came through the copy path, so its absence from the primary proves nothing."""
    assert world[0].stranded[0] not in _keys(result["purge_list"])


def test_a_message_produced_just_before_the_primary_snapshot_is_never_concluded_gone(
    result: dict[str, Any], world: Any
) -> None:
    listed = _keys(result["purge_list"])

    assert world[0].recent[0] not in listed
    assert not listed & set(world[0].unconsumed)


def test_a_primary_snapshot_that_may_be_cut_at_the_browse_limit_concludes_nothing(
    job: ModuleType, spark: Any, world: Any, tmp_path: Path
) -> None:
    w = world[0]
    manifest = {"started_ms": NOW_MS, "lines": {"ORDERS": 400}, "possibly_truncated": ["ORDERS"]}

    result = job.reconcile(spark, job.Inputs(str(w.export), str(w.dr), str(w.primary)), manifest)

    assert _keys(result["purge_list"], reason="gone_from_primary") == set()


def test_missing_keys_were_consumed_never_purged_and_are_on_neither_broker(result: dict[str, Any], world: Any) -> None:
    w = world[0]

    assert _keys(result["missing"]) == {w.k[5], w.k[8]}


def test_a_key_recorded_twice_in_the_export_counts_once(result: dict[str, Any]) -> None:
    orders = next(r for r in result["summary"].collect() if r.queue == "ORDERS")

    assert (orders.consumed, orders.recorded_more_than_once) == (10, 1)
    assert (orders.purged, orders.pending, orders.marked_missing) == (4, 5, 1)
    assert (orders.on_dr, orders.duplicates_at_risk, orders.gone_from_primary, orders.missing) == (12, 3, 2, 2)


def test_malformed_lines_are_counted_and_reported_not_fatal(result: dict[str, Any]) -> None:
    assert result["malformed"] == {"export": 2, "snapshot": 1, "primary_snapshot": 0}
    assert "not json at all" in result["malformed_examples"]


def test_ulids_are_decoded_in_sql_exactly_as_python_ulid_writes_them(job: ModuleType, spark: Any) -> None:
    ulids = [*_ulids(200), "00000000000000000000000000", "7ZZZZZZZZZZZZZZZZZZZZZZZZZ"]
    frame = spark.createDataFrame([(bytearray(ULID.from_str(u).bytes + b"\0\7"),) for u in ulids], ["b"])

    decoded = [r.key for r in frame.select(job.ulid_from_element(frame.b).alias("key")).collect()]

    assert decoded == ulids


def test_snapshot_keys_join_the_ledger_as_the_same_bytes_and_read_back_as_text(job: ModuleType, spark: Any) -> None:
    ulids = [*_ulids(50), "00000000000000000000000000", "7ZZZZZZZZZZZZZZZZZZZZZZZZZ"]
    message_id = "ID:host-1-1700000000000-1:1:1:1:1"
    frame = spark.createDataFrame([(u,) for u in [*ulids, ulids[0].lower(), message_id]], ["key"])

    keyed = job.with_join_key(frame, "key")
    rows = keyed.select(keyed.key_bin.alias("b"), job.key_text(keyed.key_bin).alias("text")).collect()

    assert [bytes(r.b) for r in rows[: len(ulids)]] == [b"U" + ULID.from_str(u).bytes for u in ulids]
    assert bytes(rows[len(ulids)].b) == b"U" + ULID.from_str(ulids[0]).bytes  # lower case, as capture accepts
    assert bytes(rows[-1].b) == b"M" + message_id.encode()
    assert [r.text for r in rows] == [*ulids, ulids[0], message_id]


def test_lag_percentiles_are_the_upper_edge_of_their_10_ms_slot(job: ModuleType) -> None:
    slots = {0: 50, 9: 40, 99: 10}  # 50 keys purged within 10 ms, 40 within 100 ms, 10 within 1 s

    assert job._percentiles(slots) == [0.01, 0.1, 1.0]
    assert job._percentiles({}) == [None, None, None]


def test_empty_inputs_give_zero_counts(job: ModuleType, spark: Any, tmp_path: Path) -> None:
    export = write_export(tmp_path / "export", [], files=1)
    (tmp_path / "dr").mkdir()

    result = job.reconcile(spark, job.Inputs(str(export), str(tmp_path / "dr")))

    assert result["summary"].count() == 0
    assert result["purge_list"].count() == result["missing"].count() == 0


def test_reading_the_export_folder_itself_returns_zero_rows_which_is_why_the_job_globs(
    job: ModuleType, spark: Any, world: Any
) -> None:
    export = world[0].export

    assert spark.read.text(str(export)).count() == 0  # the trap: no error, no rows
    assert spark.read.text(job.export_files(spark, str(export))).count() > 0


def test_an_export_path_with_no_data_files_is_an_error_not_an_empty_ledger(
    job: ModuleType, spark: Any, tmp_path: Path
) -> None:
    (tmp_path / "AWSDynamoDB" / "x" / "data").mkdir(parents=True)

    with pytest.raises(job.ReconcileInputError, match="would have returned 0 rows"):
        job.export_files(spark, str(tmp_path))


def test_outputs_are_parquet_plus_summary_json_and_an_html_report(
    job: ModuleType, spark: Any, world: Any, tmp_path: Path
) -> None:
    w = world[0]
    out = tmp_path / "out"

    summary = job.run(spark, job.Inputs(str(w.export), str(w.dr), str(w.primary)), str(out))

    assert spark.read.parquet(str(out / "purge_list")).count() == 6
    parts = list((out / job.PURGE_LIST_JSON).glob("*.json.gz"))  # what functions/repair_ledger reads
    assert sum(gzip.decompress(p.read_bytes()).decode().count("\n") for p in parts) == 6
    assert spark.read.parquet(str(out / "missing")).count() == 2
    assert json.loads((out / "summary.json").read_text())["totals"] == summary["totals"]
    assert summary["totals"]["duplicates_at_risk"] == 4
    assert "<svg" in (out / "report.html").read_text()


def test_repair_records_the_purge_list_in_the_ledger_as_pending(
    job: ModuleType, spark: Any, world: tuple[World, Ledger], tmp_path: Path
) -> None:
    w, ledger = world
    result = job.reconcile(
        spark, job.Inputs(str(w.export), str(w.dr), str(w.primary)), job.snapshot_manifest(str(w.primary))
    )

    written = job.repair(result["purge_list"], "brokersync-ledger", "us-west-2", None)

    pending = {(p.key, p.message_id) for p in ledger.pending("ORDERS", limit=1000)}
    assert written == 6
    assert {(k, _mid(k)) for k in [*w.gone, w.k[0], w.k[6], w.k[7]]} <= pending
    assert isinstance(next(iter(ledger.pending("ORDERS", limit=1))), PendingKey)


def test_gzip_parts_are_what_the_snapshot_function_writes(world: Any) -> None:
    part = world[0].dr / "ORDERS" / "part-00000.jsonl.gz"

    assert gzip.decompress(part.read_bytes()).decode().count("\n") == 13


def test_the_cli_runs_the_job_on_local_2_and_prints_its_totals(world: Any, tmp_path: Path, project_root: Path) -> None:
    w = world[0]
    out = tmp_path / "cli"

    done = subprocess.run(
        [sys.executable, "-m", "brokersync_cli.main", "reconcile", "--export", str(w.export), "--snapshot", str(w.dr),
         "--primary-snapshot", str(w.primary), "--out", str(out)],
        capture_output=True, text=True, timeout=300, check=False, cwd=project_root,
    )  # fmt: skip

    assert done.returncode == 0, done.stderr[-2000:]
    printed = json.loads(done.stdout.strip().splitlines()[-1])
    assert printed["totals"]["duplicates_at_risk"] == 4
    assert (out / "report.html").exists()


def test_the_cli_names_an_export_path_that_would_read_nothing(tmp_path: Path, project_root: Path) -> None:
    (tmp_path / "dr").mkdir()

    done = subprocess.run(
        [sys.executable, "-m", "brokersync_cli.main", "reconcile", "--export", str(tmp_path), "--snapshot",
         str(tmp_path / "dr"), "--out", str(tmp_path / "out")],
        capture_output=True, text=True, timeout=300, check=False, cwd=project_root,
    )  # fmt: skip

    assert done.returncode == 2
    assert "no export data files under" in done.stderr
