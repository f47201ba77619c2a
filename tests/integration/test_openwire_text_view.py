"""Why a staging queue cannot release copies on ActiveMQ 5.x: what a re-send that keeps the id does.

A staging delay (issue 22) or a shallow staging queue for the purge (issue 21) needs copies
held in one queue and released into another with the JMSMessageID they were produced with:
the purge selects by that id and applications deduplicate on it. STOMP and MQTT cannot do it
(every SEND gets a broker-made id). OpenWire can: ``MessageId.textView`` is marshalled
(openwire v10+) and is what ``JMSMessageID``, selectors and STOMP's ``message-id`` header
read. These tests show on the real broker what such a message then is: its id, body and
headers are kept and a selector on its id finds it, **but a STOMP consumer cannot
acknowledge it**. ActiveMQ's STOMP ACK looks the dispatched message up by
``new MessageId(id.toString())``, which parses the text view into the original producer's id
and misses; the message comes back with its redelivery counter raised. Released copies would
be un-ackable by the purge and by every STOMP application after a failover, so BrokerSync does
not stage copies (decision 0014).

The mover is a small Java program on the broker's own client jar (tests/integration/java): the
fact is the broker's, so it is shown on the real broker, not asserted of a model.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from brokersync.broker.stomp import StompConnector
from brokersync.purge.remover import SelectorRemover
from brokersync_local.browsing import browse
from brokersync_local.world import LocalWorld
from tests.integration.java_clients import run_java_client
from tests.integration.stomp_helpers import drain, produce, receive

pytestmark = pytest.mark.broker

STAGED, RELEASED = "BROKERSYNC.TEST.STAGED", "BROKERSYNC.TEST.RELEASED"
#: What the mover takes as its target to remove (consume and ack over OpenWire) instead of re-send.
REMOVE = "-"


def openwire_mover(world: LocalWorld, source: str, target: str, count: int, timeout_ms: int = 20_000) -> list[str]:
    """Run the OpenWire mover on the DR broker; the lines it printed (``original -> seen`` or ``id -> removed``)."""
    printed = run_java_client(
        "ResendWithTextView", world.ports.dr_openwire, source, target, str(count), str(timeout_ms)
    )
    return [line for line in printed.splitlines() if " -> " in line]


def release(world: LocalWorld, count: int) -> list[tuple[str, str]]:
    """STAGED -> RELEASED, each message re-sent with its id as text view: (original id, id consumers see)."""
    return [tuple(line.split(" -> ")) for line in openwire_mover(world, STAGED, RELEASED, count)]  # type: ignore[misc]


def ids(frames: list) -> list[str]:
    return [f.headers["message-id"] for f in frames]


@pytest.fixture
def staged(world: LocalWorld, dr: StompConnector) -> Iterator[list[str]]:
    """Five messages produced (over STOMP) to STAGED; their ids, in queue order."""
    messages = [
        (f"body {n} \u00e9", {"correlation-id": f"01JCORR{n:020d}", "region": "use1", "attempt": str(n), "type": "T"})
        for n in range(5)
    ]
    produce(dr, STAGED, messages)
    yield ids(browse(dr, STAGED))
    # Released messages cannot be acked over STOMP (the point of this file): remove them over OpenWire.
    openwire_mover(world, RELEASED, REMOVE, 100, timeout_ms=1_000)
    drain(dr, STAGED)


def test_a_message_resent_over_openwire_with_its_id_as_text_view_keeps_its_jms_message_id(
    world: LocalWorld, dr: StompConnector, staged: list[str]
) -> None:
    moved = release(world, len(staged))

    assert [original for original, _seen in moved] == staged
    assert all(original == seen for original, seen in moved)
    assert ids(browse(dr, RELEASED)) == staged
    assert browse(dr, STAGED) == []


def test_the_resent_message_keeps_body_correlation_id_properties_and_timestamp(
    world: LocalWorld, dr: StompConnector, staged: list[str]
) -> None:
    before = {f.headers["message-id"]: f for f in browse(dr, STAGED)}
    release(world, len(staged))

    after = {f.headers["message-id"]: f for f in browse(dr, RELEASED)}

    assert after.keys() == before.keys()
    for message_id, frame in after.items():
        original = before[message_id]
        assert frame.body == original.body
        for header in ("correlation-id", "region", "attempt", "type", "timestamp", "persistent", "priority"):
            assert frame.headers.get(header) == original.headers.get(header), header
        assert frame.headers.get("redelivered", "false") == "false"


def test_a_selector_on_the_original_id_selects_the_resent_message(
    world: LocalWorld, dr: StompConnector, staged: list[str]
) -> None:
    release(world, len(staged))
    wanted = staged[1:3]

    found = receive(dr, RELEASED, len(wanted), selector=f"JMSMessageID IN ({', '.join(repr(m) for m in wanted)})")

    assert sorted(ids(found)) == sorted(wanted)


def test_a_stomp_ack_cannot_remove_the_resent_message_and_it_returns_redelivered(
    world: LocalWorld, dr: StompConnector, staged: list[str]
) -> None:
    release(world, len(staged))
    wanted = staged[1:3]

    receive(dr, RELEASED, len(wanted), selector=f"JMSMessageID IN ({', '.join(repr(m) for m in wanted)})", ack=True)

    left = browse(dr, RELEASED)
    assert ids(left) == staged
    redelivered = {f.headers["message-id"] for f in left if f.headers.get("redelivered", "false") != "false"}
    assert redelivered == set(wanted)


def test_an_openwire_consumer_can_remove_the_resent_message(
    world: LocalWorld, dr: StompConnector, staged: list[str]
) -> None:
    release(world, len(staged))

    removed = openwire_mover(world, RELEASED, REMOVE, len(staged), timeout_ms=5_000)

    assert len(removed) == len(staged)
    assert browse(dr, RELEASED) == []


def test_the_purges_remover_reports_an_ack_the_broker_refused_and_marks_nothing_of_it_removed(
    world: LocalWorld, dr: StompConnector, staged: list[str]
) -> None:
    """The broker answers the unmatchable ACK with an ERROR and still confirms the UNSUBSCRIBE after
    it: the remover must not read that receipt as every ack applied. One subscription takes a
    plain message and, last, a resent one; its cumulative ACK names the resent one and is refused,
    so neither is removed and neither may be returned as removed."""
    produce(dr, RELEASED, [("plain", {})])
    [plain] = ids(browse(dr, RELEASED))
    release(world, 1)
    resent = staged[0]

    result = SelectorRemover(dr).remove(RELEASED, [plain, resent])

    assert result.removed == []
    assert sorted(result.refused) == sorted([plain, resent])
    assert sorted(ids(browse(dr, RELEASED))) == sorted([plain, resent])
