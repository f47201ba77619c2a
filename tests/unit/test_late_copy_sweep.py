"""The late-copy sweep keeps its pace across a warm environment's invocations, and stays within its time.

A DR broker back from an outage can hold thousands of redelivered messages nobody consumed; a
sweep that looked them all up one by one held the first purge invocation after a failback
past its Lambda timeout (decision 0013), and one that looked them up again every minute kept
the purge busy for as long as the backlog stayed (decision 0030).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from types import SimpleNamespace
from typing import Any

import pytest

from brokersync.keys import InvalidKeyError
from brokersync.ledger import memory_ledger
from brokersync.ledger.base import LedgerEntry
from brokersync.metrics import RecordingMetrics
from brokersync.purge.late_copies import CLOCK_SLACK, LateCopySweep, consumed_at_head
from brokersync.snapshot.browser import SnapshotLine
from brokersync.topology import Queue
from tests.fake_clock import FakeClock


def _line(n: int) -> SnapshotLine:
    return SnapshotLine("ORDERS", f"key-{n}", f"ID:copy-{n}", f"key-{n}", 0, None, 1, "/queue/ORDERS.DR")


@dataclass
class SlowLedger:
    """Answers consumed_entries after ``cost_s`` of the clock; ``consumed`` names the keys it holds."""

    clock: FakeClock
    consumed: set[str] = field(default_factory=set)
    cost_s: float = 0.0
    asked: list[str] = field(default_factory=list)
    invalid: set[str] = field(default_factory=set)

    reads: int = 0

    def consumed_entries(self, queue: str, key: str, window: timedelta) -> list[LedgerEntry]:
        if key in self.invalid:
            raise InvalidKeyError(key, "correlation-id")
        n = key.removeprefix("key-")
        return [LedgerEntry(key, 1, f"ID:copy-{n}")] if key in self.consumed else []

    def consumed_entries_of(self, queue: str, keys: list[str], window: timedelta) -> dict[str, list[LedgerEntry]]:
        """One read, however many keys: ``cost_s`` of the clock."""
        self.clock.now += self.cost_s
        self.reads += 1
        self.asked.extend(keys)
        return {key: self.consumed_entries(queue, key, window) for key in keys if key not in self.invalid}


class Browsed(LateCopySweep):
    """The sweep over a fixed queue of redelivered copies instead of a broker's."""

    lines: list[SnapshotLine]

    def _browse(self, connector: Any, queue: Queue) -> Iterator[SnapshotLine]:
        yield from self.lines


def _sweep(clock: FakeClock, copies: int, **settings: Any) -> Browsed:
    sweep = Browsed(clock=clock, **settings)
    sweep.lines = [_line(n) for n in range(copies)]
    return sweep


QUEUE = Queue(name="ORDERS")


def test_a_sweep_waits_its_interval_between_sweeps() -> None:
    now = [100.0]
    sweep = LateCopySweep(interval_s=10.0, clock=lambda: now[0])
    assert sweep.due()
    sweep._last = now[0]  # as a sweep sets it
    now[0] += 9.9
    assert not sweep.due()
    now[0] += 0.2
    assert sweep.due()


def test_a_queues_copies_are_looked_up_in_one_read() -> None:
    clock = FakeClock()
    ledger = SlowLedger(clock, consumed={"key-7", "key-300"})
    sweep = _sweep(clock, copies=500)

    found = sweep._consumed_copies(ledger, None, QUEUE, stop_at=clock.now + 2.0)  # type: ignore[arg-type]

    assert found == ["ID:copy-7", "ID:copy-300"]
    assert ledger.reads == 1 and len(ledger.asked) == 500


def test_a_sweep_whose_budget_is_spent_starts_no_lookup() -> None:
    clock = FakeClock()
    ledger = SlowLedger(clock, consumed={"key-1"})
    sweep = _sweep(clock, copies=5)

    assert sweep._consumed_copies(ledger, None, QUEUE, stop_at=clock.now) is None  # type: ignore[arg-type]
    assert ledger.asked == []


def test_a_sweep_stops_at_the_invocations_deadline_whatever_its_budget() -> None:
    clock = FakeClock()
    ledger = SlowLedger(clock)
    sweep = _sweep(clock, copies=50)

    found = sweep._consumed_copies(ledger, None, QUEUE, stop_at=clock.now + 60, deadline=0.0)  # type: ignore[arg-type]

    assert found is None and ledger.asked == []


def test_the_next_sweep_reaches_the_copies_behind_those_found_unconsumed() -> None:
    clock = FakeClock()
    ledger = SlowLedger(clock, consumed={"key-7"})
    sweep = _sweep(clock, copies=10, max_copies=5)

    first = sweep._consumed_copies(ledger, None, QUEUE, stop_at=clock.now + 60)  # type: ignore[arg-type]
    second = sweep._consumed_copies(ledger, None, QUEUE, stop_at=clock.now + 60)  # type: ignore[arg-type]

    assert first == [] and second == ["ID:copy-7"]
    assert ledger.asked == [f"key-{n}" for n in range(10)]


