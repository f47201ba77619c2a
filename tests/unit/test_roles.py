"""The role record: which broker plays primary now, shared by both regions, changed one epoch at a time."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import boto3
import pytest

from brokersync.failover.errors import TransitionConflictError
from brokersync.ledger import LedgerUnavailableError
from brokersync.ledger.control import ControlRecords, control_model
from brokersync.ledger.schema import create_ledger_table
from brokersync.roles import ROLES_RECORD, RoleAssignment, RoleAssignmentError, RoleStore, apply_roles, roles_here
from brokersync.topology import Topology, load_topology


@pytest.fixture
def topology(topology_path: Path) -> Topology:
    return load_topology(topology_path)


@pytest.fixture
def store(control_records: ControlRecords) -> RoleStore:
    return RoleStore(control_records)


def test_without_a_role_record_the_topology_roles_apply_with_sync_running(topology: Topology, store: RoleStore) -> None:
    assert store.read() is None
    assert store.current(topology).primary.name == "orders-use1"
    assert store.assignment(topology) == RoleAssignment("orders-use1", "orders-usw2", epoch=0, sync_running=True)


def test_a_swapped_assignment_makes_the_dr_broker_primary(topology: Topology, store: RoleStore) -> None:
    store.write(RoleAssignment.initial(topology).swapped("FAILOVER drill"))

    current = store.current(topology)

    assert (current.primary.name, current.dr.name) == ("orders-usw2", "orders-use1")
    assert store.read().epoch == 1  # type: ignore[union-attr]


def test_every_swap_increments_the_epoch_and_records_why(topology: Topology) -> None:
    swapped = RoleAssignment.initial(topology).swapped("SWITCHOVER exec-1")

    assert swapped.epoch == 1
    assert swapped.reason == "SWITCHOVER exec-1"
    assert swapped.changed_at_ms() is not None
    assert RoleAssignment.from_json(swapped.to_json()) == swapped


def test_two_transitions_planned_from_the_same_epoch_cannot_both_win(topology: Topology, store: RoleStore) -> None:
    seen = store.assignment(topology)
    store.write(seen.swapped("FAILOVER exec-a"))

    with pytest.raises(TransitionConflictError, match="exec-a"):
        store.write(seen.swapped("FAILOVER exec-b"))

    assert store.read().reason == "FAILOVER exec-a"  # type: ignore[union-attr]


def test_a_write_that_skips_an_epoch_is_refused(topology: Topology, store: RoleStore) -> None:
    initial = RoleAssignment.initial(topology)
    store.write(initial.next("stop sync", sync_running=False))

    with pytest.raises(TransitionConflictError):
        store.write(replace(initial, epoch=5))


def test_stopping_sync_is_a_new_epoch_that_keeps_the_roles(topology: Topology, store: RoleStore) -> None:
    store.write(RoleAssignment.initial(topology).next("SWITCHOVER exec-1: stop sync", sync_running=False))

    assert store.read() == replace(store.read(), primary="orders-use1", epoch=1, sync_running=False)  # type: ignore[arg-type]


def test_an_assignment_naming_unknown_brokers_is_refused(topology: Topology) -> None:
    with pytest.raises(RoleAssignmentError, match="orders-euw1"):
        apply_roles(topology, RoleAssignment(primary="orders-euw1", dr="orders-use1"))


@pytest.mark.parametrize(
    "document",
    [{"primary": "orders-usw2"}, {"primary": "orders-usw2", "dr": "orders-use1", "sync_running": "no"}],
)
def test_a_record_that_is_not_an_assignment_is_refused(
    store: RoleStore, control_records: ControlRecords, document: dict[str, object]
) -> None:
    control_records.put(ROLES_RECORD, document, replaces=0, writer="someone")

    with pytest.raises(RoleAssignmentError, match="not a role assignment"):
        store.read()


def test_a_role_record_nested_past_the_parser_is_refused_not_a_crash() -> None:
    with pytest.raises(RoleAssignmentError, match="not a role assignment"):
        RoleAssignment.from_json("[" * 100_000 + "]" * 100_000)


def test_a_region_plays_the_role_whose_broker_is_in_it(topology: Topology) -> None:
    assert roles_here(topology, "us-east-1") == {"primary"}
    assert roles_here(topology, "us-west-2") == {"dr"}
    assert roles_here(topology.swapped(), "us-east-1") == {"dr"}


def test_a_pair_in_one_region_plays_both_roles_in_its_one_stack(topology: Topology) -> None:
    one_region = topology.model_copy(
        update={"brokers": [b.model_copy(update={"region": "us-east-1"}) for b in topology.brokers]}
    )

    assert roles_here(one_region, "us-east-1") == {"primary", "dr"}


def test_a_write_planned_from_another_regions_claim_of_the_same_epoch_is_refused(
    topology: Topology, store: RoleStore
) -> None:
    """After a partition both regions may hold an epoch 1, claimed by different executions;
    only the one a write was planned from may be replaced."""
    store.write(RoleAssignment.initial(topology).swapped("FAILOVER exec-west"))
    lost_race = RoleAssignment.initial(topology).swapped("FAILOVER exec-east")

    with pytest.raises(TransitionConflictError, match="exec-west"):
        store.write(lost_race.next("FAILOVER exec-east: start sync"))
    store.write(store.assignment(topology).next("FAILOVER exec-west: start sync"))


def test_a_pair_re_paired_with_a_third_region_keeps_the_surviving_primary(topology: Topology) -> None:
    """After a failover whose old region is gone for good, the operator replaces the lost broker's
    entry with one in a third region; the record written by the failover still names the lost one."""
    lost, survivor = topology.primary, topology.dr
    third = lost.model_copy(update={"name": "orders-euw1", "region": "eu-west-1", "broker_id": "b-third"})
    re_paired = topology.model_copy(update={"brokers": [third, survivor]})
    record = RoleAssignment(primary=survivor.name, dr=lost.name, epoch=3)

    now = apply_roles(re_paired, record)

    assert (now.primary.name, now.dr.name) == ("orders-usw2", "orders-euw1")


def _records(name: str) -> ControlRecords:
    """One region's replica of the ledger (a table of its own in the in-process moto)."""
    table = f"brokersync-{name}-ledger"
    create_ledger_table(boto3.client("dynamodb"), table, Path(__file__).parents[2] / "template.yaml")
    return ControlRecords(control_model(table, region="us-west-2"))


