"""The late-copy sweep keeps its pace across a warm environment's invocations, and stays within its time.

Each redelivered copy costs one ledger query. A DR broker back from an outage can hold
thousands of redelivered messages nobody consumed; a sweep that looked them all up held the
first purge invocation after a failback past its Lambda timeout (decision 0013).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import pytest

from brokersync.keys import InvalidKeyError
from brokersync.ledger.base import LedgerEntry
from brokersync.purge.late_copies import LateCopySweep
from brokersync.snapshot.browser import SnapshotLine
from brokersync.topology import Queue


def _line(n: int) -> SnapshotLine:
    return SnapshotLine("ORDERS", f"key-{n}", f"ID:copy-{n}", f"key-{n}", 0, None, 1, "/queue/ORDERS.DR")


@dataclass
class Clock:
    now: float = 100.0

    def __call__(self) -> float:
        return self.now


@dataclass
class SlowLedger:
    """Answers consumed_entries after ``cost_s`` of the clock; ``consumed`` names the keys it holds."""

    clock: Clock
    consumed: set[str] = field(default_factory=set)
    cost_s: float = 0.0
    asked: list[str] = field(default_factory=list)
    invalid: set[str] = field(default_factory=set)

    def consumed_entries(self, queue: str, key: str, window: timedelta) -> list[LedgerEntry]:
        self.clock.now += self.cost_s
        self.asked.append(key)
        if key in self.invalid:
            raise InvalidKeyError(key, "correlation-id")
        n = key.removeprefix("key-")
        return [LedgerEntry(key, 1, f"ID:copy-{n}")] if key in self.consumed else []


class Browsed(LateCopySweep):
    """The sweep over a fixed queue of redelivered copies instead of a broker's."""

    lines: list[SnapshotLine]

    def _browse(self, connector: Any, queue: Queue) -> Iterator[SnapshotLine]:
        yield from self.lines


def _sweep(clock: Clock, copies: int, **settings: Any) -> Browsed:
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


def test_a_sweep_stops_looking_up_copies_once_its_budget_is_spent() -> None:
    clock = Clock()
    ledger = SlowLedger(clock, cost_s=0.5)
    sweep = _sweep(clock, copies=500, check_budget_s=2.0)

    sweep._consumed_copies(ledger, None, QUEUE, stop_at=clock.now + 2.0)  # type: ignore[arg-type]

    assert len(ledger.asked) == 4


def test_a_sweep_stops_at_the_invocations_deadline_whatever_its_budget() -> None:
    clock = Clock()
    ledger = SlowLedger(clock)
    sweep = _sweep(clock, copies=50)

    found = sweep._consumed_copies(ledger, None, QUEUE, stop_at=clock.now + 60, deadline=0.0)  # type: ignore[arg-type]

    assert found == [] and ledger.asked == []


def test_the_next_sweep_reaches_the_copies_behind_those_found_unconsumed() -> None:
    clock = Clock()
    ledger = SlowLedger(clock, consumed={"key-7"})
    sweep = _sweep(clock, copies=10, max_copies=5)

    first = sweep._consumed_copies(ledger, None, QUEUE, stop_at=clock.now + 60)  # type: ignore[arg-type]
    second = sweep._consumed_copies(ledger, None, QUEUE, stop_at=clock.now + 60)  # type: ignore[arg-type]

    assert first == [] and second == ["ID:copy-7"]
    assert ledger.asked == [f"key-{n}" for n in range(10)]


def test_a_copy_found_unconsumed_is_looked_up_again_after_the_recheck_interval() -> None:
    clock = Clock()
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
    clock = Clock()
    ledger = SlowLedger(clock, consumed={"key-2"}, invalid={"key-1"})
    sweep = _sweep(clock, copies=3)

    assert sweep._consumed_copies(ledger, None, QUEUE, stop_at=clock.now + 60) == ["ID:copy-2"]  # type: ignore[arg-type]


@pytest.mark.parametrize("max_browse", [3, 10])
def test_a_sweep_browses_at_most_max_browse_messages(max_browse: int) -> None:
    clock = Clock()
    ledger = SlowLedger(clock)
    sweep = _sweep(clock, copies=20, max_browse=max_browse)

    sweep._consumed_copies(ledger, None, QUEUE, stop_at=clock.now + 60)  # type: ignore[arg-type]

    assert len(ledger.asked) == max_browse


def test_a_removed_copys_message_id_is_remembered_for_the_purge_then_forgotten_with_age() -> None:
    clock = Clock()
    sweep = LateCopySweep(clock=clock, remember_removed_s=60.0)
    sweep._removed["ORDERS"] = {"ID:copy-1": clock.now}

    assert sweep.removed("ORDERS") == {"ID:copy-1"}
    clock.now += 61.0
    assert sweep.removed("ORDERS") == set()
