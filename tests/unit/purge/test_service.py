"""The purge pass: what it marks, what it leaves pending, and what it gives up on."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path

from ulid import ULID

from brokersync.ledger import Ledger, memory_ledger
from brokersync.metrics import RecordingMetrics
from brokersync.purge.remover import RemovalResult
from brokersync.purge.service import PurgeService, PurgeSettings
from brokersync.topology import load_topology

NOW = 1_795_340_000.0


@dataclass
class FakeDR:
    """A DR queue as a set of keys; removal takes exactly the selected keys that are present."""

    present: set[str] = field(default_factory=set)
    asked: list[list[str]] = field(default_factory=list)

    def remove(self, queue: str, keys: list[str]) -> RemovalResult:
        self.asked.append(list(keys))
        found = [k for k in keys if k in self.present]
        self.present -= set(found)
        return RemovalResult(removed=found, not_found=[k for k in keys if k not in found])


def _service(topology_path: Path, dr: FakeDR, **settings: object) -> tuple[PurgeService, Ledger]:
    ledger = memory_ledger(clock=lambda: NOW)
    service = PurgeService(
        ledger,
        dr,
        load_topology(topology_path),
        settings=PurgeSettings(**settings),
        clock=lambda: NOW,  # type: ignore[arg-type]
    )
    return service, ledger


def test_found_keys_are_removed_and_marked_purged(topology_path: Path) -> None:
    keys = [str(ULID()) for _ in range(5)]
    dr = FakeDR(set(keys))
    service, ledger = _service(topology_path, dr)
    ledger.record("ORDERS", [(k, int(NOW * 1000)) for k in keys])

    result = service.purge_queue("ORDERS")

    assert (result.purged, result.pending, result.missing) == (5, 0, 0)
    assert ledger.pending("ORDERS") == []


def test_keys_not_yet_on_dr_stay_pending(topology_path: Path) -> None:
    keys = [str(ULID()) for _ in range(3)]
    service, ledger = _service(topology_path, FakeDR({keys[0]}))
    ledger.record("ORDERS", [(k, int(NOW * 1000)) for k in keys])

    result = service.purge_queue("ORDERS")

    assert (result.purged, result.pending, result.missing) == (1, 2, 0)


def test_keys_older_than_the_cutoff_are_marked_missing(topology_path: Path) -> None:
    [key] = [str(ULID())]
    service, ledger = _service(topology_path, FakeDR(), missing_after=timedelta(minutes=10))
    ledger.record("ORDERS", [(key, int(NOW * 1000) - 11 * 60_000)])

    result = service.purge_queue("ORDERS")

    assert result.missing == 1
    assert ledger.pending("ORDERS") == []


def test_keys_not_found_make_room_for_newer_ones(topology_path: Path) -> None:
    stuck = [str(ULID()) for _ in range(3)]
    newer = [str(ULID()) for _ in range(3)]
    dr = FakeDR(set(newer))
    service, ledger = _service(topology_path, dr, batch_keys=3)
    ledger.record("ORDERS", [(k, int(NOW * 1000)) for k in stuck])
    ledger.record("ORDERS", [(k, int(NOW * 1000) + 1) for k in newer])

    service.purge_queue("ORDERS")
    second = service.purge_queue("ORDERS")

    assert [set(asked) for asked in dr.asked] == [set(stuck), set(newer)]
    assert second.purged == 3


def test_mirror_queues_are_never_purged(topology_path: Path) -> None:
    service, _ = _service(topology_path, FakeDR())

    report = service.run(max_seconds=0.05, stop_when_idle=True)

    assert set(report.queues) == {"ORDERS", "PAYMENTS"}


def test_every_round_reports_pending_purge_even_with_nothing_pending(topology_path: Path) -> None:
    """The DR stack's purge-loop-silent alarm counts these reports: an idle loop must not look dead."""
    metrics = RecordingMetrics()
    service = PurgeService(memory_ledger(clock=lambda: NOW), FakeDR(), load_topology(topology_path), metrics=metrics)

    service.purge_queue("ORDERS")
    service.purge_queue("ORDERS")

    assert metrics.values["PendingPurge"] == [0, 0]
