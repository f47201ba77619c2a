"""When a browse may say a copy is not on DR, and when it must say nothing (the broker's side: integration)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from brokersync.broker.statistics import (
    BROKER_MEMORY_FULL_PERCENT,
    CURSOR_HIGH_WATER_PERCENT,
    BrokerStats,
    QueueStats,
    StatisticsSnapshot,
)
from brokersync.exceptions import BrokerUnavailableError
from brokersync.purge import absence
from brokersync.purge.absence import AbsenceCheck
from brokersync.snapshot.browser import SnapshotLine
from brokersync.topology import Queue, load_topology

ON_DR = "ID:app-41000-1795340000000-1:1:-1:1:1"
NOT_ON_DR = "ID:app-41000-1795340000000-1:1:-1:1:2"


class NoBroker:
    """A connector that fails the test if anything connects."""

    def connect(self, *_args: Any, **_kwargs: Any) -> Any:
        raise AssertionError("nothing may be asked of the broker")


@dataclass
class FakeDR:
    """The DR broker as the check sees it: the queue's counters, the broker's memory, and a browse."""

    held: set[str] = field(default_factory=lambda: {ON_DR})
    size: int = 10
    queue_memory: int = 5
    broker_memory: int = 20
    browse_fails: bool = False
    stats_fail: bool = False
    selectors: list[str] = field(default_factory=list)

    def snapshot(self, names: list[str]) -> StatisticsSnapshot:
        if self.stats_fail:
            raise BrokerUnavailableError("no answer")
        stats = {n: QueueStats(n, self.size, 0, 0, 0, 0, 0, 0, "ID:dr", "dr", self.queue_memory) for n in names}
        return StatisticsSnapshot(stats, BrokerStats("ID:dr", "dr", self.broker_memory, 0, 0))

    def lines(self, queue: Queue, selector: str | None = None) -> Iterator[SnapshotLine]:
        assert selector is not None
        self.selectors.append(selector)
        if self.browse_fails:
            raise BrokerUnavailableError("browsing: no frame and no end of browse")
        for message_id in sorted(self.held):
            if f"'{message_id}'" in selector:
                yield SnapshotLine(queue.name, message_id, message_id, "", 0, None, 0)


@pytest.fixture
def dr(monkeypatch: pytest.MonkeyPatch) -> FakeDR:
    fake = FakeDR()
    monkeypatch.setattr(absence, "StatisticsClient", lambda _connector: fake)
    monkeypatch.setattr(absence, "QueueBrowser", lambda *_a, **_k: fake)
    return fake


@pytest.fixture
def orders(topology_path: Path) -> Queue:
    return load_topology(topology_path).queue("ORDERS")


def test_only_ids_the_browse_does_not_find_are_confirmed_absent(dr: FakeDR, orders: Queue) -> None:
    assert AbsenceCheck(NoBroker(), 200_000).absent(orders, [ON_DR, NOT_ON_DR]) == {NOT_ON_DR}  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "state",
    [
        {"size": 200_000},  # as deep as a browse reaches
        {"queue_memory": CURSOR_HIGH_WATER_PERCENT},  # the cursor stops paging in
        {"broker_memory": BROKER_MEMORY_FULL_PERCENT},  # the broker stops paging in
        {"stats_fail": True},
        {"browse_fails": True},
    ],
)
def test_nothing_is_confirmed_absent_when_the_browse_cannot_see_the_whole_queue(
    dr: FakeDR, orders: Queue, state: dict[str, Any]
) -> None:
    for name, value in state.items():
        setattr(dr, name, value)

    assert AbsenceCheck(NoBroker(), 200_000).absent(orders, [NOT_ON_DR]) == set()  # type: ignore[arg-type]


def test_an_id_no_selector_may_name_is_neither_browsed_for_nor_confirmed_absent(orders: Queue) -> None:
    forged = "ID:x' OR JMSMessageID LIKE '%"

    assert AbsenceCheck(NoBroker(), 200_000).absent(orders, [NOT_ON_DR, forged]) == set()  # type: ignore[arg-type]


def test_ids_beyond_the_browses_allowed_per_call_wait_for_a_later_call(dr: FakeDR, orders: Queue) -> None:
    ids = [f"ID:app-41000-1795340000000-1:1:-1:1:{n}" for n in range(10, 1_000)]
    check = AbsenceCheck(NoBroker(), 200_000, max_selectors=2, selector_bytes=1_000)  # type: ignore[arg-type]

    confirmed = check.absent(orders, ids)

    assert len(dr.selectors) == 2
    assert 0 < len(confirmed) < len(ids)
    assert confirmed == set(ids[: len(confirmed)])  # the oldest first; the rest are not confirmed


def test_no_browse_starts_that_could_not_end_before_the_deadline(dr: FakeDR, orders: Queue) -> None:
    check = AbsenceCheck(NoBroker(), 200_000, idle_timeout_s=10.0)  # type: ignore[arg-type]

    assert check.absent(orders, [NOT_ON_DR], deadline=0.0) == set()
    assert dr.selectors == []
