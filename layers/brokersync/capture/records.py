"""The record every capture source produces, and the one error every capture source raises."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Literal

from brokersync.exceptions import BrokerSyncError
from brokersync.topology import SyncKey

Departure = Literal["consumed", "expired", "dead-lettered"]


@dataclass(frozen=True, slots=True)
class ConsumedRecord:
    """One message consumed on the primary, keyed the way its queue is synced.

    ``key`` is what the purge loop selects on in the DR queue: the ULID correlation id for
    ``correlation-id`` queues, the JMS message id for ``message-id`` queues (or as the fallback
    when a producer did not stamp a correlation id and the queue allows it).
    """

    queue: str
    key: str
    key_kind: SyncKey
    consumed_at_ms: int
    message_id: str | None = None
    #: How the message left the primary queue: consumed, expired, or moved to a dead-letter queue.
    departure: Departure = "consumed"


class RejectReason(StrEnum):
    """Why an input could not become a record; one metric dimension per value."""

    MALFORMED = "malformed"
    UNKNOWN_QUEUE = "unknown-queue"
    MISSING_KEY = "missing-key"
    INVALID_KEY = "invalid-key"
    OVERSIZED = "oversized"
    NOT_CAPTURED = "not-captured"
    #: Sent by a client, not raised by the broker: the broker stamps every client's message
    #: with its authenticated user (``populateJMSXUserID``), and its own advisories carry none.
    FORGED = "forged"
    #: The consumed message's id was set by its client (ActiveMQ's ``MessageId.textView``: every
    #: AMQP message-id, or an OpenWire client's own), not made from its producer and sequence.
    #: Such an id may name another message, and no STOMP ACK can take such a message.
    CLIENT_SET_ID = "client-set-id"


class RejectedInputError(BrokerSyncError):
    """An advisory or receipt that cannot be recorded. Retrying the same input never helps."""

    retryable = False

    def __init__(self, reason: RejectReason, detail: str) -> None:
        self.reason = reason
        self.detail = detail
        super().__init__(f"{reason.value}: {detail}")
