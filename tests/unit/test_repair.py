"""The reconciliation's purge list fed back to the ledger: only exact message ids become pending."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from ulid import ULID

from brokersync.ledger import LedgerEntry, memory_ledger
from brokersync.repair import MALFORMED, PURGE_REASONS, PurgeListRow, purge_list_row, repair_from_purge_list

T0 = 1_795_340_000_000


def mid(n: int) -> str:
    return f"ID:app-41000-1795340000000-1:1:-1:1:{n}"


def test_a_ledger_row_is_made_pending_under_the_message_ids_the_ledger_recorded() -> None:
    ledger = memory_ledger(clock=lambda: T0 / 1000)
    key = str(ULID.from_timestamp(T0 / 1000))
    ledger.record("ORDERS", [LedgerEntry(key, T0 + 10, mid(1))])
    ledger.mark_missing("ORDERS", ledger.pending("ORDERS"))  # given up on; the copy arrived later

    report = repair_from_purge_list(ledger, [PurgeListRow("ORDERS", key, None, "ledger")])

    assert report.recorded == 1
    assert [(p.key, p.message_id) for p in ledger.pending("ORDERS")] == [(key, mid(1))]


def test_a_ledger_row_the_ledger_cannot_name_is_skipped() -> None:
    ledger = memory_ledger(clock=lambda: T0 / 1000)

    report = repair_from_purge_list(ledger, [PurgeListRow("ORDERS", str(ULID()), None, "ledger")])

    assert (report.recorded, report.skipped["not-in-ledger"]) == (0, 1)
    assert ledger.pending("ORDERS") == []


def test_a_gone_from_primary_row_is_made_pending_under_the_dr_copys_own_id() -> None:
    ledger = memory_ledger(clock=lambda: T0 / 1000)
    key = str(ULID())

    repair_from_purge_list(ledger, [PurgeListRow("ORDERS", key, mid(7), "gone_from_primary")])

    assert [(p.key, p.message_id) for p in ledger.pending("ORDERS")] == [(key, mid(7))]


def test_rows_with_malformed_ids_or_no_id_to_name_are_skipped_not_guessed() -> None:
    ledger = memory_ledger(clock=lambda: T0 / 1000)
    rows = [
        PurgeListRow("ORDERS", str(ULID()), "ID:nope", "gone_from_primary"),
        PurgeListRow("ORDERS", str(ULID()), None, "gone_from_primary"),
        PurgeListRow("ORDERS", "order-42", None, "ledger"),
    ]

    report = repair_from_purge_list(ledger, rows)

    assert report.recorded == 0
    assert report.skipped == {"invalid": 2, "no-message-id": 1}


def test_a_runs_ledger_rows_are_looked_up_together_and_each_is_made_pending_under_its_own_messages() -> None:
    ledger = memory_ledger(clock=lambda: T0 / 1000 + 3600)  # the reconciliation runs an hour later
    keys = [str(ULID.from_timestamp((T0 - n * 60_000) / 1000)) for n in range(120)]  # made over two hours
    ledger.record("ORDERS", [LedgerEntry(key, T0 + n, mid(n)) for n, key in enumerate(keys[:100])])
    ledger.mark_missing("ORDERS", ledger.pending("ORDERS", limit=1000))
    reads = []
    original = ledger.backend.captured_range
    ledger.backend.captured_range = lambda *args: reads.append(args) or original(*args)  # type: ignore[method-assign]

    report = repair_from_purge_list(ledger, [PurgeListRow("ORDERS", key, None, "ledger") for key in keys])

    assert (report.recorded, report.skipped["not-in-ledger"]) == (100, 20)
    assert {(p.key, p.message_id) for p in ledger.pending("ORDERS", limit=1000)} == {
        (key, mid(n)) for n, key in enumerate(keys[:100])
    }
    assert len(reads) <= 2  # one read per shard layout, where one by one read the same day 120 times each


@pytest.mark.parametrize(
    "line",
    [
        "{not json",
        "[]",
        '"a row"',
        json.dumps({"queue": "ORDERS", "key": 7, "message_id": None, "reason": "gone_from_primary"}),
        json.dumps({"queue": "", "key": "ID:a-1-1-1:1:1:1:1", "message_id": None, "reason": "gone_from_primary"}),
        json.dumps({"queue": "ORDERS", "key": "ID:a-1-1-1:1:1:1:1", "message_id": ["x"], "reason": "ledger"}),
        "[" * 100_000,
    ],
    ids=["not-json", "a-list", "a-string", "key-a-number", "no-queue", "id-a-list", "nested-past-the-parser"],
)
def test_a_line_that_is_no_purge_list_row_is_counted_as_malformed_and_the_next_is_still_recorded(line: str) -> None:
    ledger = memory_ledger(clock=lambda: T0 / 1000)
    good = json.dumps({"queue": "ORDERS", "key": str(ULID()), "message_id": mid(3), "reason": "gone_from_primary"})

    report = repair_from_purge_list(ledger, [purge_list_row(line), purge_list_row(good)])

    assert (report.recorded, dict(report.skipped)) == (1, {MALFORMED: 1})


def test_a_row_with_a_reason_the_repair_does_not_know_is_never_recorded() -> None:
    ledger = memory_ledger(clock=lambda: T0 / 1000)

    report = repair_from_purge_list(ledger, [PurgeListRow("ORDERS", str(ULID()), mid(4), "looks-consumed")])

    assert (report.recorded, dict(report.skipped)) == (0, {MALFORMED: 1})
    assert ledger.pending("ORDERS") == []


def test_the_repair_knows_every_reason_the_reconciliation_writes_and_no_other() -> None:
    job = (Path(__file__).resolve().parents[2] / "jobs" / "reconcile" / "reconcile.py").read_text()

    assert set(re.findall(r'F\.lit\("([a-z_]+)"\)\.alias\("reason"\)', job)) == PURGE_REASONS


def test_a_message_id_key_beside_another_message_id_is_skipped_as_invalid_and_the_rest_is_recorded() -> None:
    ledger = memory_ledger(clock=lambda: T0 / 1000)
    good = PurgeListRow("ORDERS", str(ULID()), mid(3), "gone_from_primary")

    report = repair_from_purge_list(ledger, [PurgeListRow("ORDERS", mid(1), mid(2), "gone_from_primary"), good])

    assert (report.recorded, dict(report.skipped)) == (1, {"invalid": 1})
    assert [p.message_id for p in ledger.pending("ORDERS")] == [mid(3)]
