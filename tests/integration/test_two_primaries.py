"""An old primary back from a lost region, still running the primary role: the two brokers refuse each other's copies.

Until its failback makes it DR, a returning primary and the new one both run the primary
configuration and each bridge connects to the other. If either accepted the other's copies,
a copy would travel there and back and return with a hop count the bridge never forwards
again, stranded in the new primary's outflow. Real brokers, because the refusal is the
broker's authorization map.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from brokersync.broker.statistics import StatisticsClient
from brokersync.broker.stomp import StompConnector
from brokersync.render import render_configuration
from brokersync.topology import load_topology
from brokersync_local.world import LocalWorld, WorldPorts
from brokersync_local.wrapper import wrap_for_local
from tests.ports import shifted_ports

pytestmark = pytest.mark.broker
PORTS = shifted_ports(
    WorldPorts(primary_openwire=61756, primary_stomp=61753, dr_openwire=62756, dr_stomp=62753, aws=5155)
)


def _restart_dr_broker_as(world: LocalWorld, role: str) -> None:
    """Run the DR broker with ``role``'s configuration (``primary``: as after a failover to it)."""
    broker = world.brokers["dr"]
    broker.pid = broker.pid or world.read_env()["dr"]["pid"]
    broker.stop()
    topology = world.topology.swapped() if role == "primary" else world.topology
    broker.prepare(wrap_for_local(render_configuration(topology, role), broker.name, broker.ports))  # type: ignore[arg-type]
    broker.start()
    broker.wait_ready(60)


@pytest.fixture(scope="module")
def two_primaries(topology_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalWorld]:
    world = LocalWorld(load_topology(topology_path), tmp_path_factory.mktemp("two-primaries"), PORTS)
    world.up(timeout_s=90, log=lambda _m: None)
    try:
        _restart_dr_broker_as(world, "primary")
        yield world
    finally:
        world.destroy()


def _depths(connector: StompConnector, names: list[str]) -> dict[str, int]:
    return {name: stats.size for name, stats in StatisticsClient(connector).queue_stats(names).items()}


def test_a_copy_between_two_primaries_stays_in_its_outflow_and_arrives_once_the_peer_is_dr(
    two_primaries: LocalWorld,
) -> None:
    world = two_primaries
    old = StompConnector(world.topology.primary.stomp)
    new = StompConnector(world.topology.dr.stomp)
    connection = old.connect(name="returning-primary-app")
    for n in range(20):
        connection.send("/queue/ORDERS", f"left behind {n}", headers={"persistent": "true", "correlation-id": f"k{n}"})
    connection.disconnect()
    time.sleep(5)  # several bridge attempts in both directions

    assert _depths(old, ["ORDERS", "ORDERS.DR"]) == {"ORDERS": 20, "ORDERS.DR": 20}
    assert _depths(new, ["ORDERS", "ORDERS.DR"]) == {"ORDERS": 0, "ORDERS.DR": 0}

    _restart_dr_broker_as(world, "dr")
    deadline = time.monotonic() + 60
    while _depths(new, ["ORDERS"])["ORDERS"] < 20 and time.monotonic() < deadline:
        time.sleep(0.5)

    assert _depths(new, ["ORDERS"])["ORDERS"] == 20
    assert _depths(old, ["ORDERS.DR"])["ORDERS.DR"] == 0
