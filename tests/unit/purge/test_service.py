"""The purge pass: what it marks, what it leaves pending, and what it gives up on."""

from __future__ import annotations

import itertools
import threading
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path

import pytest
from ulid import ULID

from brokersync.broker.statistics import QueueStats
from brokersync.exceptions import BrokerSyncError, BrokerUnavailableError
from brokersync.ledger import Ledger, LedgerEntry, memory_ledger
from brokersync.ledger.backend import Pointer
from brokersync.metrics import RecordingMetrics
from brokersync.purge.late_copies import LateCopySweep
from brokersync.purge.remover import PurgeInvariantError, RemovalResult, RemoverSettings, SelectorRemover
from brokersync.purge.service import PurgeService, PurgeSettings, QueueReport
from brokersync.topology import Queue, load_topology
from brokersync_cli.cost import Usage
from tests.fake_clock import FakeClock
from tests.unit.purge.test_remover_frames import ScriptedConnector

NOW = 1_795_340_000.0
_SEQ = itertools.count(1)


def _message_id() -> str:
    return f"ID:app-41000-1795340000000-1:1:-1:1:{next(_SEQ)}"


def _consumed(count: int, at_ms: int = int(NOW * 1000)) -> list[LedgerEntry]:
    """``count`` messages consumed on the primary: a ULID key and the message's own id each."""
    return [LedgerEntry(str(ULID()), at_ms, _message_id()) for _ in range(count)]


@dataclass
class FakeDR:
    """A DR queue as a set of message ids; removal takes exactly the selected ids that are present.

    ``slow`` ids are on the queue but never dispatched to a removal in time (a busy broker);
    ``absent`` is the browse that confirms absence, and sees them.
    """

    present: set[str] = field(default_factory=set)
    asked: list[list[str]] = field(default_factory=list)
    fail_after: int | None = None
    error: BrokerSyncError | None = None
    slow: set[str] = field(default_factory=set)
    browsable: bool = True
    browsed: list[list[str]] = field(default_factory=list)
    #: Ids whose ACK the broker refuses (a client-set id): dispatched, never removed.
    refuse: set[str] = field(default_factory=set)
    #: Ids that two different messages carry (one named by its client after the other): neither removed.
    twins: set[str] = field(default_factory=set)

    def remove(self, queue: str, keys: list[str], *, deadline: float | None = None) -> RemovalResult:
        self.asked.append(list(keys))
        found = [k for k in keys if k in self.present and k not in self.slow][: self.fail_after]
        refused = [k for k in found if k in self.refuse]
        ambiguous = [k for k in found if k in self.twins]
        found = [k for k in found if k not in self.refuse and k not in self.twins]
        self.present -= set(found)
        return RemovalResult(
            removed=found,
            not_found=[k for k in keys if k not in found],
            error=self.error,
            refused=refused,
            ambiguous=ambiguous,
        )

    def absent(self, queue: Queue, message_ids: Sequence[str], *, deadline: float | None = None) -> set[str]:
        self.browsed.append(list(message_ids))
        return {k for k in message_ids if k not in self.present} if self.browsable else set()


class _Statistics:
    """A broker's statistics plugin answering one depth for every queue (None: failing), counting its queries."""

    def __init__(self, depth: int | None) -> None:
        self.depth = depth
        self.queries = 0

    def queue_stats(self, names: list[str]) -> dict[str, QueueStats]:
        self.queries += 1
        if self.depth is None:
            raise BrokerUnavailableError("statistics unavailable")
        return {n: QueueStats(n, self.depth, 0, 0, 0, 0, 0, 0, "b", "dr") for n in names}


def _service(
    topology_path: Path, dr: FakeDR, dr_statistics: _Statistics | None = None, **settings: object
) -> tuple[PurgeService, Ledger]:
    ledger = memory_ledger(clock=lambda: NOW)
    service = PurgeService(
        ledger,
        dr,
        load_topology(topology_path),
        settings=PurgeSettings(**settings),
        dr_statistics=dr_statistics,  # type: ignore[arg-type]
        clock=lambda: NOW,  # type: ignore[arg-type]
    )
    return service, ledger


def _two_rounds(
    topology_path: Path, dr: FakeDR, consumed: list[LedgerEntry], metrics: RecordingMetrics | None = None
) -> tuple[QueueReport, Ledger]:
    """Record ``consumed``, run two rounds at once (keys not found are due again at once); the first's report."""
    service, ledger = _service(topology_path, dr, retry_not_found_s=0.0)
    if metrics is not None:
        service.metrics = metrics
    ledger.record("ORDERS", consumed)
    first = service.purge_queue("ORDERS")
    service.purge_queue("ORDERS")
    return first, ledger


def test_found_keys_are_removed_and_marked_purged(topology_path: Path) -> None:
    consumed = _consumed(5)
    dr = FakeDR({c.message_id for c in consumed})
    service, ledger = _service(topology_path, dr)
    ledger.record("ORDERS", consumed)

    result = service.purge_queue("ORDERS")

    assert (result.purged, result.pending, result.missing) == (5, 0, 0)
    assert ledger.pending("ORDERS") == []


def test_a_key_whose_ack_the_broker_refused_stays_pending_and_waits_long_before_the_next_try(
    topology_path: Path,
) -> None:
    """Each try hands the message back redelivered, so it is not tried again every round."""
    consumed = _consumed(3)
    dr = FakeDR({c.message_id for c in consumed}, refuse={consumed[0].message_id})

    first, ledger = _two_rounds(topology_path, dr, consumed)

    assert (first.purged, first.pending) == (2, 1)
    assert [p.message_id for p in ledger.pending("ORDERS")] == [consumed[0].message_id]
    assert dr.asked[1:] == [], "a refused key is not asked for again within retry_refused_s"


