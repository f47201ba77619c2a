"""Drills on an active-active queue: produced to in both regions, consumed on one side at a time.

The pair runs ``examples/active-active.yaml``; the drill's applications use ``CARTS`` and a
second producer writes to the DR broker throughout, as a front end in the DR region would.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from brokersync.topology import load_topology
from brokersync_local.drill import drill_queue
from brokersync_local.errors import LocalWorldError
from brokersync_local.world import WorldPorts
from tests.e2e.drilling import drill
from tests.ports import shifted_ports

pytestmark = pytest.mark.broker
ROOT = Path(__file__).resolve().parents[2]
TOPOLOGY = ROOT / "examples" / "active-active.yaml"
PORTS = shifted_ports(
    WorldPorts(primary_openwire=61826, primary_stomp=61823, dr_openwire=62826, dr_stomp=62823, aws=5225)
)


def _drill(mode: str, tmp_path: Path) -> dict[str, Any]:
    return drill(mode, TOPOLOGY, tmp_path, PORTS, queue="CARTS")


def test_a_switchover_of_an_active_active_queue_loses_and_duplicates_nothing_from_either_region(
    tmp_path: Path,
) -> None:
    outcome = _drill("switchover", tmp_path)
    origins = outcome["by_origin"]

    assert (outcome["lost"], outcome["duplicates"]) == (0, 0)
    assert all(origin["produced"] > 0 for origin in origins.values())
    assert all(origin["consumed_primary"] > 0 for origin in origins.values())
    assert (outcome["pending_purge_after"], outcome["already_consumed_on_old_primary"]) == (0, 0), outcome
    assert outcome["advisories_lost"] == 0, outcome  # both relays drained before the reboots (0055)


def test_a_switchover_after_a_queue_moved_to_dr_loses_and_duplicates_nothing_and_leaves_no_advisory_unread(
    tmp_path: Path,
) -> None:
    """The switchover reboots the broker whose relay captures the moved queue: it drains that relay first (0055)."""
    outcome = _drill("move-then-switchover", tmp_path)

    assert (outcome["lost"], outcome["duplicates"]) == (0, 0), outcome
    assert outcome["consumed_primary"] > 0 and outcome["consumed_dr"] > 0
    assert (outcome["pending_purge_after"], outcome["already_consumed_on_old_primary"]) == (0, 0), outcome
    assert outcome["advisories_lost"] == 0, outcome


def test_a_failover_of_an_active_active_queue_loses_nothing_beyond_the_bridge_and_bounds_duplicates(
    tmp_path: Path,
) -> None:
    outcome = _drill("failover", tmp_path)

    assert outcome["lost_not_in_bridge"] == 0
    assert outcome["duplicates"] - outcome["duplicates_on_the_wire"] <= outcome["pending_purge_at_kill"]
    assert sum(o["produced"] for o in outcome["by_origin"].values()) == outcome["produced"]
    assert "by_origin" in Path(outcome["report"]).read_text()


def test_moving_one_queues_consumption_under_load_loses_duplicates_and_leaves_behind_nothing(
    tmp_path: Path,
) -> None:
    """Producers on both brokers never stop; the queue's consumers stop on the primary, the move
    runs, they start on DR. What DR consumes afterwards must leave the primary (the purge now runs there)."""
    outcome = _drill("move-queue", tmp_path)
    topology = load_topology(TOPOLOGY)

    assert (outcome["lost"], outcome["duplicates"]) == (0, 0)
    assert outcome["consumed_primary"] > 0 and outcome["consumed_dr"] > 0
    assert (outcome["pending_purge_after"], outcome["already_consumed_on_old_primary"]) == (0, 0), outcome
    assert outcome["by_origin"][topology.dr.name]["produced"] > 0


def test_a_move_drill_refuses_a_queue_that_is_not_active_active() -> None:
    with pytest.raises(LocalWorldError, match="only an active-active queue"):
        drill_queue(load_topology(TOPOLOGY), "ORDERS", "move-queue")


def test_a_drill_refuses_a_queue_whose_consumption_is_not_removed() -> None:
    with pytest.raises(LocalWorldError, match="AUDIT"):
        drill_queue(load_topology(TOPOLOGY), "AUDIT")


REGION_PORTS = shifted_ports(
    WorldPorts(primary_openwire=61846, primary_stomp=61843, dr_openwire=62846, dr_stomp=62843, aws=5245)
)


def test_the_primarys_region_lost_with_producers_in_both_regions_loses_nothing_beyond_the_bridge(
    tmp_path: Path,
) -> None:
    """Two regions: the DR region's producer keeps writing while the primary's region is partitioned away."""
    outcome = drill("region-loss", TOPOLOGY, tmp_path, REGION_PORTS, queue="CARTS", duration=24, kill_at=14)

    assert outcome["lost_not_in_bridge"] == 0
    # Each duplicate was pending purge on DR at the kill, or a consumed message's copy in the
    # bridge, which the returning region delivers to the new primary after any purge could act.
    assert outcome["duplicates"] - outcome["duplicates_from_bridge"] <= outcome["pending_purge_at_kill"]
    assert outcome["duplicates_from_bridge"] <= outcome["in_bridge_at_kill"]
    assert outcome["by_origin"][load_topology(TOPOLOGY).dr.name]["lost"] == 0  # produced on the survivor
    # Once the rejoined broker's purge has caught up, nothing consumed is left on it (decision 0013).
    assert outcome["already_consumed_on_old_primary"] == 0


def test_a_queue_moved_to_dr_then_lost_with_its_region_comes_back_without_loss_and_within_its_duplicate_bound(
    tmp_path: Path,
) -> None:
    """Two regions: CARTS moves to DR under load, the DR region is lost while it consumes CARTS,
    and CARTS moves back to the primary with the old side lost; then the region returns."""
    outcome = drill("move-then-region-loss", TOPOLOGY, tmp_path, REGION_PORTS, queue="CARTS", duration=32, kill_at=None)

    assert outcome["lost"] == 0
    assert outcome["consumed_dr"] > 0  # the queue really was consumed in the region that was lost
    assert outcome["duplicates"] - outcome["duplicates_from_bridge"] <= outcome["pending_purge_at_kill"]
    assert outcome["duplicates_from_bridge"] <= outcome["in_bridge_at_kill"]
    # Nothing consumed is left on either broker once the returned region's purge has run.
    assert outcome["consumed_left_on"] == {"orders-use1": 0, "orders-usw2": 0}
