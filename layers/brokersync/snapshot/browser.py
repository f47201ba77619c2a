"""Browsing a queue as a stream of small records.

A STOMP browser subscription (``browser: true``) is ActiveMQ's one read with no side effect:
nothing is delivered, acked or redelivered, so the redelivery counters the purge invariant
watches stay as they were. Frames are turned into :class:`SnapshotLine` as they arrive and
the bodies dropped at once, so memory holds lines, not messages. ActiveMQ returns at most
the queue policy's ``maxBrowsePageSize`` messages (400 unless raised): the DR role's
rendered policy raises it (``tuning.dr.max_browse_page_size``), and a browse that returns
exactly that many is reported as possibly truncated rather than passed off as complete.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import asdict, dataclass

import stomp

from brokersync.broker.inbox import DISCONNECTED, FrameInbox
from brokersync.broker.stomp import CONNECTION_LOST, StompConnector, unavailable_if_lost, without_tcp_delays
from brokersync.exceptions import BrokerUnavailableError
from brokersync.topology import Queue


@dataclass(frozen=True)
class SnapshotLine:
    """One message on a queue, as the reconciliation reads it (a JSON line)."""

    queue: str
    key: str
    message_id: str
    correlation_id: str
    timestamp: int
    #: ActiveMQ's STOMP frames carry no brokerInTime header; None unless a broker sends one.
    broker_in_time: int | None
    size: int
    #: Set on messages that arrived through the copy path (``/queue/Q.DR``, forwarded into Q);
    #: absent on messages produced on this broker itself, e.g. stranded on an old primary. The
    #: reconciliation never takes a message without it as gone from the primary.
    original_destination: str | None = None

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


def _int(value: str | None) -> int:
    try:
        return int(value or 0)
    except ValueError:
        return 0


def snapshot_line(queue: Queue, frame: stomp.utils.Frame) -> SnapshotLine:
    """The line for one browsed frame; ``key`` is what the ledger records for this queue."""
    headers = frame.headers
    message_id = headers.get("message-id", "")
    correlation_id = headers.get("correlation-id", "")
    key = correlation_id if queue.sync_key == "correlation-id" else message_id
    if not key and queue.message_id_fallback:
        key = message_id
    body = frame.body
    size = len(body.encode("utf-8")) if isinstance(body, str) else len(body or b"")
    return SnapshotLine(
        queue=queue.name,
        key=key,
        message_id=message_id,
        correlation_id=correlation_id,
        timestamp=_int(headers.get("timestamp")),
        broker_in_time=_int(headers["brokerInTime"]) if "brokerInTime" in headers else None,
        size=size,
        original_destination=headers.get("original-destination") or None,
    )


class QueueBrowser:
    """Browse one queue at a time on one broker, yielding lines in queue order."""

    def __init__(self, connector: StompConnector, idle_timeout_s: float = 30.0, prefetch: int = 500) -> None:
        self.connector = connector
        self.idle_timeout_s = idle_timeout_s
        self.prefetch = prefetch

    def lines(self, queue: Queue, selector: str | None = None) -> Iterator[SnapshotLine]:
        """Every message of ``queue`` (those ``selector`` selects, if given), in queue order."""
        inbox = FrameInbox()
        connection = self.connector.connect(inbox, name=f"brokersync-snapshot-{queue.name}")
        without_tcp_delays(connection)  # a browse waits on the broker's frames, as a removal call does (decision 0052)
        headers = {"browser": "true", "activemq.prefetchSize": str(self.prefetch)}
        if selector:
            headers["selector"] = selector
        try:
            with unavailable_if_lost(f"{queue.name} was to be browsed"):
                connection.subscribe(f"/queue/{queue.name}", id="snapshot", ack="auto", headers=headers)
            while True:
                item = inbox.get(self.idle_timeout_s)
                if item is None:
                    raise BrokerUnavailableError(
                        f"browsing {queue.name}: no frame for {self.idle_timeout_s:.0f}s and no end of browse"
                    )
                if item is DISCONNECTED:
                    raise BrokerUnavailableError(f"browsing {queue.name}: the broker closed the connection")
                frame: stomp.utils.Frame = item  # type: ignore[assignment]
                if frame.headers.get("browser") == "end":
                    return
                yield snapshot_line(queue, frame)
        finally:
            with contextlib.suppress(*CONNECTION_LOST):  # the broker went away first: nothing to release
                connection.disconnect()


def oldest_timestamp_ms(connector: StompConnector, queue: Queue, idle_timeout_s: float = 10.0) -> int | None:
    """The JMS timestamp of the message at the head of ``queue`` (None when it is empty); a browse, no side effect."""
    lines = QueueBrowser(connector, idle_timeout_s=idle_timeout_s, prefetch=1).lines(queue)
    try:
        head = next(lines, None)
    finally:
        lines.close()  # ends the browse and disconnects
    return head.timestamp if head is not None and head.timestamp else None