def test_a_key_whose_id_two_different_messages_carry_is_given_up_at_once_and_counted(
    topology_path: Path,
) -> None:
    """Which copy was consumed cannot be told; every try would hand both back redelivered."""
    consumed = _consumed(3)
    dr = FakeDR({c.message_id for c in consumed}, twins={consumed[1].message_id})
    metrics = RecordingMetrics()

    first, ledger = _two_rounds(topology_path, dr, consumed, metrics)

    assert (first.purged, first.missing, first.pending) == (2, 1, 0)
    assert ledger.pending("ORDERS") == []
    assert consumed[1].message_id in dr.present, "neither copy removed"
    assert metrics.total("PurgeAmbiguousCopies") == 1
    assert metrics.total("Missing") == 0, "not the missing-on-dr alarm's: the copies are there"


def test_keys_not_yet_on_dr_stay_pending(topology_path: Path) -> None:
    consumed = _consumed(3)
    service, ledger = _service(topology_path, FakeDR({consumed[0].message_id}))
    ledger.record("ORDERS", consumed)

    result = service.purge_queue("ORDERS")

    assert (result.purged, result.pending, result.missing) == (1, 2, 0)


@dataclass
class FakePrimary:
    """The primary's outflow counters, as the statistics plugin reports them for ORDERS.DR and PAYMENTS.DR."""

    size: int = 0
    enqueued: int = 0
    dequeued: int = 0
    bridges: int = 1
    broker_id: str = "ID:primary-1"
    reachable: bool = True

    def queue_stats(self, names: list[str]) -> dict[str, QueueStats]:
        if not self.reachable:
            raise BrokerUnavailableError("no STOMP endpoint of orders-use1 accepted a connection")
        return {
            n: QueueStats(n, self.size, self.enqueued, self.dequeued, 0, 0, 0, self.bridges, self.broker_id, "p")
            for n in names
        }


def _watched(
    topology_path: Path, primary: FakePrimary, clock: FakeClock, dr: FakeDR | None = None
) -> tuple[PurgeService, Ledger]:
    ledger = memory_ledger(clock=clock)
    dr = dr if dr is not None else FakeDR()
    service = PurgeService(
        ledger,
        dr,  # type: ignore[arg-type]
        load_topology(topology_path),
        settings=PurgeSettings(missing_after=timedelta(minutes=10), retry_not_found_s=0.0),
        primary_statistics=primary,  # type: ignore[arg-type]
        clock=clock,
        absence=dr,
    )
    return service, ledger


ELEVEN_MINUTES_AGO = int(NOW * 1000) - 11 * 60_000


def test_an_old_key_is_marked_missing_once_the_outflow_is_empty_over_a_connected_bridge(topology_path: Path) -> None:
    service, ledger = _watched(topology_path, FakePrimary(size=0, bridges=1), FakeClock(NOW))
    ledger.record("ORDERS", _consumed(1, ELEVEN_MINUTES_AGO))

    result = service.purge_queue("ORDERS")

    assert result.missing == 1
    assert ledger.pending("ORDERS") == []


def test_an_old_key_stays_pending_while_the_outflow_still_holds_copies(topology_path: Path) -> None:
    service, ledger = _watched(
        topology_path, FakePrimary(size=40_000, enqueued=90_000, dequeued=50_000), FakeClock(NOW)
    )
    ledger.record("ORDERS", _consumed(1, ELEVEN_MINUTES_AGO))

    result = service.purge_queue("ORDERS")

    assert (result.missing, result.pending) == (0, 1)


@pytest.mark.parametrize("primary", [FakePrimary(reachable=False), FakePrimary(size=0, bridges=0)])
def test_an_old_key_stays_pending_while_the_primary_is_unreachable_or_its_bridge_is_down(
    topology_path: Path, primary: FakePrimary
) -> None:
    service, ledger = _watched(topology_path, primary, FakeClock(NOW))
    ledger.record("ORDERS", _consumed(1, ELEVEN_MINUTES_AGO))

    assert service.purge_queue("ORDERS").missing == 0


def test_an_old_key_is_given_up_once_the_backlog_enqueued_before_it_has_left_the_primary(
    topology_path: Path,
) -> None:
    primary, clock = FakePrimary(size=40_000, enqueued=90_000, dequeued=50_000), FakeClock(NOW)
    service, ledger = _watched(topology_path, primary, clock)
    ledger.record("ORDERS", _consumed(1, ELEVEN_MINUTES_AGO))
    assert service.purge_queue("ORDERS").missing == 0

    clock.now += 30  # the bridge forwarded everything enqueued by the first look, new copies keep coming
    primary.enqueued, primary.dequeued, primary.size = 120_000, 95_000, 25_000

    assert service.purge_queue("ORDERS").missing == 1  # drained past the first look, after the key's consume


def test_a_primary_restart_starts_the_counters_afresh_and_proves_nothing_by_itself(topology_path: Path) -> None:
    primary, clock = FakePrimary(size=40_000, enqueued=90_000, dequeued=50_000), FakeClock(NOW)
    service, ledger = _watched(topology_path, primary, clock)
    ledger.record("ORDERS", _consumed(1, ELEVEN_MINUTES_AGO))
    service.purge_queue("ORDERS")

    clock.now += 30
    primary.broker_id, primary.enqueued, primary.dequeued, primary.size = "ID:primary-2", 10, 95_000, 40_000

    assert service.purge_queue("ORDERS").missing == 0


