"""Messages that OpenWire clients produced leave DR once consumed on the primary, and only those.

Over OpenWire the client library makes each message's id, so its shape is the client's, not
the broker's. These tests produce on the primary with the real ActiveMQ JMS client: as
itself, with the connection ids Apache.NMS.ActiveMQ (the .NET client) makes, whose start
stamp is .NET ticks (18 digits, where Java's milliseconds have 13), and with a
``connectionIDPrefix`` of its own, which replaces ``ID:<host>`` in every id. They consume part
of the messages on the primary over STOMP, run capture and purge to the end, and read DR
with a browse: exactly the unconsumed messages are left, none of them redelivered.

The producer is a small Java program on the broker's own client jar (tests/integration/java).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from ulid import ULID

from brokersync.broker.stomp import StompConnector
from brokersync.ledger import memory_ledger
from brokersync.topology import PARKED_QUEUE, Topology
from brokersync_local.browsing import browse
from brokersync_local.world import LocalWorld
from tests.integration.java_clients import run_java_client
from tests.integration.stomp_helpers import receive
from tests.integration.sync_helpers import capture_and_purge
from tests.integration.test_exact_removal import copies_settled, dr_state, primary_ids
from tests.integration.test_openwire_text_view import REMOVE, openwire_mover

pytestmark = pytest.mark.broker


def produce_over_openwire(world: LocalWorld, queue: str, style: str, correlation_ids: list[str]) -> list[str]:
    """Send one message per correlation id to the primary with the Java client; their JMSMessageIDs."""
    ids = run_java_client("OpenWireProducer", world.ports.primary_openwire, queue, style, *correlation_ids).split()
    assert len(ids) == len(correlation_ids), ids
    return ids


@pytest.mark.parametrize("style", ["java", "nms", "prefixed"])
@pytest.mark.parametrize("queue", ["ORDERS", "PAYMENTS"])
def test_only_the_consumed_messages_an_openwire_client_produced_leave_dr(
    world: LocalWorld, topology: Topology, primary: StompConnector, dr: StompConnector, style: str, queue: str
) -> None:
    """ORDERS is keyed by correlation id, PAYMENTS by message id; both remove by message id."""
    sent = produce_over_openwire(world, queue, style, [str(ULID()) for _ in range(6)])
    consumed = {f.headers["message-id"] for f in receive(primary, queue, 4)}
    copies_settled(primary, topology, queue)

    capture_and_purge(topology, primary, dr, memory_ledger(), queue=queue)

    on_dr, redelivered = dr_state(dr, queue)
    assert consumed < set(sent)
    assert on_dr == primary_ids(primary, queue) == set(sent) - consumed
    assert redelivered == set()


def send_with_client_set_id(world: LocalWorld, queue: str, message_id: str, correlation_id: str) -> str:
    """One message whose JMSMessageID its client chose, consumed at once on the primary over OpenWire."""
    return run_java_client(
        "ClientSetMessageId", world.ports.primary_openwire, queue, message_id, correlation_id
    ).strip()


@pytest.fixture
def unackable_copies_removed(world: LocalWorld) -> Iterator[None]:
    """A message whose client set its id cannot be acked over STOMP, by the purge or by the pair's emptying."""
    yield
    openwire_mover(world, "ORDERS", REMOVE, 100, timeout_ms=2_000)


@pytest.mark.usefixtures("unackable_copies_removed")
def test_a_consumed_message_whose_client_named_it_after_another_leaves_the_other_on_dr(
    world: LocalWorld, topology: Topology, primary: StompConnector, dr: StompConnector
) -> None:
    """A client may give its message any id (an AMQP message-id, OpenWire's text view), another
    message's included; consuming it must not remove the other's copy from DR. Its advisory is
    parked (``client-set-id``), and nothing on DR is redelivered."""
    [named] = produce_over_openwire(world, "ORDERS", "java", [str(ULID())])
    copies_settled(primary, topology)

    assert send_with_client_set_id(world, "ORDERS", named, str(ULID())) == named
    copies_settled(primary, topology)
    capture_and_purge(topology, primary, dr, memory_ledger())

    on_dr = browse(dr, "ORDERS")
    # The named message, and the consumed one's copy, which no STOMP ACK can take:
    assert [f.headers["message-id"] for f in on_dr] == [named, named]
    assert all(f.headers.get("redelivered", "false") == "false" for f in on_dr)
    [parked] = receive(primary, PARKED_QUEUE, 1)
    assert parked.headers["brokersync-reason"] == "client-set-id"
