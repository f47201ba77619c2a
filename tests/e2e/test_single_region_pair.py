"""A pair in one region (a redundant broker beside the first): one stack plays both roles, drilled."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from brokersync_local.world import WorldPorts
from tests.e2e.drilling import drill
from tests.ports import shifted_ports

pytestmark = pytest.mark.broker
ROOT = Path(__file__).resolve().parents[2]
SINGLE_REGION_PAIR = ROOT / "examples" / "single-region-pair.yaml"
PORTS = shifted_ports(
    WorldPorts(primary_openwire=61796, primary_stomp=61793, dr_openwire=62796, dr_stomp=62793, aws=5195)
)


def _drill(mode: str, tmp_path: Path) -> dict[str, Any]:
    return drill(mode, SINGLE_REGION_PAIR, tmp_path, PORTS, report=None)


def test_a_switchover_in_one_region_loses_and_duplicates_nothing_and_purges_the_old_primary(tmp_path: Path) -> None:
    outcome = _drill("switchover", tmp_path)

    assert outcome["pair_region"] == "us-east-1"
    assert outcome["consumed_primary"] > 0 and outcome["consumed_dr"] > 0
    assert (outcome["lost"], outcome["duplicates"]) == (0, 0)
    assert (outcome["pending_purge_after"], outcome["already_consumed_on_old_primary"]) == (0, 0)


def test_a_failover_in_one_region_loses_at_most_the_bridge_and_duplicates_at_most_the_unpurged(
    tmp_path: Path,
) -> None:
    outcome = _drill("failover", tmp_path)

    assert outcome["lost_not_in_bridge"] == 0
    assert outcome["duplicates"] - outcome["duplicates_on_the_wire"] <= outcome["pending_purge_at_kill"]
    assert outcome["left_on_new_primary"] == 0