def test_an_old_key_whose_copy_a_browse_finds_on_dr_is_kept_pending_and_removed_later(topology_path: Path) -> None:
    """A removal that found nothing may have met a DR broker slow to dispatch (the dr-region-loss drill)."""
    consumed = _consumed(2, ELEVEN_MINUTES_AGO)
    dr = FakeDR({c.message_id for c in consumed}, slow={c.message_id for c in consumed})
    service, ledger = _watched(topology_path, FakePrimary(size=0, bridges=1), FakeClock(NOW), dr)
    ledger.record("ORDERS", consumed)

    assert service.purge_queue("ORDERS").missing == 0
    dr.slow.clear()
    assert service.purge_queue("ORDERS").purged == 2


def test_of_old_keys_only_those_a_browse_cannot_find_on_dr_are_marked_missing(topology_path: Path) -> None:
    on_dr, lost = _consumed(1, ELEVEN_MINUTES_AGO), _consumed(1, ELEVEN_MINUTES_AGO)
    dr = FakeDR({on_dr[0].message_id}, slow={on_dr[0].message_id})
    service, ledger = _watched(topology_path, FakePrimary(size=0, bridges=1), FakeClock(NOW), dr)
    ledger.record("ORDERS", on_dr + lost)

    result = service.purge_queue("ORDERS")

    assert (result.missing, result.pending) == (1, 1)
    assert [p.message_id for p in ledger.pending("ORDERS")] == [on_dr[0].message_id]


def test_nothing_is_given_up_while_a_browse_cannot_tell_what_dr_holds(topology_path: Path) -> None:
    """Too deep to browse whole, memory past the paging mark, or the broker not answering."""
    dr = FakeDR(browsable=False)
    service, ledger = _watched(topology_path, FakePrimary(size=0, bridges=1), FakeClock(NOW), dr)
    ledger.record("ORDERS", _consumed(1, ELEVEN_MINUTES_AGO))

    assert service.purge_queue("ORDERS").missing == 0


def test_only_keys_the_copy_path_has_passed_are_browsed_for(topology_path: Path) -> None:
    dr = FakeDR()
    service, ledger = _watched(topology_path, FakePrimary(size=0, bridges=1), FakeClock(NOW), dr)
    old, young = _consumed(1, ELEVEN_MINUTES_AGO), _consumed(1)
    ledger.record("ORDERS", old + young)

    service.purge_queue("ORDERS")

    assert dr.browsed == [[old[0].message_id]]


def test_without_a_browse_of_dr_nothing_is_ever_given_up(topology_path: Path) -> None:
    """A remover with no broker connection to browse gives no absence check: keys wait."""
    service = PurgeService(
        memory_ledger(clock=FakeClock(NOW)),
        FakeDR(),  # type: ignore[arg-type]
        load_topology(topology_path),
        primary_statistics=FakePrimary(size=0, bridges=1),  # type: ignore[arg-type]
        clock=FakeClock(NOW),
    )
    service.ledger.record("ORDERS", _consumed(1, ELEVEN_MINUTES_AGO))

    assert service.purge_queue("ORDERS").missing == 0


def test_without_the_primarys_counters_nothing_is_ever_given_up(topology_path: Path) -> None:
    service, ledger = _service(topology_path, FakeDR(), missing_after=timedelta(minutes=10))
    ledger.record("ORDERS", _consumed(1, ELEVEN_MINUTES_AGO))

    assert service.purge_queue("ORDERS").missing == 0


def test_keys_never_found_whose_retry_is_due_take_at_most_a_quarter_of_the_batch_from_untried_ones(
    topology_path: Path,
) -> None:
    """Keys consumed on this very broker (a queue moved back with its side lost) head the consume
    order and are never found here: they must not take every round's batch from the keys behind."""
    never_here = _consumed(8)
    behind = _consumed(8, int(NOW * 1000) + 1)
    dr = FakeDR({c.message_id for c in behind})
    service, ledger = _service(topology_path, dr, batch_keys=8, retry_not_found_s=0.0)
    ledger.record("ORDERS", never_here + behind)

    service.purge_queue("ORDERS")  # tries the head: nothing found
    second = service.purge_queue("ORDERS")  # the head's retry is due at once

    assert len(dr.asked[1]) == 8
    assert sum(1 for i in dr.asked[1] if i in {c.message_id for c in never_here}) == 2
    assert second.purged == 6


def test_a_key_not_tried_in_a_round_is_never_given_up_in_it(topology_path: Path) -> None:
    """Giving up needs a fresh look: the copy path draining past a key means its copy may be on DR now."""
    service, ledger = _watched(topology_path, FakePrimary(size=0, bridges=1), FakeClock(NOW))
    old = _consumed(1, ELEVEN_MINUTES_AGO)
    ledger.record("ORDERS", old)
    service._waiting["ORDERS"] = {old[0].message_id: float("inf")}  # looked for lately, retry not due

    assert service.purge_queue("ORDERS").missing == 0
    assert len(ledger.pending("ORDERS")) == 1