def test_a_copy_found_unconsumed_is_looked_up_again_after_the_recheck_interval() -> None:
    clock = FakeClock()
    ledger = SlowLedger(clock)
    sweep = _sweep(clock, copies=1, recheck_after_s=60.0)
    sweep._consumed_copies(ledger, None, QUEUE, stop_at=clock.now + 60)  # type: ignore[arg-type]
    ledger.consumed.add("key-0")  # consumed on the primary since (its purge missed this copy)

    clock.now += 59.0
    sweep._forget_old_answers()
    assert sweep._consumed_copies(ledger, None, QUEUE, stop_at=clock.now + 60) == []  # type: ignore[arg-type]
    clock.now += 2.0
    sweep._forget_old_answers()
    assert sweep._consumed_copies(ledger, None, QUEUE, stop_at=clock.now + 60) == ["ID:copy-0"]  # type: ignore[arg-type]


def test_an_odd_key_is_skipped_and_the_copies_after_it_are_still_checked() -> None:
    clock = FakeClock()
    ledger = SlowLedger(clock, consumed={"key-2"}, invalid={"key-1"})
    sweep = _sweep(clock, copies=3)

    assert sweep._consumed_copies(ledger, None, QUEUE, stop_at=clock.now + 60) == ["ID:copy-2"]  # type: ignore[arg-type]


@pytest.mark.parametrize("max_browse", [3, 10])
def test_a_sweep_browses_at_most_max_browse_messages(max_browse: int) -> None:
    clock = FakeClock()
    ledger = SlowLedger(clock)
    sweep = _sweep(clock, copies=20, max_browse=max_browse)

    sweep._consumed_copies(ledger, None, QUEUE, stop_at=clock.now + 60)  # type: ignore[arg-type]

    assert len(ledger.asked) == max_browse


def test_a_removed_copys_message_id_is_remembered_for_the_purge_then_forgotten_with_age() -> None:
    clock = FakeClock()
    sweep = LateCopySweep(clock=clock, remember_removed_s=60.0)
    sweep._removed["ORDERS"] = {"ID:copy-1": clock.now}

    assert sweep.removed("ORDERS") == {"ID:copy-1"}
    clock.now += 61.0
    assert sweep.removed("ORDERS") == set()


def test_a_copy_found_unconsumed_again_waits_twice_as_long_each_time_up_to_the_cap() -> None:
    clock = FakeClock()
    ledger = SlowLedger(clock)
    sweep = _sweep(clock, copies=1, recheck_after_s=60.0, max_recheck_s=200.0)
    looked_up_at = []
    for _ in range(700):  # a sweep every second for 700 s, the copy never consumed
        sweep._forget_old_answers()
        before = len(ledger.asked)
        sweep._consumed_copies(ledger, None, QUEUE, stop_at=clock.now + 60)  # type: ignore[arg-type]
        if len(ledger.asked) > before:
            looked_up_at.append(clock.now - 100.0)
        clock.now += 1.0

    assert looked_up_at == [0.0, 60.0, 180.0, 380.0, 580.0]


def test_a_copy_still_waiting_is_remembered_and_one_gone_for_a_whole_cap_is_forgotten() -> None:
    clock = FakeClock()
    sweep = _sweep(clock, copies=1, recheck_after_s=60.0, max_recheck_s=600.0)
    sweep._consumed_copies(SlowLedger(clock), None, QUEUE, stop_at=clock.now + 60)  # type: ignore[arg-type]

    clock.now += 60.0 + 599.0
    sweep._forget_old_answers()
    assert "ID:copy-0" in sweep._unconsumed
    clock.now += 2.0
    sweep._forget_old_answers()
    assert sweep._unconsumed == {}


def test_a_sweep_names_the_queues_it_had_no_time_to_look_up() -> None:
    """A failback is done only once every queue's head was looked up (``consumed_at_head``)."""
    clock = FakeClock()
    ledger = SlowLedger(clock, cost_s=3.0)
    sweep = _sweep(clock, copies=5, check_budget_s=2.0)
    two_queues = SimpleNamespace(captured_queues=[QUEUE, Queue(name="CARTS")])

    sweep.sweep(ledger, SimpleNamespace(connector=None), two_queues, RecordingMetrics())  # type: ignore[arg-type]

    assert sweep.unchecked == ["CARTS"]  # the lookup of ORDERS took the whole budget


HOUR_MS = 3_600_000


def _head(n: int, produced_ms: int) -> SnapshotLine:
    """A head message of a message-id queue: its key is its own message id."""
    message_id = f"ID:east-1-1795340000000-1:1:1:1:{n}"
    return SnapshotLine("ORDERS", message_id, message_id, "", produced_ms, None, 1, None)


