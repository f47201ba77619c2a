"""When a relay that has relayed its time may leave: once the next invocation consumes too, or at its bound."""

from __future__ import annotations

import pytest

from brokersync.capture.handover import Handover
from brokersync.exceptions import BrokerUnavailableError
from tests.fake_clock import FakeClock


class _Consumers:
    """The advisory queue's consumer count, as the broker would report it, one reading at a time."""

    def __init__(self, *counts: int | Exception | None) -> None:
        self.counts = list(counts)
        self.reads = 0

    def __call__(self) -> int | None:
        self.reads += 1
        value = self.counts[min(self.reads, len(self.counts)) - 1]
        if isinstance(value, Exception):
            raise value
        return value


def _begun(consumers: _Consumers, within_s: float = 20.0) -> tuple[Handover, FakeClock]:
    clock = FakeClock()
    handover = Handover(consumers, within_s, poll_s=1.0, clock=clock)
    handover.begin()
    return handover, clock


def test_it_leaves_once_the_broker_counts_one_more_consumer_than_when_it_began_to_wait() -> None:
    handover, clock = _begun(_Consumers(1, 1, 2))

    clock.now += 1.0
    assert not handover.over()
    clock.now += 1.0
    assert handover.over()
    assert handover.handed_over
    assert handover.waited_s() == pytest.approx(2.0)


def test_a_connection_the_broker_still_counts_from_a_killed_run_is_not_taken_for_the_successor() -> None:
    """Two consumers at the start (this relay and a dead one's lingering connection): two is not a successor."""
    handover, clock = _begun(_Consumers(2, 2, 2, 3))

    for _ in range(2):
        clock.now += 1.0
        assert not handover.over()
    clock.now += 1.0
    assert handover.over() and handover.handed_over


def test_without_a_successor_it_leaves_at_its_bound_and_says_it_saw_none() -> None:
    handover, clock = _begun(_Consumers(1), within_s=5.0)

    clock.now += 4.9
    assert not handover.over()
    clock.now += 0.2
    assert handover.over()
    assert not handover.handed_over


def test_an_unreadable_count_at_the_start_means_waiting_to_the_bound_never_leaving_early() -> None:
    handover, clock = _begun(_Consumers(BrokerUnavailableError("no reply"), 5, 5), within_s=5.0)

    clock.now += 3.0
    assert not handover.over()
    clock.now += 2.0
    assert handover.over() and not handover.handed_over


def test_an_unreadable_count_while_waiting_is_not_a_successor() -> None:
    handover, clock = _begun(_Consumers(1, None, OSError("reset"), 2))

    clock.now += 1.0
    assert not handover.over()
    clock.now += 1.0
    assert not handover.over()
    clock.now += 1.0
    assert handover.over() and handover.handed_over


def test_the_broker_is_asked_at_most_once_a_poll() -> None:
    consumers = _Consumers(1)
    handover, clock = _begun(consumers)

    for _ in range(10):
        clock.now += 0.25
        handover.over()

    assert consumers.reads == 1 + 2  # the start, then at +1 s and +2 s


@pytest.mark.parametrize(("within_s", "poll_s"), [(-1.0, 1.0), (5.0, 0.0)])
def test_a_negative_wait_or_a_poll_of_nothing_is_refused(within_s: float, poll_s: float) -> None:
    with pytest.raises(ValueError, match="hand-over"):
        Handover(_Consumers(1), within_s, poll_s=poll_s)
