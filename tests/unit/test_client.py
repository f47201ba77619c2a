"""Client helpers: producers stamp ULIDs, consumers publish receipts the receipts function accepts."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from ulid import ULID

from brokersync.capture.receipts import parse_receipt
from brokersync.client import ReceiptPublisher, already_consumed, send
from brokersync.keys import ULID_PATTERN, InvalidKeyError
from brokersync.ledger import memory_ledger
from brokersync.topology import load_topology


class Sent:
    def __init__(self) -> None:
        self.frames: list[tuple[str, Any, dict[str, str]]] = []

    def send(self, destination: str, body: Any, content_type: str | None = None, headers: dict | None = None) -> None:
        self.frames.append((destination, body, headers or {}))


def test_send_stamps_a_fresh_ulid_correlation_id_and_persistence() -> None:
    connection = Sent()

    key = send(connection, "ORDERS", "body", headers={"tenant": "acme"})

    [(destination, body, headers)] = connection.frames
    assert ULID_PATTERN.match(key)
    assert (destination, body) == ("/queue/ORDERS", "body")
    assert headers == {"tenant": "acme", "correlation-id": key, "persistent": "true"}


def test_send_refuses_a_correlation_id_that_could_never_be_purged() -> None:
    with pytest.raises(InvalidKeyError):
        send(Sent(), "ORDERS", "body", correlation_id="order-42")


def test_a_published_receipt_is_one_the_receipts_function_accepts(topology_path: Path) -> None:
    connection = Sent()

    message_id = "ID:app-41000-1795340000000-1:1:-1:1:7"
    ReceiptPublisher(connection).publish(
        "ORDERS", "01KAQ3ZC9W4T0V5GQ6N8M2R7XH", message_id, consumed_at_ms=1795340000000
    )

    [(destination, body, headers)] = connection.frames
    assert destination == "/queue/BROKERSYNC.RECEIPTS"
    assert headers["persistent"] == "true"
    record = parse_receipt(body, load_topology(topology_path))
    assert (record.key, record.message_id) == ("01KAQ3ZC9W4T0V5GQ6N8M2R7XH", message_id)


@pytest.mark.parametrize("queue", ["ORDERS,PAYMENTS", "ORDERS.*", "ORDERS.>", "", "BROKERSYNC.RECEIPTS"])
def test_send_refuses_a_destination_that_is_not_one_plain_queue_and_sends_nothing(queue: str) -> None:
    connection = Sent()

    with pytest.raises(ValueError, match=r"queue name|reserved prefix"):
        send(connection, queue, "body")
    assert connection.frames == []


MESSAGE_ID = "ID:app-41000-1795340000000-1:1:-1:1:7"
ULID_KEY = "01KAQ3ZC9W4T0V5GQ6N8M2R7XH"


@pytest.mark.parametrize(
    ("queue", "key", "message_id", "consumed_at_ms", "error"),
    [
        ("ORDERS", ULID_KEY, None, 1795340000000, "needs the consumed message's id"),
        ("ORDERS", "order-42", MESSAGE_ID, 1795340000000, "order-42"),
        ("ORDERS", ULID_KEY, "ID:x\n", 1795340000000, "ID:x"),
        ("ORDERS", ULID_KEY, MESSAGE_ID, 1795340000, "epoch milliseconds"),
        ("ORDERS,AUDIT", ULID_KEY, MESSAGE_ID, 1795340000000, "plain queue name"),
        ("PAYMENTS", MESSAGE_ID, MESSAGE_ID + "0", 1795340000000, "differs from the message-id key"),
    ],
    ids=[
        "ulid-without-message-id",
        "key-not-a-key",
        "message-id-not-one",
        "time-in-seconds",
        "two-queues",
        "message-id-key-with-another-id",
    ],
)
def test_a_receipt_the_function_would_refuse_is_refused_before_it_is_sent(
    queue: str, key: str, message_id: str | None, consumed_at_ms: int, error: str
) -> None:
    connection = Sent()

    with pytest.raises((InvalidKeyError, ValueError), match=error):
        ReceiptPublisher(connection).publish(queue, key, message_id, consumed_at_ms=consumed_at_ms)
    assert connection.frames == []


def test_a_message_id_receipt_needs_no_separate_message_id(topology_path: Path) -> None:
    connection = Sent()

    ReceiptPublisher(connection).publish("PAYMENTS", MESSAGE_ID)

    [(_, body, _)] = connection.frames
    assert parse_receipt(body, load_topology(topology_path)).key == MESSAGE_ID


def test_already_consumed_asks_the_ledger() -> None:
    ledger = memory_ledger()
    key = send(Sent(), "ORDERS", "body")
    ledger.record("ORDERS", [(key, ULID.from_str(key).milliseconds + 500)])

    assert already_consumed(ledger, "ORDERS", key, timedelta(minutes=5))
    assert not already_consumed(ledger, "PAYMENTS", key, timedelta(minutes=5))
