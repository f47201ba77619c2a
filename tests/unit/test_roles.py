"""The role parameter: which broker plays primary now, whatever topology.yaml said at set-up."""

from __future__ import annotations

from pathlib import Path

import boto3
import pytest

from brokersync.roles import AS_IN_TOPOLOGY, RoleAssignment, RoleAssignmentError, RoleStore, apply_roles
from brokersync.topology import Topology, load_topology


@pytest.fixture
def topology(topology_path: Path) -> Topology:
    return load_topology(topology_path)


@pytest.fixture
def store(mocked_aws: None) -> RoleStore:
    return RoleStore(boto3.client("ssm"))


def test_without_a_role_parameter_the_topology_roles_apply(topology: Topology, store: RoleStore) -> None:
    assert store.read() is None
    assert store.current(topology).primary.name == "orders-use1"


def test_a_swapped_assignment_makes_the_dr_broker_primary(topology: Topology, store: RoleStore) -> None:
    store.write(RoleAssignment.initial(topology).swapped("FAILOVER drill"))

    current = store.current(topology)

    assert (current.primary.name, current.dr.name) == ("orders-usw2", "orders-use1")


def test_every_swap_increments_the_epoch_and_records_why(topology: Topology) -> None:
    swapped = RoleAssignment.initial(topology).swapped("SWITCHOVER exec-1")

    assert swapped.epoch == 1
    assert swapped.reason == "SWITCHOVER exec-1"
    assert swapped.changed_at_ms() is not None
    assert RoleAssignment.from_json(swapped.to_json()) == swapped


def test_an_assignment_naming_unknown_brokers_is_refused(topology: Topology) -> None:
    with pytest.raises(RoleAssignmentError, match="orders-euw1"):
        apply_roles(topology, RoleAssignment(primary="orders-euw1", dr="orders-use1"))


def test_a_parameter_that_is_not_an_assignment_is_refused(store: RoleStore) -> None:
    store.ssm.put_parameter(Name=store.name, Value="primary=orders-usw2", Type="String")

    with pytest.raises(RoleAssignmentError, match="not a role assignment"):
        store.read()


def test_the_value_the_stack_seeds_means_roles_as_in_the_topology(topology: Topology, store: RoleStore) -> None:
    store.put(AS_IN_TOPOLOGY)

    assert store.read() is None
    assert store.current(topology).primary.name == "orders-use1"