def test_keys_not_found_make_room_for_newer_ones(topology_path: Path) -> None:
    stuck = _consumed(3)
    newer = _consumed(3, int(NOW * 1000) + 1)
    dr = FakeDR({c.message_id for c in newer})
    service, ledger = _service(topology_path, dr, batch_keys=3)
    ledger.record("ORDERS", stuck)
    ledger.record("ORDERS", newer)

    service.purge_queue("ORDERS")
    second = service.purge_queue("ORDERS")

    assert [set(asked) for asked in dr.asked] == [{c.message_id for c in stuck}, {c.message_id for c in newer}]
    assert second.purged == 3


def test_the_next_invocation_remembers_what_the_last_one_did_not_find(topology_path: Path) -> None:
    """A warm environment hands its not-found list to each invocation's service (functions/purge_dr)."""
    stuck = _consumed(3)
    newer = _consumed(3, int(NOW * 1000) + 1)
    dr = FakeDR({c.message_id for c in newer})
    ledger = memory_ledger(clock=lambda: NOW)
    ledger.record("ORDERS", stuck)
    ledger.record("ORDERS", newer)
    not_found: dict[str, dict[str, float]] = {}

    def invocation() -> PurgeService:
        return PurgeService(
            ledger,
            dr,  # type: ignore[arg-type]
            load_topology(topology_path),
            settings=PurgeSettings(batch_keys=3),
            clock=lambda: NOW,
            waiting=not_found,
        )

    invocation().purge_queue("ORDERS")
    second = invocation().purge_queue("ORDERS")

    assert [set(asked) for asked in dr.asked] == [{c.message_id for c in stuck}, {c.message_id for c in newer}]
    assert second.purged == 3


def test_a_key_resolved_elsewhere_is_forgotten_by_the_not_found_list(topology_path: Path) -> None:
    stuck = _consumed(2)
    dr = FakeDR()
    service, ledger = _service(topology_path, dr, batch_keys=2)
    ledger.record("ORDERS", stuck)
    service.purge_queue("ORDERS")
    ledger.mark_missing("ORDERS", ledger.pending("ORDERS")[:1])

    service.purge_queue("ORDERS")

    assert set(service._waiting["ORDERS"]) <= {stuck[1].message_id}


def test_mirror_queues_are_never_purged(topology_path: Path) -> None:
    service, _ = _service(topology_path, FakeDR())

    report = service.run(max_seconds=0.05, stop_when_idle=True)

    assert set(report.queues) == {"ORDERS", "PAYMENTS"}


def test_a_run_told_to_stop_when_idle_that_finds_nothing_returns_idle(topology_path: Path) -> None:
    service, _ = _service(topology_path, FakeDR())

    report = service.run(max_seconds=5, stop_when_idle=True)

    assert report.returned_idle


def test_a_run_that_used_its_whole_time_does_not_return_idle_though_nothing_is_left_pending(
    topology_path: Path,
) -> None:
    """The purge loop repeats such a run at once: a short wait after it would hold every key
    consumed during the wait a second longer, at every invocation's end."""
    consumed = _consumed(3)
    dr = FakeDR(present={c.message_id for c in consumed})
    service, ledger = _service(topology_path, dr)
    ledger.record("ORDERS", consumed)

    report = service.run(max_seconds=0.3)

    assert (report.purged, report.pending) == (3, 0)
    assert not report.returned_idle


def test_every_round_reports_pending_purge_even_with_nothing_pending(topology_path: Path) -> None:
    """The DR stack's purge-loop-silent alarm counts these reports: an idle loop must not look dead."""
    metrics = RecordingMetrics()
    service = PurgeService(memory_ledger(clock=lambda: NOW), FakeDR(), load_topology(topology_path), metrics=metrics)

    service.purge_queue("ORDERS")
    service.purge_queue("ORDERS")

    assert metrics.values["PendingPurge"] == [0, 0]


def test_two_messages_with_one_key_are_two_entries_removed_by_their_own_ids(topology_path: Path) -> None:
    key = str(ULID())
    first, second = _message_id(), _message_id()
    dr = FakeDR({first, second})
    service, ledger = _service(topology_path, dr)
    ledger.record("ORDERS", [LedgerEntry(key, int(NOW * 1000), first)])

    result = service.purge_queue("ORDERS")

    assert result.purged == 1
    assert dr.present == {second}


def test_confirmed_removals_are_marked_before_the_rounds_error_is_raised(topology_path: Path) -> None:
    consumed = _consumed(4)
    dr = FakeDR({c.message_id for c in consumed}, fail_after=2, error=BrokerUnavailableError("dropped"))
    service, ledger = _service(topology_path, dr)
    ledger.record("ORDERS", consumed)

    with pytest.raises(BrokerUnavailableError):
        service.purge_queue("ORDERS")

    assert {p.message_id for p in ledger.pending("ORDERS")} == {c.message_id for c in consumed[2:]}


def test_an_invariant_violation_is_raised_to_stop_the_loop(topology_path: Path) -> None:
    dr = FakeDR(error=PurgeInvariantError("stray frame"))
    service, ledger = _service(topology_path, dr)
    ledger.record("ORDERS", _consumed(1))

    with pytest.raises(PurgeInvariantError):
        service.purge_queue("ORDERS")


def test_an_entry_without_a_message_id_is_never_removed_and_is_counted(topology_path: Path) -> None:
    metrics = RecordingMetrics()
    dr = FakeDR()
    ledger = memory_ledger(clock=lambda: NOW)
    service = PurgeService(ledger, dr, load_topology(topology_path), metrics=metrics, clock=lambda: NOW)
    ledger.record("ORDERS", [(str(ULID()), int(NOW * 1000))])

    result = service.purge_queue("ORDERS")

    assert dr.asked == []
    assert result.missing == 1
    assert metrics.values["Unnameable"] == [1]
    assert ledger.pending("ORDERS") == []


