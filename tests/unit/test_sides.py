"""Which broker captures and which purges each queue, given the per-queue active sides."""

from __future__ import annotations

from pathlib import Path

import pytest

from brokersync.roles import RoleAssignment, RoleAssignmentError, apply_roles
from brokersync.sides import capture_duties, in_region, purge_duties
from brokersync.topology import Topology, load_topology

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def pair() -> Topology:
    return load_topology(ROOT / "examples" / "active-active.yaml")


@pytest.fixture
def classic() -> Topology:
    return load_topology(ROOT / "topology.yaml")


def test_without_active_active_queues_the_primary_captures_and_the_dr_broker_purges_the_whole_topology(
    classic: Topology,
) -> None:
    assignment = RoleAssignment.initial(classic)
    [capture] = capture_duties(classic, assignment)
    [purge] = purge_duties(classic, assignment)
    assert (capture.broker.name, capture.view, capture.passive) == (classic.primary.name, classic, frozenset())
    assert (purge.broker.name, purge.view) == (classic.dr.name, classic)


def test_active_active_queues_consumed_on_the_primary_are_drained_on_dr_but_not_recorded(pair: Topology) -> None:
    primary, dr = capture_duties(pair, RoleAssignment.initial(pair))
    assert "CARTS" in primary.queues and not primary.passive
    assert (dr.broker.name, dr.queues, dr.passive) == (pair.dr.name, [], frozenset({"CARTS"}))
    assert [d.broker.name for d in purge_duties(pair, RoleAssignment.initial(pair))] == [pair.dr.name]


def test_a_queue_consumed_on_dr_is_captured_there_and_purged_on_the_primary(pair: Topology) -> None:
    moved = RoleAssignment.initial(pair).moved("CARTS", pair.dr.name, "MOVE exec-1")
    primary, dr = capture_duties(pair, moved)
    assert "CARTS" not in primary.queues and primary.passive == {"CARTS"}
    assert dr.queues == ["CARTS"] and not dr.passive
    assert dr.view.primary.name == pair.dr.name  # the relay on DR plays primary for CARTS
    on_dr, on_primary = purge_duties(pair, moved)
    assert "CARTS" not in on_dr.queues and "ORDERS" in on_dr.queues
    assert (on_primary.broker.name, on_primary.queues) == (pair.primary.name, ["CARTS"])
    assert on_primary.view.dr.name == pair.primary.name
    # The purge on the primary removes copies that came through the DR broker's outflow to it.
    assert on_primary.view.dr_name("CARTS") == pair.copy_name("CARTS", pair.primary)
    assert moved.active_side("CARTS") == pair.dr.name


def test_every_captured_queue_has_exactly_one_capturing_and_one_purging_broker_and_they_differ(
    pair: Topology,
) -> None:
    for assignment in (
        RoleAssignment.initial(pair),
        RoleAssignment.initial(pair).moved("CARTS", pair.dr.name, "m"),
    ):
        for queue in (q.name for q in pair.queues if q.captures_consumed):
            captures = [d.broker.name for d in capture_duties(pair, assignment) if queue in d.queues]
            purges = [d.broker.name for d in purge_duties(pair, assignment) if queue in d.queues]
            assert len(captures) == 1 and len(purges) == 1 and captures != purges


def test_moving_a_queue_back_to_the_primary_leaves_no_override(pair: Topology) -> None:
    there = RoleAssignment.initial(pair).moved("CARTS", pair.dr.name, "m1")
    back = there.moved("CARTS", pair.primary.name, "m2")
    assert back.active == {} and back.epoch == there.epoch + 1


def test_a_failover_moves_every_queue_to_the_new_primary(pair: Topology) -> None:
    moved = RoleAssignment.initial(pair).moved("CARTS", pair.dr.name, "m1")
    after = moved.swapped("FAILOVER exec-2")
    assert after.active == {} and after.active_side("CARTS") == pair.dr.name


def test_the_record_round_trips_its_active_sides(pair: Topology) -> None:
    moved = RoleAssignment.initial(pair).moved("CARTS", pair.dr.name, "m1")
    assert RoleAssignment.from_json(moved.to_json()).active == {"CARTS": pair.dr.name}


@pytest.mark.parametrize(
    ("queue", "broker", "why"),
    [
        ("ORDERS", "orders-usw2", "only active-active"),
        ("AUDIT", "orders-usw2", "only active-active"),
        ("NOPE", "orders-usw2", "does not sync"),
        ("CARTS", "orders-euw1", "topology has"),
    ],
)
def test_an_override_the_topology_cannot_honour_is_refused(pair: Topology, queue: str, broker: str, why: str) -> None:
    bad = RoleAssignment.initial(pair).moved(queue, broker, "m1")
    with pytest.raises(RoleAssignmentError, match=why):
        apply_roles(pair, bad)


def test_a_record_with_a_malformed_active_map_is_not_a_role_assignment() -> None:
    with pytest.raises(RoleAssignmentError, match="active must map"):
        RoleAssignment.from_json('{"primary": "a", "dr": "b", "active": ["CARTS"]}')


def test_each_region_runs_the_duties_of_its_own_broker(pair: Topology) -> None:
    moved = RoleAssignment.initial(pair).moved("CARTS", pair.dr.name, "m1")
    west = in_region(purge_duties(pair, moved), pair.dr.region)
    east = in_region(purge_duties(pair, moved), pair.primary.region)
    assert [d.broker.name for d in west] == [pair.dr.name]
    assert [d.broker.name for d in east] == [pair.primary.name]
