"""The drill modes the CLI offers are the ones the harness runs."""

from __future__ import annotations

from typing import get_args

from brokersync_cli.main import DRILL_MODES, build_parser
from brokersync_local.drill import REGION_MODES, DrillMode


def test_the_cli_offers_exactly_the_harness_drill_modes() -> None:
    assert list(get_args(DrillMode)) == DRILL_MODES


def test_every_two_region_mode_is_a_drill_mode() -> None:
    assert set(REGION_MODES) <= set(get_args(DrillMode))


def test_the_drill_command_accepts_the_two_region_modes() -> None:
    for mode in REGION_MODES:
        assert build_parser().parse_args(["drill", "--mode", mode]).mode == mode
