"""The late-copy sweep keeps its pace across a warm environment's invocations."""

from __future__ import annotations

from brokersync.purge.late_copies import LateCopySweep


def test_a_sweep_waits_its_interval_between_sweeps() -> None:
    now = [100.0]
    sweep = LateCopySweep(interval_s=10.0, clock=lambda: now[0])
    assert sweep.due()
    sweep._last = now[0]  # as a sweep sets it
    now[0] += 9.9
    assert not sweep.due()
    now[0] += 0.2
    assert sweep.due()
