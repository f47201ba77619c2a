"""Virtual topics keep working on brokers that run a rendered configuration, and their queues sync.

A broker whose configuration has no ``destinationInterceptors`` runs ActiveMQ's default
virtual topic: a message published to ``VirtualTopic.X`` reaches every ``Consumer.<name>.VirtualTopic.X``
queue. The composite queues a render adds are interceptors too and would replace that default,
so the render spells it out (``brokersync.render.merge``). These tests run a pair whose
topology syncs one such consumer queue and lets the application user publish to virtual
topics: a publication reaches the consumer queues on the primary, the synced one is copied to
DR, and consuming it there removes the copy.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from brokersync.broker.stomp import BrokerCredentials, StompConnector
from brokersync.ledger import memory_ledger
from brokersync.topology import Queue, Topology, load_topology
from brokersync_local.browsing import browse
from brokersync_local.world import LocalWorld, WorldPorts
from brokersync_local.wrapper import APPLICATION_USER
from tests.integration.own_pairs import Pair, emptied_after, ids_once_there, own_pair
from tests.integration.stomp_helpers import receive
from tests.integration.sync_helpers import capture_and_purge
from tests.integration.test_exact_removal import copies_settled, dr_state, primary_ids

pytestmark = pytest.mark.broker
PORTS = WorldPorts(primary_openwire=61916, primary_stomp=61913, dr_openwire=62916, dr_stomp=62913, aws=5315)
TOPIC = "VirtualTopic.Orders"
#: Synced: its messages are copied to DR and purged there once consumed.
SYNCED = f"Consumer.Billing.{TOPIC}"
#: Not in the topology: a second subscriber's queue, on the primary only.
UNSYNCED = f"Consumer.Audit.{TOPIC}"


@pytest.fixture(scope="module")
def virtual_pair(topology_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalWorld]:
    shipped = load_topology(topology_path)
    access = shipped.access.model_copy(
        update={
            "application_topics": ["VirtualTopic.>"],
            # Not "Consumer.*.VirtualTopic.>": that would reach the synced queue's .DR outflow,
            # which a render refuses; the synced queue's own grants come with the topology.
            "application_queues": [*shipped.access.application_queues, UNSYNCED],
        }
    )
    topology = shipped.model_copy(
        update={"queues": [*shipped.queues, Queue(name=SYNCED, sync_key="message-id")], "access": access}
    )
    with own_pair(topology, tmp_path_factory.mktemp("virtual-topics"), PORTS) as world:
        yield world


def as_application(topology: Topology) -> StompConnector:
    """The primary, as the application user (BrokerSync's own user may not touch other queues)."""
    user = BrokerCredentials(APPLICATION_USER.username, APPLICATION_USER.password)
    return StompConnector(topology.primary.stomp, user)


@pytest.fixture
def pair(virtual_pair: LocalWorld) -> Iterator[Pair]:
    # A virtual topic forwards only into consumer queues that exist: the subscriber's first
    # subscription makes its queue (the synced one is declared by the render).
    receive(as_application(virtual_pair.topology), UNSYNCED, 1, timeout_s=0.5)
    with emptied_after(virtual_pair, [SYNCED]) as pair:
        yield pair
    receive(as_application(virtual_pair.topology), UNSYNCED, 1_000, timeout_s=1)


def publish(topology: Topology, count: int) -> None:
    """``count`` persistent messages to the virtual topic, as the application user, each with a receipt."""
    connection = as_application(topology).connect()
    try:
        for n in range(count):
            connection.send(f"/topic/{TOPIC}", f"event {n}", headers={"persistent": "true", "receipt": f"r{n}"})
    finally:
        connection.disconnect(receipt="bye")


def test_a_publication_reaches_every_consumer_queue_and_the_synced_one_is_copied_to_dr(
    pair: Pair,
) -> None:
    topology, primary, dr = pair
    publish(topology, 3)

    synced = ids_once_there(primary, SYNCED, 3)
    assert len(ids_once_there(as_application(topology), UNSYNCED, 3)) == 3
    copies_settled(primary, topology, SYNCED)
    assert {f.headers["message-id"] for f in browse(dr, SYNCED)} == synced
    assert browse(dr, UNSYNCED) == []


def test_consuming_a_synced_consumer_queue_removes_exactly_those_copies_from_dr(
    pair: Pair,
) -> None:
    topology, primary, dr = pair
    publish(topology, 4)
    ids_once_there(primary, SYNCED, 4)
    copies_settled(primary, topology, SYNCED)

    consumed = {f.headers["message-id"] for f in receive(primary, SYNCED, 2)}
    capture_and_purge(topology, primary, dr, memory_ledger(), queue=SYNCED)

    on_dr, redelivered = dr_state(dr, SYNCED)
    assert len(consumed) == 2
    assert on_dr == primary_ids(primary, SYNCED)
    assert len(on_dr) == 2 and not consumed & on_dr
    assert redelivered == set()
