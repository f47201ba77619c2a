"""Every way a message leaves the primary queue removes its DR copy: consumed, expired, dead-lettered.

Expiry and DLQ moves raise no consumed advisory; the broker announces them on their own
advisory topics, which the rendered configuration forwards into BROKERSYNC.CONSUMED too.
"""

from __future__ import annotations

import time

import pytest
import stomp
from ulid import ULID

from brokersync.broker.inbox import FrameInbox
from brokersync.broker.stomp import StompConnector
from brokersync.capture.relay import AdvisoryRelay, RelaySettings
from brokersync.capture.writer import LedgerWriter
from brokersync.ledger import memory_ledger
from brokersync.purge.remover import SelectorRemover
from brokersync.purge.service import PurgeService, PurgeSettings
from brokersync.topology import Topology
from brokersync_local.browsing import browse
from tests.integration.stomp_helpers import produce
from tests.integration.test_exact_removal import copies_settled, dr_state

pytestmark = pytest.mark.broker
FAST = RelaySettings(flush_interval_s=0.05, stall_timeout_s=5)


def _relay_and_purge(topology: Topology, primary: StompConnector, dr: StompConnector) -> dict[str, int]:
    ledger = memory_ledger()
    relay = AdvisoryRelay(primary, LedgerWriter(ledger), topology, settings=FAST)
    departed: dict[str, int] = {}
    purge = PurgeService(ledger, SelectorRemover(dr), topology, settings=PurgeSettings(retry_not_found_s=0))
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        report = relay.run(max_seconds=0.5)
        for kind, count in report.departed.items():
            departed[kind] = departed.get(kind, 0) + count
        purge.purge_queue("ORDERS")
        if departed and not ledger.pending("ORDERS"):
            break
    return departed


def test_a_message_that_expires_on_the_primary_leaves_dr(
    topology: Topology, primary: StompConnector, dr: StompConnector
) -> None:
    kept = str(ULID())
    expires = int(time.time() * 1000) + 1_500
    produce(primary, "ORDERS", [("short-lived", {"correlation-id": str(ULID()), "expires": str(expires)})])
    produce(primary, "ORDERS", [("kept", {"correlation-id": kept})])
    copies_settled(primary, topology)
    time.sleep(2)
    browse(primary, "ORDERS")  # the broker expires what it pages in

    departed = _relay_and_purge(topology, primary, dr)

    assert departed.get("expired") == 1
    on_dr, redelivered = dr_state(dr)
    assert [f.headers["correlation-id"] for f in browse(dr, "ORDERS")] == [kept]
    assert len(on_dr) == 1
    assert redelivered == set()


def test_a_message_moved_to_the_dlq_on_the_primary_leaves_dr(
    topology: Topology, primary: StompConnector, dr: StompConnector
) -> None:
    poisoned, kept = str(ULID()), str(ULID())
    produce(primary, "ORDERS", [("poison", {"correlation-id": poisoned}), ("kept", {"correlation-id": kept})])
    copies_settled(primary, topology)
    inbox = FrameInbox()
    connection = primary.connect(inbox, name="test-rejecting-consumer")
    try:
        connection.subscribe(
            "/queue/ORDERS",
            id="reject",
            ack="client-individual",
            headers={"selector": f"JMSCorrelationID = '{poisoned}'"},
        )
        frame = inbox.get(10)
        assert isinstance(frame, stomp.utils.Frame)
        connection.nack(frame.headers["ack"])  # ActiveMQ: a poison ack, straight to the DLQ
        time.sleep(0.5)
    finally:
        connection.disconnect()

    departed = _relay_and_purge(topology, primary, dr)

    assert departed.get("dead-lettered") == 1
    assert [f.headers["correlation-id"] for f in browse(dr, "ORDERS")] == [kept]
    assert dr_state(dr)[1] == set()
    # The poisoned message stays in ActiveMQ.DLQ: the rendered authorization lets none of our
    # groups read it (it is the customer's), and no test counts what the DLQ holds.