class SweptCopies(LateCopySweep):
    """A late-copy sweep that has already removed ``ids`` from DR (it is never due itself)."""

    def __init__(self, queue: str, ids: set[str]) -> None:
        super().__init__(clock=lambda: NOW)
        self._removed[queue] = dict.fromkeys(ids, NOW)

    def due(self) -> bool:
        return False


def test_an_entry_whose_copy_the_late_copy_sweep_removed_is_marked_purged_without_a_second_removal(
    topology_path: Path,
) -> None:
    """A redelivered copy of a message consumed but not yet purged: the sweep removes it first."""
    swept, other = _consumed(1), _consumed(1)
    dr = FakeDR({other[0].message_id})
    ledger = memory_ledger(clock=lambda: NOW)
    sweep = SweptCopies("ORDERS", {swept[0].message_id})
    service = PurgeService(ledger, dr, load_topology(topology_path), clock=lambda: NOW, late_copies=sweep)  # type: ignore[arg-type]
    ledger.record("ORDERS", swept + other)

    report = service.purge_queue("ORDERS")

    assert (report.purged, report.pending) == (2, 0)
    assert dr.asked == [[other[0].message_id]]
    assert ledger.pending("ORDERS") == [] and sweep.removed("ORDERS") == set()


def test_what_the_sweep_removed_is_remembered_until_the_ledger_has_marked_it(topology_path: Path) -> None:
    swept = _consumed(1)
    sweep = SweptCopies("ORDERS", {swept[0].message_id})
    ledger = memory_ledger(clock=lambda: NOW)
    ledger.record("ORDERS", swept)
    service = PurgeService(ledger, FakeDR(), load_topology(topology_path), clock=lambda: NOW, late_copies=sweep)  # type: ignore[arg-type]
    ledger.mark_purged = _unavailable  # type: ignore[method-assign]

    with pytest.raises(BrokerUnavailableError):
        service.purge_queue("ORDERS")

    assert sweep.removed("ORDERS") == {swept[0].message_id}


def _unavailable(*_args: object) -> None:
    raise BrokerUnavailableError("ledger unavailable")


def _young_and_selectors_worth(extra: int) -> list[LedgerEntry]:
    """Keys consumed just now: one selector's worth of ``_message_id()`` ids and ``extra`` more."""
    return _consumed(225 + extra)


def _holding(
    topology_path: Path, consumed: list[LedgerEntry], dr_statistics: _Statistics | None = None, **settings: object
) -> tuple[PurgeService, FakeDR]:
    """A service whose DR holds every consumed copy, with ``consumed`` recorded and the hold as ``settings`` say."""
    dr = FakeDR({c.message_id for c in consumed})
    service, ledger = _service(topology_path, dr, dr_statistics, **settings)
    ledger.record("ORDERS", consumed)
    return service, dr


def test_a_round_leaves_a_partly_filled_selector_of_young_keys_to_the_next_one(topology_path: Path) -> None:
    consumed = _young_and_selectors_worth(20)
    service, dr = _holding(topology_path, consumed)

    result = service.purge_queue("ORDERS", hold=True)

    assert 0 < result.held < 100
    assert result.purged == len(consumed) - result.held
    assert result.pending == result.held
    assert dr.asked[0] == [c.message_id for c in consumed][: result.purged]


def test_held_keys_wait_for_newer_ones_and_go_first_with_them(topology_path: Path) -> None:
    """The relay writes in batches: the round after a hold may find only the held keys."""
    first, later = _consumed(30), _consumed(200)
    dr = FakeDR({c.message_id for c in first + later})
    service, ledger = _service(topology_path, dr, hold_partial_s=0.6)
    ledger.record("ORDERS", first)

    held = [service.purge_queue("ORDERS", hold=True).held for _ in range(2)]
    ledger.record("ORDERS", later)
    third = service.purge_queue("ORDERS", hold=True)

    assert held == [30, 30]
    assert dr.asked[0][:30] == [c.message_id for c in first]
    assert third.purged + third.held == 230


def test_no_key_is_held_longer_than_the_hold(topology_path: Path) -> None:
    service, _dr = _holding(topology_path, _consumed(30), hold_partial_s=0.05)

    first = service.purge_queue("ORDERS", hold=True)
    time.sleep(0.06)
    second = service.purge_queue("ORDERS", hold=True)

    assert (first.held, second.held, second.purged) == (30, 0, 30)


def test_a_last_selector_filled_beyond_the_hold_fraction_is_sent_at_once(topology_path: Path) -> None:
    consumed = _consumed(100)  # about half a selector of these ids
    dr = FakeDR({c.message_id for c in consumed})
    service, ledger = _service(topology_path, dr, hold_partial_s=0.6, hold_partial_below=0.25)
    ledger.record("ORDERS", consumed)

    assert service.purge_queue("ORDERS", hold=True).purged == 100


def test_keys_consumed_longer_ago_than_the_hold_are_sent_at_once(topology_path: Path) -> None:
    consumed = _consumed(30, int(NOW * 1000) - 601)
    service, ledger = _service(topology_path, FakeDR({c.message_id for c in consumed}), hold_partial_s=0.6)
    ledger.record("ORDERS", consumed)

    assert service.purge_queue("ORDERS", hold=True).purged == 30


