"""Only the broker and BrokerSync write what BrokerSync trusts, on the real pair.

The local brokers run the rendered authorization map with the users Amazon MQ would hold
(``brokersync_local.wrapper.LOCAL_USERS``): ``app`` is an application user, ``receipts`` a
receipt publisher, and unauthenticated harness connections act as BrokerSync's own group.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import pytest
import stomp
from ulid import ULID

from brokersync.broker.stomp import BrokerCredentials, StompConnector
from brokersync.capture.relay import AdvisoryRelay, RelaySettings
from brokersync.capture.writer import LedgerWriter
from brokersync.ledger import memory_ledger
from brokersync.topology import (
    CONSUMED_ADVISORY_PREFIX,
    CONSUMED_QUEUE,
    DEAD_LETTER_QUEUE,
    PARKED_QUEUE,
    RECEIPTS_QUEUE,
    Topology,
)
from brokersync_local.browsing import browse
from brokersync_local.wrapper import APPLICATION_USER, OPERATOR_USER, RECEIPT_USER, LocalUser
from tests.integration.stomp_helpers import receive

pytestmark = pytest.mark.broker


class _Replies(stomp.ConnectionListener):
    def __init__(self) -> None:
        self.receipts: set[str] = set()
        self.errors: list[stomp.utils.Frame] = []

    def on_receipt(self, frame: stomp.utils.Frame) -> None:
        self.receipts.add(frame.headers.get("receipt-id", ""))

    def on_error(self, frame: stomp.utils.Frame) -> None:
        self.errors.append(frame)


def _accepted(user: LocalUser, connector: StompConnector, what: str, frame: Callable[[Any], None]) -> bool:
    """Whether the broker accepted ``frame`` (sent with receipt ``done``) from ``user`` rather than refusing it."""
    as_user = StompConnector(
        [f"stomp://{e.host}:{e.port}" for e in connector.endpoints], BrokerCredentials(user.username, user.password)
    )
    replies = _Replies()
    connection = as_user.connect(replies, name="test-second-user")
    try:
        frame(connection)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and "done" not in replies.receipts and not replies.errors:
            time.sleep(0.05)
    finally:
        if connection.is_connected():
            connection.disconnect()
    assert "done" in replies.receipts or replies.errors, f"no reply to {what}"
    return "done" in replies.receipts and not replies.errors


def _send_as(user: LocalUser, connector: StompConnector, destination: str, body: str = "forged") -> bool:
    """Whether the broker accepted a SEND from ``user`` (a receipt) rather than refusing it (an ERROR)."""
    headers = {"receipt": "done", "persistent": "true"}
    return _accepted(user, connector, f"a SEND to {destination}", lambda c: c.send(destination, body, headers=headers))


def _subscribe_as(user: LocalUser, connector: StompConnector, destination: str) -> bool:
    """Whether the broker accepted a SUBSCRIBE from ``user`` (a receipt) rather than refusing it (an ERROR)."""
    return _accepted(
        user,
        connector,
        f"a SUBSCRIBE to {destination}",
        lambda c: c.subscribe(destination, id="s", ack="client-individual", headers={"receipt": "done"}),
    )


@pytest.mark.parametrize(
    "destination",
    [
        f"/queue/{CONSUMED_QUEUE}",
        f"/queue/{RECEIPTS_QUEUE}",
        f"/queue/{PARKED_QUEUE}",
        "/queue/ORDERS.DR",
        f"/topic/{CONSUMED_ADVISORY_PREFIX}ORDERS",
    ],
)
def test_an_application_user_cannot_write_what_brokersync_trusts(primary: StompConnector, destination: str) -> None:
    assert not _send_as(APPLICATION_USER, primary, destination)


def test_an_application_user_may_use_its_synced_queue(primary: StompConnector, dr: StompConnector) -> None:
    assert _send_as(APPLICATION_USER, primary, "/queue/ORDERS", "an order")
    assert len(receive(primary, "ORDERS", 1)) == 1


def test_an_application_user_cannot_consume_a_sync_queue_s_copies_on_dr(
    primary: StompConnector, dr: StompConnector
) -> None:
    """A failover: URI listing both brokers would otherwise consume copies there, unrecorded."""
    assert _subscribe_as(APPLICATION_USER, primary, "/queue/ORDERS")
    assert not _subscribe_as(APPLICATION_USER, dr, "/queue/ORDERS")
    assert _subscribe_as(APPLICATION_USER, dr, "/queue/AUDIT"), "a mirror queue is consumed on DR too"


def test_an_application_user_cannot_write_the_dr_brokers_inbound_queue(dr: StompConnector) -> None:
    assert not _send_as(APPLICATION_USER, dr, "/queue/ORDERS.DR")


def test_a_receipt_publisher_may_write_receipts_and_nothing_else_of_brokersync(primary: StompConnector) -> None:
    assert not _send_as(RECEIPT_USER, primary, f"/queue/{CONSUMED_QUEUE}")
    assert _send_as(RECEIPT_USER, primary, f"/queue/{RECEIPTS_QUEUE}", "{}")
    receive(primary, RECEIPTS_QUEUE, 1)


def test_an_operator_may_read_the_dead_letter_queue_and_an_application_user_may_not(primary: StompConnector) -> None:
    """The rendered map denies what no entry names: without a grant no client could read the DLQ."""
    assert _subscribe_as(OPERATOR_USER, primary, f"/queue/{DEAD_LETTER_QUEUE}")
    assert not _subscribe_as(APPLICATION_USER, primary, f"/queue/{DEAD_LETTER_QUEUE}")


def test_an_advisory_a_client_sends_is_parked_as_forged_and_a_real_one_is_captured(
    topology: Topology, primary: StompConnector
) -> None:
    """Even a client allowed to write the advisory topic cannot pass its message off as the broker's."""
    forged_key = str(ULID())
    body = json.dumps({"ActiveMQTextMessage": {"correlationId": forged_key, "brokerOutTime": 1795340000000}})
    connection = primary.connect(name="test-forger")
    connection.send(
        f"/topic/{CONSUMED_ADVISORY_PREFIX}ORDERS",
        body,
        headers={"orignalMessageId": "ID:forger-1-1795340000000-1:1:-1:1:1", "orignalDestination": "queue://ORDERS"},
    )
    connection.disconnect()
    real_key = str(ULID())
    connection = primary.connect(name="test-producer")
    connection.send("/queue/ORDERS", "real", headers={"correlation-id": real_key, "persistent": "true"})
    connection.disconnect()
    assert len(receive(primary, "ORDERS", 1)) == 1
    ledger = memory_ledger()

    report = AdvisoryRelay(primary, LedgerWriter(ledger), topology, settings=RelaySettings(flush_interval_s=0.05)).run(
        max_seconds=2
    )

    assert report.parked["forged"] == 1
    assert [p.key for p in ledger.pending("ORDERS")] == [real_key]
    [parked] = browse(primary, PARKED_QUEUE)
    assert parked.headers["brokersync-reason"] == "forged"
