"""Helpers for applications on either side of the pair.

* Producers call :func:`send`, which stamps a fresh ULID as the JMS correlation id: the
  sync key the ledger stores and the DR purge selects on. ULIDs sort by time, which is what
  makes "consumed in the last N minutes" a key-range query.
* Consumers that cannot rely on advisories (they consume through a path that raises none,
  or the primary restarts often) publish a receipt per message with :class:`ReceiptPublisher`.
* After a failover, consumers on the new primary can ask :func:`already_consumed` before
  processing a message, closing the duplicate window the purge had not yet covered.
"""

from __future__ import annotations

import time
from datetime import timedelta
from typing import TYPE_CHECKING, Protocol

from ulid import ULID

from brokersync.capture.receipts import receipt_identity, receipt_json
from brokersync.keys import key_kind, validate_key
from brokersync.ledger.codec import plausible_consumed_at_ms
from brokersync.topology import RECEIPTS_QUEUE, synced_queue_name

if TYPE_CHECKING:
    from brokersync.ledger.base import LedgerStore


class StompSender(Protocol):
    """The one stomp.py method these helpers use, so any connection (or a test double) fits."""

    def send(
        self, destination: str, body: str | bytes, content_type: str | None = None, headers: dict | None = None
    ) -> None: ...


def new_sync_key() -> str:
    """A fresh ULID, as the correlation id a synced message must carry."""
    return str(ULID())


def send(
    connection: StompSender,
    queue: str,
    body: str | bytes,
    *,
    headers: dict[str, str] | None = None,
    persistent: bool = True,
    correlation_id: str | None = None,
) -> str:
    """Send ``body`` to ``queue`` with a ULID correlation id and return that id.

    An explicit ``correlation_id`` must itself be a ULID: anything else could never be
    purged from the DR broker. ``queue`` must be one plain queue (ValueError otherwise): in
    ActiveMQ ``A,B`` sends to two queues and ``A.*`` to many, none of them the synced one.
    """
    synced_queue_name(queue)
    key = validate_key(correlation_id, "correlation-id") if correlation_id else new_sync_key()
    frame_headers = dict(headers or {})
    frame_headers["correlation-id"] = key
    frame_headers["persistent"] = "true" if persistent else "false"
    connection.send(f"/queue/{queue}", body, headers=frame_headers)
    return key


class ReceiptPublisher:
    """Publishes JSON receipts to ``BROKERSYNC.RECEIPTS``, read by the record_receipts function."""

    def __init__(self, connection: StompSender, destination: str = RECEIPTS_QUEUE) -> None:
        self.connection = connection
        self.destination = f"/queue/{destination}"

    def publish(self, queue: str, key: str, message_id: str | None = None, consumed_at_ms: int | None = None) -> None:
        """Report that the message ``message_id`` (keyed ``key``) was consumed from ``queue`` (now, unless told when).

        ``message_id`` is the JMS message id the consumer received (the STOMP ``message-id``
        header); it is required for ULID keys, so that a second message with the same
        correlation id is never taken for this one.

        A receipt the receipts function would refuse whatever the topology says is refused
        here, before it is sent (``InvalidKeyError`` or ``ValueError``): at the call, a
        consumer can still fix it; on the queue it would only be counted as rejected.
        """
        when = consumed_at_ms if consumed_at_ms is not None else int(time.time() * 1000)
        synced_queue_name(queue)
        receipt_identity(key, key_kind(key), message_id)
        if plausible_consumed_at_ms(when) is None:
            raise ValueError(f"consumed_at_ms={when!r} is not epoch milliseconds from 2000 to 2100")
        body = receipt_json(queue, key, when, message_id)
        # stomp.py always sends content-length, which makes ActiveMQ build a BytesMessage; the
        # amq-msg-type header asks for a TextMessage, which any JMS consumer of receipts expects.
        self.connection.send(self.destination, body, headers={"persistent": "true", "amq-msg-type": "text"})


def already_consumed(ledger: LedgerStore, queue: str, key: str, window: timedelta = timedelta(hours=1)) -> bool:
    """Whether the ledger says ``key`` was consumed from ``queue`` within ``window`` (dedupe after failover)."""
    return ledger.was_consumed(queue, key, window)
