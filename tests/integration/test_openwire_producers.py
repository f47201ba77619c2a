"""Messages that OpenWire clients produced leave DR once consumed on the primary, and only those.

Over OpenWire the client library makes each message's id, so its shape is the client's, not
the broker's. These tests produce on the primary with the real ActiveMQ JMS client, once as
itself and once with the connection ids Apache.NMS.ActiveMQ (the .NET client) makes, whose
start stamp is .NET ticks (18 digits, where Java's milliseconds have 13). They consume part
of the messages on the primary over STOMP, run capture and purge to the end, and read DR
with a browse: exactly the unconsumed messages are left, none of them redelivered.

The producer is a small Java program on the broker's own client jar (tests/integration/java).
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from ulid import ULID

from brokersync.broker.stomp import StompConnector
from brokersync.ledger import memory_ledger
from brokersync.topology import Topology
from brokersync_local.world import LocalWorld
from tests.integration.stomp_helpers import receive
from tests.integration.sync_helpers import capture_and_purge
from tests.integration.test_exact_removal import copies_settled, dr_state, primary_ids

pytestmark = pytest.mark.broker

PRODUCER = Path(__file__).parent / "java" / "OpenWireProducer.java"
CLIENT_JARS = "/usr/share/activemq/lib/*"


def produce_over_openwire(world: LocalWorld, queue: str, style: str, correlation_ids: list[str]) -> list[str]:
    """Send one message per correlation id to the primary with the Java client; their JMSMessageIDs."""
    java = shutil.which("java")
    assert java is not None, "java is what the local brokers run on"
    url = f"tcp://127.0.0.1:{world.ports.primary_openwire}"
    done = subprocess.run(
        [java, "-cp", CLIENT_JARS, str(PRODUCER), url, queue, style, *correlation_ids],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    ids = done.stdout.split()
    assert len(ids) == len(correlation_ids), done.stdout
    return ids


@pytest.mark.parametrize("style", ["java", "nms"])
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