def test_a_zero_hold_sends_every_key(topology_path: Path) -> None:
    consumed = _consumed(30)
    service, ledger = _service(topology_path, FakeDR({c.message_id for c in consumed}), hold_partial_s=0)
    ledger.record("ORDERS", consumed)

    assert service.purge_queue("ORDERS", hold=True).purged == 30


def test_a_round_called_on_its_own_holds_nothing(topology_path: Path) -> None:
    consumed = _consumed(30)
    service, ledger = _service(topology_path, FakeDR({c.message_id for c in consumed}), hold_partial_s=0.6)
    ledger.record("ORDERS", consumed)

    assert service.purge_queue("ORDERS").purged == 30


def test_the_purge_loop_sends_held_keys_within_the_hold(topology_path: Path) -> None:
    consumed = _consumed(30)
    dr = FakeDR({c.message_id for c in consumed})
    service, ledger = _service(topology_path, dr, hold_partial_s=0.6)
    ledger.record("ORDERS", consumed)

    report = service.run(max_seconds=5, stop_when_idle=True)

    assert (report.purged, report.pending) == (30, 0)
    assert dr.asked == [[c.message_id for c in consumed]]


def test_a_catch_up_holds_nothing(topology_path: Path) -> None:
    """A failback's catch-up stops at the first round that removes nothing: a held key would be left behind."""
    consumed = _consumed(30)
    service, ledger = _service(topology_path, FakeDR({c.message_id for c in consumed}), hold_partial_s=0.6)
    ledger.record("ORDERS", consumed)

    report = service.run(max_seconds=5, stop_when_stalled=True)

    assert (report.purged, report.pending) == (30, 0)


def test_an_idle_loop_reads_each_queue_s_pointers_at_most_once_per_idle_pause(topology_path: Path) -> None:
    """What ``brokersync cost`` prices per synced queue (``Usage.pointer_polls_per_queue_per_s``)."""
    service, ledger = _service(topology_path, FakeDR())
    polled: list[str] = []
    pointers = ledger.backend.pointers

    def counted(queue: str, limit: int, after: str | None = None) -> list[Pointer]:
        polled.append(queue)
        return pointers(queue, limit, after)

    ledger.backend.pointers = counted  # type: ignore[method-assign]
    began = time.monotonic()
    service.run(max_seconds=1.0)
    seconds = time.monotonic() - began

    per_queue = Counter(polled)
    assert set(per_queue) == {q.name for q in service.topology.captured_queues}
    pauses = seconds * Usage().pointer_polls_per_queue_per_s
    for count in per_queue.values():
        assert pauses / 2 <= count <= pauses + 1


def test_a_run_near_its_end_holds_nothing(topology_path: Path) -> None:
    """A key held in a run's last round would wait for the next invocation, which could hold it again."""
    consumed = _consumed(30)
    dr = FakeDR({c.message_id for c in consumed})
    service, ledger = _service(topology_path, dr, hold_partial_s=0.6)
    ledger.record("ORDERS", consumed)

    report = service.run(max_seconds=0.5)

    assert report.purged == 30


def test_holding_is_on_by_default(topology_path: Path) -> None:
    """A few young keys wait for newer ones unless a deployment sets hold_partial_s to 0 (decision 0024)."""
    consumed = _consumed(30)
    service, ledger = _service(topology_path, FakeDR({c.message_id for c in consumed}))
    ledger.record("ORDERS", consumed)

    result = service.purge_queue("ORDERS", hold=True)

    assert (result.purged, result.held) == (0, 30)


def _holding_at_depth(topology_path: Path, depth: int | None) -> tuple[PurgeService, _Statistics]:
    """A loop's service, 30 young keys recorded and on DR, whose DR statistics answer ``depth``."""
    statistics = _Statistics(depth)
    service, _dr = _holding(topology_path, _consumed(30), statistics, hold_partial_s=0.6, hold_partial_from_depth=5000)
    return service, statistics


def test_a_queue_shallow_on_dr_sends_its_partial_selector_at_once(topology_path: Path) -> None:
    """A pass over a shallow queue costs the broker little; holding would only add lag (decision 0041)."""
    service, _statistics = _holding_at_depth(topology_path, 4999)

    result = service.purge_queue("ORDERS", hold=True)

    assert (result.purged, result.held) == (30, 0)


def test_a_queue_deep_on_dr_holds_its_partial_selector(topology_path: Path) -> None:
    service, _statistics = _holding_at_depth(topology_path, 5000)

    result = service.purge_queue("ORDERS", hold=True)

    assert (result.purged, result.held) == (0, 30)


def test_a_queue_whose_depth_cannot_be_read_holds(topology_path: Path) -> None:
    """An unknown depth keeps the broker's side of the trade: holding costs lag, never a message."""
    service, _statistics = _holding_at_depth(topology_path, None)

    result = service.purge_queue("ORDERS", hold=True)

    assert (result.purged, result.held) == (0, 30)


def test_the_depth_that_decides_a_hold_is_read_once_not_every_round(topology_path: Path) -> None:
    service, statistics = _holding_at_depth(topology_path, 6000)

    rounds = [service.purge_queue("ORDERS", hold=True).held for _ in range(3)]

    assert rounds == [30, 30, 30]
    assert statistics.queries == 1


