"""Cost figures relative to the application's in the same step take a machine's change of speed out."""

from __future__ import annotations

import pytest

from brokersync_ci.relative_cost import depth_ratio_over_application, over_application

STEP = {"primary_broker": 0.4, "dr_broker": 0.2, "relay": 0.08, "aws_emulator": 0.3, "producer": 0.06, "consumer": 0.04}


def _slower(step: dict[str, float], factor: float) -> dict[str, float]:
    return {name: value * factor for name, value in step.items()}


def test_each_process_is_divided_by_the_producer_and_consumer_together() -> None:
    assert over_application(STEP) == {"primary_broker": 4.0, "dr_broker": 2.0, "relay": 0.8}


def test_the_application_and_the_aws_emulator_are_not_figures_of_their_own() -> None:
    assert not {"producer", "consumer", "aws_emulator"} & over_application(STEP).keys()


def test_a_whole_machine_running_slower_changes_no_relative_figure() -> None:
    assert over_application(_slower(STEP, 1.75)) == over_application(STEP)


def test_a_step_where_the_application_spent_nothing_is_an_error_not_a_division_by_zero() -> None:
    with pytest.raises(ValueError, match="application spent no CPU"):
        over_application({**STEP, "producer": 0.0, "consumer": 0.0})


def test_the_depth_ratio_compares_the_deepest_step_with_the_shallowest_each_relative() -> None:
    deep = {**STEP, "dr_broker": 0.3}
    run = {"sync": {"0": {"cpu_s_per_1000": STEP}, "50000": {"cpu_s_per_1000": _slower(deep, 0.6)}}}

    assert depth_ratio_over_application(run) == 1.5


def test_the_depth_ratio_is_taken_before_the_relative_figures_are_rounded() -> None:
    shallow = {"dr_broker": 0.0044, "producer": 0.5, "consumer": 0.5}
    run = {"sync": {"0": {"cpu_s_per_1000": shallow}, "50000": {"cpu_s_per_1000": {**shallow, "dr_broker": 0.0066}}}}

    assert depth_ratio_over_application(run) == 1.5
