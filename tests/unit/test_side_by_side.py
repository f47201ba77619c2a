"""Work on several queues at once: every result in order, every started piece finished, the first failure raised."""

from __future__ import annotations

import threading
import time

import pytest

from brokersync.side_by_side import SerialMetrics, each


def test_results_come_back_in_the_items_order_whatever_order_they_end_in() -> None:
    def slower_first(seconds: float) -> float:
        time.sleep(seconds)
        return seconds

    assert each([0.2, 0.1, 0.0], slower_first, workers=3) == [0.2, 0.1, 0.0]


def test_pieces_run_at_once_up_to_the_workers() -> None:
    together = threading.Barrier(3, timeout=5)  # broken (and raising) unless all three wait at once

    assert each(range(3), lambda i: together.wait() is not None and i, workers=3) == [0, 1, 2]


def test_one_worker_runs_each_piece_in_the_callers_thread() -> None:
    caller = threading.current_thread()

    assert each(range(3), lambda _i: threading.current_thread() is caller, workers=1) == [True] * 3


def test_one_worker_stops_at_the_first_failure_as_a_loop_would() -> None:
    started: list[int] = []

    def piece(i: int) -> int:
        started.append(i)
        if i == 1:
            raise ValueError("piece 1")
        return i

    with pytest.raises(ValueError, match="piece 1"):
        each(range(4), piece, workers=1)
    assert started == [0, 1]


def test_a_failure_is_raised_only_once_the_pieces_already_started_have_ended() -> None:
    finished = threading.Event()
    both_started = threading.Barrier(2, timeout=5)

    def piece(i: int) -> None:
        both_started.wait()
        if i == 0:
            raise ValueError("piece 0")
        time.sleep(0.2)
        finished.set()

    with pytest.raises(ValueError, match="piece 0"):
        each(range(2), piece, workers=2)
    assert finished.is_set()


def test_the_first_failure_in_the_items_order_is_the_one_raised() -> None:
    def piece(i: int) -> None:
        time.sleep(0.1 if i == 0 else 0.0)
        raise ValueError(f"piece {i}")

    with pytest.raises(ValueError, match="piece 0"):
        each(range(2), piece, workers=2)


class _RacySink:
    """Adds by read, pause, write: two threads adding at once lose one of their values."""

    def __init__(self) -> None:
        self.total = 0.0

    def add_metric(self, name: str, unit: str, value: float) -> None:
        before = self.total
        time.sleep(0.0001)
        self.total = before + value


def test_a_shared_metrics_sink_keeps_every_value_added_from_many_threads() -> None:
    sink = _RacySink()
    shared = SerialMetrics(sink)

    each(range(4), lambda _i: [shared.add_metric("Purged", "Count", 1) for _ in range(50)], workers=4)

    assert sink.total == 200
