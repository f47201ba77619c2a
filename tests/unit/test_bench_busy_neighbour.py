"""The selector scan bench's busy neighbour: a memory streamer that lives exactly as long as the measurement."""

from __future__ import annotations

import pytest

from tests.integration.bench_modules import load_bench


def test_without_the_flag_no_neighbour_is_started() -> None:
    scan = load_bench("selector_scan")
    with scan.busy_neighbour(False) as neighbour:
        assert neighbour is None


def test_the_neighbour_runs_during_the_block_and_has_ended_after_it() -> None:
    scan = load_bench("selector_scan")
    with scan.busy_neighbour(True) as neighbour:
        assert neighbour.poll() is None
    assert neighbour.returncode is not None


def test_the_neighbour_is_stopped_when_the_measurement_fails() -> None:
    scan = load_bench("selector_scan")
    with pytest.raises(RuntimeError), scan.busy_neighbour(True) as neighbour:
        raise RuntimeError("a broker did not start")
    assert neighbour.returncode is not None