def test_a_queue_that_became_shallow_stops_holding_at_the_next_depth_read(topology_path: Path) -> None:
    service, statistics = _holding_at_depth(topology_path, 6000)
    assert service.purge_queue("ORDERS", hold=True).held == 30

    statistics.depth = 10
    service.emit_depths()

    assert service.purge_queue("ORDERS", hold=True).purged == 30


# The loop times its pause from the moment a round begins; the hook below sees the round a
# little later, when it reaches the ledger, and that lag differs between two rounds (a first
# round starts its workers). A pause is a few hundred milliseconds and "at once" is a few, so a
# pause is asserted with this much room for the lag, not to the microsecond (CI once measured
# 0.29996 s for a 0.3 s pause).
ROUND_START_LAG_S = 0.05


def _rounds_started(service: PurgeService, monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """When each round began reading ORDERS from the ledger (``time.monotonic()``)."""
    started: list[float] = []
    original = service.ledger.pending

    def pending(queue: str, *args: object, **kwargs: object) -> object:
        if queue == "ORDERS":
            started.append(time.monotonic())
        return original(queue, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(service.ledger, "pending", pending)
    return started


def test_the_loop_pauses_after_a_round_that_removed_all_it_found(
    topology_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The next keys come with the relay's next write: a round at once would only find nothing."""
    service, _dr = _holding(topology_path, _consumed(30), hold_partial_s=0, idle_sleep_s=0.3)
    started = _rounds_started(service, monkeypatch)

    report = service.run(max_seconds=0.45)

    assert report.purged == 30
    assert len(started) == 2
    assert started[1] - started[0] >= 0.3 - ROUND_START_LAG_S


def test_the_loop_pauses_after_a_round_that_left_only_held_keys(
    topology_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Held keys wait for newer ones, and only the relay's next write brings them."""
    consumed = _young_and_selectors_worth(20)
    service, dr = _holding(topology_path, consumed, hold_partial_s=0.6, idle_sleep_s=0.3)
    started = _rounds_started(service, monkeypatch)

    service.run(max_seconds=1.4)  # a run holds nothing in its last second

    assert 0 < len(dr.asked[0]) < len(consumed)  # a full selector sent, the rest held
    assert started[1] - started[0] >= 0.3 - ROUND_START_LAG_S


@dataclass
class SlowDR(FakeDR):
    """A removal that takes ``seconds``: a DR broker dispatching behind a deep backlog."""

    seconds: float = 0.0

    def remove(self, queue: str, keys: list[str], *, deadline: float | None = None) -> RemovalResult:
        time.sleep(self.seconds)
        return super().remove(queue, keys, deadline=deadline)


def test_after_a_round_longer_than_the_pause_the_next_starts_at_once(
    topology_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Keys written during a long removal wait no longer for it: the pause counts from the round's start."""
    consumed = _consumed(30)
    dr = SlowDR({c.message_id for c in consumed}, seconds=0.4)
    service, ledger = _service(topology_path, dr, hold_partial_s=0, idle_sleep_s=0.3)
    ledger.record("ORDERS", consumed)
    started = _rounds_started(service, monkeypatch)

    service.run(max_seconds=0.6)

    assert 0.4 <= started[1] - started[0] < 0.65  # a pause after the round would make it 0.7


def test_rounds_that_read_a_full_batch_follow_each_other_at_once(
    topology_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A backlog: more keys wait behind the batch just removed."""
    service, _dr = _holding(topology_path, _consumed(30), hold_partial_s=0, idle_sleep_s=1.0, batch_keys=10)
    started = _rounds_started(service, monkeypatch)

    report = service.run(max_seconds=0.6)  # shorter than one pause

    assert report.purged == 30
    assert len(started) >= 4  # three full batches, then the round that found the ledger empty


def test_a_round_that_left_keys_pending_is_followed_by_another_at_once(
    topology_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    consumed = _consumed(30)
    dr = FakeDR({c.message_id for c in consumed[:20]})  # ten copies not on DR yet
    service, ledger = _service(topology_path, dr, hold_partial_s=0, idle_sleep_s=1.0)
    ledger.record("ORDERS", consumed)
    started = _rounds_started(service, monkeypatch)

    service.run(max_seconds=0.6)  # shorter than one pause

    assert len(started) >= 2


def test_a_drain_waiting_for_the_purge_is_not_slowed_by_the_pause(topology_path: Path) -> None:
    service, _dr = _holding(topology_path, _consumed(30), hold_partial_s=0, idle_sleep_s=2.0)
    began = time.monotonic()

    report = service.run(max_seconds=5, stop_when_idle=True)

    assert (report.purged, report.pending) == (30, 0)
    assert time.monotonic() - began < 1.0


def test_a_catch_up_is_not_slowed_by_the_pause(topology_path: Path) -> None:
    service, _dr = _holding(topology_path, _consumed(30), hold_partial_s=0, idle_sleep_s=2.0)
    began = time.monotonic()

    report = service.run(max_seconds=5, stop_when_stalled=True)

    assert report.purged == 30
    assert time.monotonic() - began < 1.0


def test_the_loop_reads_the_brokers_depths_at_most_once_a_period_not_every_round(topology_path: Path) -> None:
    """Each read is a connection to a broker (the primary's across regions); rounds come five a second."""
    dr_stats, primary_stats = _Statistics(0), _Statistics(0)
    service = PurgeService(
        memory_ledger(clock=lambda: NOW),
        FakeDR(),
        load_topology(topology_path),
        settings=PurgeSettings(idle_sleep_s=0.05, depths_every_s=0.5),
        dr_statistics=dr_stats,  # type: ignore[arg-type]
        primary_statistics=primary_stats,  # type: ignore[arg-type]
        clock=lambda: NOW,
    )

    report = service.run(max_seconds=1.2)

    assert report.rounds >= 10
    assert dr_stats.queries == primary_stats.queries
    assert 2 <= dr_stats.queries <= 3  # at the first idle round, then every 0.5 s


class _PerQueueDR(FakeDR):
    """A DR broker whose removals, one per synced queue, must all be open at once to proceed."""

    def __init__(self, present: set[str], queues: int, failing: dict[str, BrokerSyncError] | None = None) -> None:
        super().__init__(present)
        self.together = threading.Barrier(queues, timeout=5)  # broken unless every queue's removal waits at once
        self.failing = failing or {}

    def remove(self, queue: str, keys: list[str], *, deadline: float | None = None) -> RemovalResult:
        self.together.wait()
        result = super().remove(queue, keys, deadline=deadline)
        result.error = self.failing.get(queue)
        return result


def test_a_round_removes_from_its_queues_side_by_side(topology_path: Path) -> None:
    orders, payments = _consumed(3), _consumed(2)
    dr = _PerQueueDR({c.message_id for c in orders + payments}, queues=2)
    service, ledger = _service(topology_path, dr)
    ledger.record("ORDERS", orders)
    ledger.record("PAYMENTS", payments)

    report = service.run(max_seconds=0.1, stop_when_idle=True)

    assert (report.queues["ORDERS"].purged, report.queues["PAYMENTS"].purged) == (3, 2)
    assert dr.present == set()


def test_one_queue_worker_works_through_the_queues_in_their_order(topology_path: Path) -> None:
    orders, payments = _consumed(1), _consumed(1)
    dr = FakeDR({c.message_id for c in orders + payments})
    service, ledger = _service(topology_path, dr, queue_workers=1)
    ledger.record("ORDERS", orders)
    ledger.record("PAYMENTS", payments)

    service.run(max_seconds=0.1, stop_when_idle=True)

    assert dr.asked[:2] == [[orders[0].message_id], [payments[0].message_id]]


def test_a_queue_whose_removal_fails_leaves_the_other_queues_removals_marked(topology_path: Path) -> None:
    orders, payments = _consumed(2), _consumed(2)
    dr = _PerQueueDR(
        {c.message_id for c in orders + payments}, queues=2, failing={"ORDERS": BrokerUnavailableError("dropped")}
    )
    service, ledger = _service(topology_path, dr)
    ledger.record("ORDERS", orders)
    ledger.record("PAYMENTS", payments)

    with pytest.raises(BrokerUnavailableError, match="dropped"):
        service.run(max_seconds=0.1)

    # The broker confirmed every removal: the failing queue's are marked too, before the error.
    assert ledger.pending("PAYMENTS") == []
    assert ledger.pending("ORDERS") == []


class _CountingDR(FakeDR):
    """A DR broker that notes how many removals were in progress at once (each takes 50 ms)."""

    def __init__(self, present: set[str]) -> None:
        super().__init__(present)
        self._lock = threading.Lock()
        self._now = 0
        self.most_at_once = 0

    def remove(self, queue: str, keys: list[str], *, deadline: float | None = None) -> RemovalResult:
        with self._lock:
            self._now += 1
            self.most_at_once = max(self.most_at_once, self._now)
        time.sleep(0.05)
        with self._lock:
            self._now -= 1
            return super().remove(queue, keys, deadline=deadline)


@pytest.mark.parametrize("at_once", [1, 2])
def test_without_a_setting_of_its_own_a_round_works_as_many_queues_at_once_as_the_topology_says(
    topology_path: Path, at_once: int
) -> None:
    orders, payments = _consumed(1), _consumed(1)
    dr = _CountingDR({c.message_id for c in orders + payments})
    topology = load_topology(topology_path)
    tuned = topology.model_copy(update={"tuning": topology.tuning.model_copy(update={"queues_at_once": at_once})})
    ledger = memory_ledger(clock=lambda: NOW)
    service = PurgeService(ledger, dr, tuned, clock=lambda: NOW)
    ledger.record("ORDERS", orders)
    ledger.record("PAYMENTS", payments)

    service.run(max_seconds=0.5, stop_when_idle=True)

    assert dr.most_at_once == at_once
    assert dr.present == set()


def test_a_run_keeps_the_remover_s_connection_from_round_to_round_and_closes_it_at_its_end(
    topology_path: Path,
) -> None:
    """Opening a connection per round cost the purge and the DR broker a few ms each (decision 0051)."""
    connector = ScriptedConnector(lambda c, sub, ids: [c.deliver(sub, m) for m in ids])
    remover = SelectorRemover(connector, RemoverSettings(settle_s=0.05, min_group_s=0.0))  # type: ignore[arg-type]
    ledger = memory_ledger(clock=lambda: NOW)
    service = PurgeService(
        ledger, remover, load_topology(topology_path), settings=PurgeSettings(idle_sleep_s=0.05, hold_partial_s=0)
    )
    ledger.record("ORDERS", _consumed(3))
    recording = threading.Thread(target=lambda: (time.sleep(0.2), ledger.record("ORDERS", _consumed(2))))
    recording.start()

    report = service.run(max_seconds=0.6)
    recording.join()

    assert report.purged == 5
    assert len(connector.connections) == 1
    assert len(connector.connections[0].subscriptions) == 2  # two rounds found keys
    assert not connector.connections[0].is_connected()
