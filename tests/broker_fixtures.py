"""A real primary/DR pair (and moto), started once per test session on ports of its own.

Loaded as a plugin from ``tests/conftest.py`` so integration and end-to-end tests share one pair;
it starts only when a test asks for it.

The ports differ from `brokersync local up`'s defaults so that a demo left running does not
collide with the test suite.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest

from brokersync.broker.statistics import StatisticsClient
from brokersync.broker.stomp import StompConnector
from brokersync.ledger import Ledger, dynamodb_ledger
from brokersync.ledger.schema import create_ledger_table
from brokersync.topology import Topology, load_topology
from brokersync_local.world import LocalWorld, WorldPorts
from tests.emptying import empty_pair
from tests.ports import shifted_ports

TEST_PORTS = shifted_ports(
    WorldPorts(primary_openwire=61626, primary_stomp=61623, dr_openwire=62626, dr_stomp=62623, aws=5015)
)


@pytest.fixture(scope="session")
def world(tmp_path_factory: pytest.TempPathFactory, topology_path: Path) -> Iterator[LocalWorld]:
    world = LocalWorld(load_topology(topology_path), tmp_path_factory.mktemp("world"), TEST_PORTS)
    world.up(timeout_s=90, log=lambda _msg: None)
    try:
        yield world
    finally:
        world.destroy()


@pytest.fixture(scope="session")
def topology(world: LocalWorld) -> Topology:
    """The topology as the local world runs it (endpoints on loopback)."""
    return world.topology


@pytest.fixture(scope="session")
def primary(world: LocalWorld) -> StompConnector:
    return StompConnector(world.topology.primary.stomp)


@pytest.fixture(scope="session")
def dr(world: LocalWorld) -> StompConnector:
    return StompConnector(world.topology.dr.stomp)


@pytest.fixture(scope="session")
def dr_stats(dr: StompConnector) -> StatisticsClient:
    return StatisticsClient(dr)


@pytest.fixture(scope="session")
def primary_stats(primary: StompConnector) -> StatisticsClient:
    return StatisticsClient(primary)


@pytest.fixture(autouse=True)
def empty_queues(request: pytest.FixtureRequest) -> Iterator[None]:
    """Every broker test starts and ends with the synced queues and the capture queues empty."""
    if request.node.get_closest_marker("broker") is None:
        yield
        return
    world: LocalWorld = request.getfixturevalue("world")
    yield
    empty_pair(world.topology)


@pytest.fixture
def ledger(world: LocalWorld, project_root: Path, aws_credentials: None) -> Iterator[Ledger]:
    """A fresh ledger table in the world's moto, created from template.yaml."""
    table = f"ledger-{uuid.uuid4().hex[:8]}"
    client = boto3.client("dynamodb", endpoint_url=world.moto.endpoint, region_name="us-west-2")
    create_ledger_table(client, table, project_root / "template.yaml")
    yield dynamodb_ledger(table, region="us-west-2", host=world.moto.endpoint)
    client.delete_table(TableName=table)
