"""Every JMS message type a real client sends leaves DR once consumed on the primary, and only then.

The purge removes over STOMP, where a frame's body is text or bytes; an OpenWire client also
sends maps, serialized objects, streams, messages with no body, bodies of megabytes, and bodies
its connection factory compressed. The purge must remove each of them by its id like any other, without
the broker redelivering (or failing to deliver) the ones it must leave. Produced with the
real ActiveMQ JMS client (tests/integration/java/TypedProducer.java), consumed in part on
the primary over STOMP as the other tests do; DR is read with a browse.
"""

from __future__ import annotations

import pytest
from ulid import ULID

from brokersync.broker.stomp import StompConnector
from brokersync.ledger import memory_ledger
from brokersync.topology import Topology
from brokersync_local.world import LocalWorld
from tests.integration.java_clients import run_java_client
from tests.integration.stomp_helpers import receive
from tests.integration.sync_helpers import capture_and_purge
from tests.integration.test_exact_removal import copies_settled, dr_state, primary_ids

pytestmark = pytest.mark.broker

#: ``large`` is a 3 MiB text body: a STOMP frame far larger than any read the purge makes at once.
TYPES = ["text", "large", "bytes", "map", "object", "stream", "bare"]


def produce_typed(world: LocalWorld, queue: str, kind: str, compress: str, count: int) -> list[str]:
    """``count`` messages of JMS type ``kind`` sent to the primary with the Java client; their ids."""
    keys = [str(ULID()) for _ in range(count)]
    ids = run_java_client("TypedProducer", world.ports.primary_openwire, queue, kind, compress, *keys).split()
    assert len(ids) == count, ids
    return ids


@pytest.mark.parametrize("compress", ["plain", "compressed"])
@pytest.mark.parametrize("kind", TYPES)
def test_only_the_consumed_messages_of_each_jms_type_leave_dr(
    world: LocalWorld, topology: Topology, primary: StompConnector, dr: StompConnector, kind: str, compress: str
) -> None:
    sent = produce_typed(world, "ORDERS", kind, compress, 5)
    consumed = {f.headers["message-id"] for f in receive(primary, "ORDERS", 3)}
    copies_settled(primary, topology)

    capture_and_purge(topology, primary, dr, memory_ledger())

    on_dr, redelivered = dr_state(dr)
    assert consumed < set(sent)
    assert on_dr == primary_ids(primary) == set(sent) - consumed
    assert redelivered == set()
