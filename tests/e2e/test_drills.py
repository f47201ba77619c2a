"""Drills on a real pair of their own: what each mode loses and duplicates, measured exactly."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from brokersync_local.world import WorldPorts
from tests.e2e.drilling import drill
from tests.ports import shifted_ports

pytestmark = pytest.mark.broker
PORTS = shifted_ports(
    WorldPorts(primary_openwire=61676, primary_stomp=61673, dr_openwire=62676, dr_stomp=62673, aws=5075)
)


def _drill(mode: str, topology_path: Path, tmp_path: Path) -> dict[str, Any]:
    return drill(mode, topology_path, tmp_path, PORTS)


@pytest.fixture(scope="module")
def switchover(topology_path: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One switchover drill, read by the tests below: each asserts its own part of the outcome."""
    return _drill("switchover", topology_path, tmp_path_factory.mktemp("switchover"))


def test_a_switchover_loses_nothing_and_duplicates_nothing(switchover: dict[str, Any]) -> None:
    outcome = switchover

    assert outcome["produced"] > 2000
    assert (outcome["lost"], outcome["duplicates"]) == (0, 0)
    assert outcome["consumed_primary"] > 0 and outcome["consumed_dr"] > 0
    assert Path(outcome["report"]).read_text().count("<svg") == 3


def test_after_a_switchover_what_is_consumed_on_the_new_primary_is_purged_from_the_old(
    switchover: dict[str, Any],
) -> None:
    outcome = switchover

    assert outcome["consumed_dr"] > 0
    assert (outcome["pending_purge_after"], outcome["already_consumed_on_old_primary"]) == (0, 0), outcome


def test_a_switchover_reboots_no_broker_with_an_advisory_its_relay_has_not_read(switchover: dict[str, Any]) -> None:
    """An advisory unread at a reboot is gone: the audit would raise AdvisoriesLost for nothing lost."""
    assert switchover["advisories_lost"] == 0, switchover


def test_a_switchover_raises_nothing_unexpected_in_the_relay(switchover: dict[str, Any]) -> None:
    """The local relay worker retries such a pass; in AWS it is a failed invocation and an Errors alarm."""
    assert switchover["relay_unexpected_errors"] == 0, switchover


def test_a_failover_loses_at_most_the_copies_in_the_bridge_and_duplicates_at_most_the_unpurged(
    topology_path: Path, tmp_path: Path
) -> None:
    outcome = _drill("failover", topology_path, tmp_path)

    assert outcome["consumed_dr"] > 0
    assert outcome["lost"] <= outcome["in_bridge_at_kill"]
    assert outcome["lost_not_in_bridge"] == 0
    # Each duplicate was pending purge on DR at the kill, or a consumed message's copy already on
    # the wire to DR then (the rest of the killed broker's outflow never arrives anywhere).
    assert outcome["duplicates"] - outcome["duplicates_on_the_wire"] <= outcome["pending_purge_at_kill"]


def test_a_failback_leaves_no_already_consumed_message_on_the_old_primary(topology_path: Path, tmp_path: Path) -> None:
    outcome = _drill("failback", topology_path, tmp_path)

    assert outcome["already_consumed_on_old_primary"] == 0, outcome  # its left_on_old_primary says why
    assert outcome["lost"] <= outcome["in_bridge_at_kill"]