def _failback_heads(clock: FakeClock, lines: list[SnapshotLine], lost_at_ms: int | None = None) -> Browsed:
    """``consumed_at_head``'s sweep over ``lines``."""
    head = consumed_at_head(lost_at_ms=lost_at_ms)
    settings = {name: getattr(head, name) for name in ("selector", "from_production", "lost_at_ms", "max_copies")}
    sweep = Browsed(clock=clock, **settings)
    sweep.lines = lines
    return sweep


def test_a_failback_hours_after_the_loss_finds_heads_consumed_just_before_it() -> None:
    """Their consumes are hours back from now: only their production times find them."""
    clock = FakeClock(now=1_795_350_000.0)
    lost_at = int(clock.now * 1000) - 3 * HOUR_MS
    ledger = memory_ledger(clock=clock)
    consumed, not_consumed = _head(1, lost_at - 2_000), _head(2, lost_at - 1_000)
    ledger.record("ORDERS", [LedgerEntry(consumed.key, lost_at - 60, consumed.message_id)])
    sweep = _failback_heads(clock, [consumed, not_consumed])

    found = sweep._consumed_copies(ledger, None, QUEUE, stop_at=clock.now + 60)  # type: ignore[arg-type]

    assert found == [consumed.message_id]


def test_heads_produced_long_after_the_oldest_head_are_not_looked_up_from_production() -> None:
    """A backlog's production times span hours: one read spans the first PRODUCED_SPAN of them."""
    clock = FakeClock(now=1_795_350_000.0)
    lost_at = int(clock.now * 1000) - 3 * HOUR_MS
    ledger = memory_ledger(clock=clock)
    oldest, later = _head(1, lost_at - 2 * HOUR_MS), _head(2, lost_at - 30 * 60_000)
    ledger.record("ORDERS", [LedgerEntry(h.key, h.timestamp + 5_000, h.message_id) for h in (oldest, later)])
    asked: list[dict[str, int]] = []
    original = ledger.consumed_entries_of

    def recorded(queue: str, keys: Any, window: timedelta, **kw: Any) -> dict[str, list[LedgerEntry]]:
        asked.append(dict(kw.get("from_ms") or {}))
        return original(queue, keys, window, **kw)

    ledger.consumed_entries_of = recorded  # type: ignore[method-assign]
    sweep = _failback_heads(clock, [oldest, later])

    found = sweep._consumed_copies(ledger, None, QUEUE, stop_at=clock.now + 60)  # type: ignore[arg-type]

    assert found == [oldest.message_id]
    assert asked[-1] == {oldest.key: oldest.timestamp - int(CLOCK_SLACK.total_seconds() * 1000)}


def test_the_late_copy_sweep_looks_message_ids_up_back_from_now_only() -> None:
    clock = FakeClock(now=1_795_350_000.0)
    produced = int(clock.now * 1000) - 3 * HOUR_MS
    ledger = memory_ledger(clock=clock)
    copy = _head(1, produced)
    ledger.record("ORDERS", [LedgerEntry(copy.key, produced + 1_000, copy.message_id)])
    sweep = Browsed(clock=clock, max_copies=100)
    sweep.lines = [copy]

    assert sweep._consumed_copies(ledger, None, QUEUE, stop_at=clock.now + 60) == []  # type: ignore[arg-type]


def test_a_backlog_head_consumed_just_before_the_loss_is_found_from_when_the_broker_left() -> None:
    """Produced hours before its consume, consumed hours before the failback: only the loss time finds it."""
    clock = FakeClock(now=1_795_350_000.0)
    lost_at = int(clock.now * 1000) - 3 * HOUR_MS
    ledger = memory_ledger(clock=clock)
    head = _head(1, lost_at - 5 * HOUR_MS)
    ledger.record("ORDERS", [LedgerEntry(head.key, lost_at - 2_000, head.message_id)])

    without = _failback_heads(clock, [head])._consumed_copies(ledger, None, QUEUE, stop_at=clock.now + 60)  # type: ignore[arg-type]
    found = _failback_heads(clock, [head], lost_at_ms=lost_at + 20_000)._consumed_copies(
        ledger,
        None,  # type: ignore[arg-type]
        QUEUE,
        stop_at=clock.now + 60,
    )

    assert (without, found) == ([], [head.message_id])


def test_a_head_consumed_after_the_failover_started_and_its_slack_is_not_taken_for_one_consumed_before() -> None:
    clock = FakeClock(now=1_795_350_000.0)
    lost_at = int(clock.now * 1000) - 3 * HOUR_MS
    ledger = memory_ledger(clock=clock)
    head = _head(1, lost_at - 5 * HOUR_MS)
    ledger.record("ORDERS", [LedgerEntry(head.key, lost_at + 10 * 60_000, head.message_id)])
    sweep = _failback_heads(clock, [head], lost_at_ms=lost_at)

    assert sweep._consumed_copies(ledger, None, QUEUE, stop_at=clock.now + 60) == []  # type: ignore[arg-type]