class _Unreachable:
    """A peer replica in a lost region."""

    def __init__(self) -> None:
        self.calls = 0

    def get(self, name: str) -> None:
        self.calls += 1
        raise LedgerUnavailableError("connect timeout")


def test_a_region_behind_on_replication_goes_by_the_peers_higher_epoch(topology: Topology, mocked_aws: None) -> None:
    mine, theirs = _records("mine"), _records("theirs")
    RoleStore(theirs).write(RoleStore(theirs).assignment(topology).swapped("failover"))

    store = RoleStore(mine, peers=[theirs])

    assert store.read().epoch == 1
    assert store.current(topology).primary.name == topology.dr.name


def test_the_own_replica_wins_when_it_is_ahead_of_the_peer(topology: Topology, mocked_aws: None) -> None:
    mine, theirs = _records("mine"), _records("theirs")
    RoleStore(mine).write(RoleStore(mine).assignment(topology).swapped("failover"))

    assert RoleStore(mine, peers=[theirs]).read().epoch == 1


def test_an_unreachable_peer_is_skipped_and_not_asked_again_at_once(topology: Topology, mocked_aws: None) -> None:
    mine, lost = _records("mine"), _Unreachable()
    RoleStore(mine).write(RoleStore(mine).assignment(topology).swapped("failover"))
    store = RoleStore(mine, peers=[lost])  # type: ignore[list-item]

    assert store.read().epoch == 1
    assert store.read().epoch == 1
    assert lost.calls == 1
