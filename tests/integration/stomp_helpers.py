"""Small STOMP helpers for broker tests: send, receive with a deadline, drain."""

from __future__ import annotations

import queue as queue_mod
import time

import stomp

from brokersync.broker.inbox import FrameInbox
from brokersync.broker.stomp import StompConnector

#: How long a receipt may take on a loaded pair (a broker answers within milliseconds when idle).
RECEIPT_TIMEOUT_S = 10.0


class _Collector(stomp.ConnectionListener):
    def __init__(self) -> None:
        self.frames: queue_mod.Queue[stomp.utils.Frame] = queue_mod.Queue()
        self.receipts: queue_mod.Queue[str] = queue_mod.Queue()

    def on_message(self, frame: stomp.utils.Frame) -> None:
        self.frames.put(frame)

    def on_receipt(self, frame: stomp.utils.Frame) -> None:
        self.receipts.put("")

    def on_error(self, frame: stomp.utils.Frame) -> None:
        """The UNSUBSCRIBE refused (its subscription never existed: an unauthorized read, say) must
        fail the test rather than read as an empty queue. Other errors (an ack the broker
        rejects) are what some tests provoke and check."""
        if frame.headers.get("receipt-id"):
            self.receipts.put(frame.headers.get("message") or "ERROR")


def receive(
    connector: StompConnector,
    queue: str,
    count: int,
    *,
    timeout_s: float = 10.0,
    settle_s: float = 0.0,
    transformation: str | None = None,
    ack: bool = True,
    selector: str | None = None,
) -> list[stomp.utils.Frame]:
    """Consume up to ``count`` frames within ``timeout_s``, then keep listening ``settle_s`` for extras."""
    collector = _Collector()
    connection = connector.connect(collector, name="test-receiver")
    headers = {"activemq.prefetchSize": "100"}
    if transformation:
        headers["transformation"] = transformation
    if selector:
        headers["selector"] = selector
    connection.subscribe(f"/queue/{queue}", id="r", ack="client-individual", headers=headers)
    frames: list[stomp.utils.Frame] = []

    def take(until: float, limit: float) -> None:
        # Acks go out as frames arrive (never from the listener thread), so a prefetch
        # window smaller than ``count`` keeps flowing.
        while len(frames) < limit and time.monotonic() < until:
            try:
                frame = collector.frames.get(timeout=max(0.01, until - time.monotonic()))
            except queue_mod.Empty:
                return
            frames.append(frame)
            if ack:
                connection.ack(frame.headers["ack"])

    try:
        take(time.monotonic() + timeout_s, count)
        take(time.monotonic() + settle_s, float("inf"))
        # The broker handles a connection's frames in order: once the UNSUBSCRIBE's receipt is
        # back, every ack above is applied (and the advisories acks raise are on their queue).
        connection.unsubscribe("r", headers={"receipt": "unsubscribed"})
        deadline = time.monotonic() + RECEIPT_TIMEOUT_S
        while connection.is_connected():  # a dropped connection's acks were never applied: nothing to wait for
            try:
                error = collector.receipts.get(timeout=0.1)
            except queue_mod.Empty:
                if time.monotonic() > deadline:
                    raise AssertionError(f"{queue}: the broker did not confirm the unsubscribe") from None
                continue
            if error:
                raise AssertionError(f"{queue}: the broker refused: {error}")
            break
    finally:
        connection.disconnect()
    return frames


def drain(connector: StompConnector, queue: str, transformation: str | None = None) -> int:
    """Consume and ack everything currently on ``queue``."""
    total = 0
    while True:
        frames = receive(connector, queue, 10_000, timeout_s=0.5, transformation=transformation)
        total += len(frames)
        if not frames:
            return total


def send(connector: StompConnector, queue: str, body: str, headers: dict[str, str]) -> None:
    """Send one message and return once the broker has stored it."""
    produce(connector, queue, [(body, headers)])


def produce(connector: StompConnector, queue: str, messages: list[tuple[str, dict[str, str]]]) -> None:
    """Send every message on one connection; the last SEND carries a receipt, so on return the
    broker has handled them all (it processes a connection's frames in order)."""
    inbox = FrameInbox()
    connection = connector.connect(inbox, name="test-producer")
    try:
        for index, (body, headers) in enumerate(messages):
            extra = {"receipt": "produced"} if index == len(messages) - 1 else {}
            connection.send(f"/queue/{queue}", body, headers={"persistent": "true", **headers, **extra})
        deadline = time.monotonic() + 30
        with inbox.receipt_arrived:
            while "produced" not in inbox.receipts:
                if time.monotonic() > deadline or not connection.is_connected():
                    raise AssertionError(f"the broker did not confirm {len(messages)} sends to {queue}")
                inbox.receipt_arrived.wait(0.5)
    finally:
        connection.disconnect()
