"""The benches' yardstick: what a fixed unit of work cost in CPU while a step ran."""

from __future__ import annotations

import time

import pytest

from brokersync_ci.machine_speed import SpeedProbe, in_probe_units, probe_units, summary


def test_a_step_is_read_against_the_mean_unit_the_processes_paid_over_it() -> None:
    """Bimodal, as on this VM: the mean weighs the two states by their time, the median picks one."""
    read = summary([7.0, 7.0, 7.0, 12.0, 12.0])

    assert (read["unit_cpu_ms"], read["median_ms"], read["samples"]) == (9.0, 7.0, 5)
    assert read["p10_ms"] <= 7.0 and read["p90_ms"] >= 12.0


def test_a_probe_that_measured_nothing_reads_as_no_yardstick_and_converts_nothing() -> None:
    read = summary([])

    assert (read["unit_cpu_ms"], read["median_ms"], read["samples"]) == (None, None, 0)
    assert in_probe_units({"dr_broker": 0.2}, read["unit_cpu_ms"]) is None


def test_a_cost_in_probe_units_is_the_cpu_per_1000_over_one_units_cpu() -> None:
    assert in_probe_units({"dr_broker": 0.2, "relay": 0.09}, 8.0) == {"dr_broker": 25.0, "relay": 11.25}


def test_the_probe_runs_in_a_process_of_its_own_and_reports_its_units_when_stopped() -> None:
    probe = SpeedProbe(interval_s=0.2)

    with probe:
        time.sleep(1.5)
        read = probe.stop()

    assert read["samples"] >= 2 and read["unit_cpu_ms"] > 0


def test_a_probe_needs_an_interval() -> None:
    with pytest.raises(ValueError, match="interval"):
        SpeedProbe(interval_s=0)


def test_one_cost_in_probe_units_reads_the_same_and_none_without_a_probe() -> None:
    assert (probe_units(0.2, 8.0), probe_units(0.2, None)) == (25.0, None)
