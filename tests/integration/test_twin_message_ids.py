"""Two different messages under one id on DR, one of them consumed: the purge removes neither.

A client may set its message's id to any text (``MessageId.textView``; the AMQP transport
does it for every AMQP message-id), another message's included. Named after a message that
was consumed, such a *twin* is selected by the consumed message's id, and a purge
subscription with room for it (its selector names ids whose copies are not all on DR) takes
both; a cumulative ACK naming a frame after the twin then removed the twin, a message never
consumed. Which of the two was consumed cannot be told over STOMP, so the remover now covers
neither, returns the id as ambiguous, and the purge gives the key up: both copies stay.

The twin is sent over OpenWire by a small Java program on the broker's own client jar
(``ClientSetMessageId`` with ``leave``).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from ulid import ULID

from brokersync.broker.stomp import StompConnector
from brokersync.ledger import memory_ledger
from brokersync.purge.remover import SelectorRemover
from brokersync.topology import Topology
from brokersync_local.browsing import browse
from brokersync_local.world import LocalWorld
from tests.integration.java_clients import run_java_client
from tests.integration.stomp_helpers import receive, send
from tests.integration.sync_helpers import capture_and_purge
from tests.integration.test_exact_removal import copies_settled

pytestmark = pytest.mark.broker

QUEUE = "PAYMENTS"  # keyed by message id: the relay records the consumed message's own id
#: A consumed message whose copy is not on DR (removed already, or still on the bridge): it
#: gives a purge subscription the room that lets a twin in.
ABSENT = "ID:absent-41000-1795340000000-1:1:-1:1:1"


@pytest.fixture
def twins_removed(world: LocalWorld) -> Iterator[None]:
    """No STOMP ACK can take a message whose client set its id: remove them over OpenWire."""
    yield
    for port in (world.ports.primary_openwire, world.ports.dr_openwire):
        run_java_client("ResendWithTextView", port, QUEUE, "-", "100", "1000")


def twin_body(message_id: str) -> str:
    """What ClientSetMessageId sends as the body of the message it names ``message_id``."""
    return f"client-set id {message_id}"


def _consumed_twin_and_later(world: LocalWorld, topology: Topology, primary: StompConnector) -> tuple[str, str]:
    """A message consumed on the primary, its twin left there, then one more consumed: (the id, the later id)."""
    send(primary, QUEUE, "consumed", {"which": "first"})
    [first] = receive(primary, QUEUE, 1, selector="which = 'first'")
    consumed = first.headers["message-id"]
    port = world.ports.primary_openwire
    named = run_java_client("ClientSetMessageId", port, QUEUE, consumed, str(ULID()), "leave")
    assert named.strip() == consumed
    send(primary, QUEUE, "consumed after the twin", {"which": "later"})
    [later] = receive(primary, QUEUE, 1, selector="which = 'later'")
    copies_settled(primary, topology, QUEUE)
    return consumed, later.headers["message-id"]


@pytest.mark.usefixtures("twins_removed")
def test_a_subscription_with_room_for_a_twin_removes_neither_copy_of_its_id(
    world: LocalWorld, topology: Topology, primary: StompConnector, dr: StompConnector
) -> None:
    consumed, later = _consumed_twin_and_later(world, topology, primary)

    result = SelectorRemover(dr).remove(QUEUE, [consumed, later, ABSENT])

    on_dr = browse(dr, QUEUE)
    assert result.ambiguous == [consumed]
    assert consumed not in result.removed
    assert sorted(f.body for f in on_dr if f.headers["message-id"] == consumed) == sorted(
        ["consumed", twin_body(consumed)]
    )
    assert [f.body for f in browse(primary, QUEUE)] == [twin_body(consumed)]


@pytest.mark.usefixtures("twins_removed")
def test_the_purge_gives_the_twin_s_id_up_and_removes_everything_else(
    world: LocalWorld, topology: Topology, primary: StompConnector, dr: StompConnector
) -> None:
    consumed, later = _consumed_twin_and_later(world, topology, primary)

    capture_and_purge(topology, primary, dr, memory_ledger(), queue=QUEUE)  # until nothing is pending

    on_dr = browse(dr, QUEUE)
    assert sorted(f.body for f in on_dr) == sorted(["consumed", twin_body(consumed)])
    assert later not in {f.headers["message-id"] for f in on_dr}
