"""Parsing ActiveMQ departure advisories (consumed, expired, DLQ'd), as the relay receives them over STOMP.

Three advisories say a message left a synced queue on the primary, and each is forwarded
into ``BROKERSYNC.CONSUMED`` by a composite topic named after it: consumed (fired on ack,
with ``advisoryForConsumed``), expired, and moved to a dead-letter queue (both always on).
The forwarded frame's ``original-destination`` header names the advisory topic it came
from, which is how the relay tells them apart. Expired and DLQ advisories carry no
dispatch time, so their departure time is when the relay received them.

The relay subscribes with ``transformation: jms-advisory-json`` (one transformation for
advisories everywhere: mixing them across subscribers corrupted bodies, see DESIGN.md). Then:

* the body is ``{"<ActiveMQ message class>": {...}}`` describing the consumed message, with
  ``correlationId``, ``destination.string`` (the queue) and ``brokerOutTime`` (dispatch time);
  the advisory's own ``timestamp`` header is 0, so ``brokerOutTime`` is the best consume time
  the broker gives us (the ack follows it by the consumer's processing time);
* the header ``orignalMessageId`` (ActiveMQ's spelling) carries the consumed message's id and
  ``orignalDestination`` its destination as ``queue://NAME``.

A message id is normally made by the producing client's library from its producer id and a
sequence. ActiveMQ also lets a client set the id's text (``messageId.textView`` in the body:
the AMQP transport sets it from every AMQP message-id, and an OpenWire client may send it),
and then the id is whatever the client chose, another message's included. Recording it would
let the purge remove that other message's DR copy, which was never consumed; and ActiveMQ's
STOMP ACK cannot take such a message anyway (it looks the message up by the parsed text). So
such an advisory is rejected (``client-set-id``) and parked: the message's DR copy stays.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from brokersync.capture.records import ConsumedRecord, Departure, RejectedInputError, RejectReason
from brokersync.keys import InvalidKeyError, validate_key, validate_message_id
from brokersync.ledger.codec import plausible_consumed_at_ms
from brokersync.topology import DLQ_ADVISORY_PREFIX, EXPIRED_ADVISORY_PREFIX, SyncKey, Topology

MESSAGE_ID_HEADER = "orignalMessageId"
#: Set by the broker on every message a client sends (the rendered configurations turn on
#: ``populateJMSXUserID``); the broker's own advisories never carry it.
SENDER_HEADER = "JMSXUserID"
DESTINATION_HEADER = "orignalDestination"
_QUEUE_SCHEME = "queue://"


def _consumed_message(body: str | bytes) -> Mapping[str, Any]:
    try:
        document = json.loads(body)
    except (ValueError, UnicodeDecodeError, RecursionError) as e:  # RecursionError: nested past the parser
        raise RejectedInputError(RejectReason.MALFORMED, f"body is not JSON: {e}") from e
    if not isinstance(document, dict) or len(document) != 1:
        raise RejectedInputError(RejectReason.MALFORMED, "body is not a single {class: message} object")
    (message,) = document.values()
    if not isinstance(message, dict):
        raise RejectedInputError(RejectReason.MALFORMED, "advisory payload is not an object")
    return message


def _queue_name(headers: Mapping[str, str], message: Mapping[str, Any]) -> str:
    destination = headers.get(DESTINATION_HEADER, "")
    if destination.startswith(_QUEUE_SCHEME):
        return destination.removeprefix(_QUEUE_SCHEME)
    embedded = message.get("destination")
    if isinstance(embedded, dict) and isinstance(embedded.get("string"), str):
        return embedded["string"]
    raise RejectedInputError(RejectReason.MALFORMED, "advisory names no queue")


def _consumed_at_ms(message: Mapping[str, Any]) -> int:
    for field in ("brokerOutTime", "brokerInTime", "timestamp"):
        value = plausible_consumed_at_ms(message.get(field))
        if value is not None:
            return value
    raise RejectedInputError(RejectReason.MALFORMED, "advisory carries no usable time (epoch ms, 2000 to 2100)")


def _departure(headers: Mapping[str, str]) -> Departure:
    origin = headers.get("original-destination", "").removeprefix("/topic/")
    if origin.startswith(EXPIRED_ADVISORY_PREFIX):
        return "expired"
    if origin.startswith(DLQ_ADVISORY_PREFIX):
        return "dead-lettered"
    return "consumed"


def _client_set_id(message: Mapping[str, Any]) -> str | None:
    """The text a client set as the message's id (``textView``), or None for an id made from producer and sequence."""
    structured = message.get("messageId")
    if isinstance(structured, dict) and "textView" in structured:
        return str(structured["textView"])
    return None


def _body_message_id(message: Mapping[str, Any]) -> str | None:
    """The id ActiveMQ's ``MessageId.toString()`` gives, from the advisory body's structured ``messageId``.

    DLQ advisories carry no ``orignalMessageId`` header; the body describes the message. A
    client-set id (``textView``) never gets here: such advisories are rejected first.
    """
    structured = message.get("messageId")
    if not isinstance(structured, dict):
        return None
    producer = structured.get("producerId")
    if not isinstance(producer, dict):
        return None
    parts = (producer.get("connectionId"), producer.get("sessionId"), producer.get("value"))
    sequence = structured.get("producerSequenceId")
    if not isinstance(parts[0], str) or not all(isinstance(v, int) for v in (*parts[1:], sequence)):
        return None
    return f"{parts[0]}:{parts[1]}:{parts[2]}:{sequence}"


def parse_consumed_advisory(
    headers: Mapping[str, str], body: str | bytes, topology: Topology, *, received_at_ms: int | None = None
) -> ConsumedRecord:
    """Turn one advisory frame into a record, or raise :class:`RejectedInputError` saying why not.

    A message without a correlation id on a ``correlation-id`` queue is recorded by its
    message id when the queue sets ``message_id_fallback`` (keys say their own kind, so the
    purge selects it on ``JMSMessageID``); otherwise it is rejected as ``missing-key``, to be
    parked by the relay, never dropped. On ``message-id`` queues the message id is the key.
    """
    if headers.get(SENDER_HEADER):
        raise RejectedInputError(
            RejectReason.FORGED, f"sent by user {headers[SENDER_HEADER][:100]!r}, not raised by the broker"
        )
    message = _consumed_message(body)
    queue_name = _queue_name(headers, message)
    try:
        queue = topology.queue(queue_name)
    except KeyError:
        raise RejectedInputError(RejectReason.UNKNOWN_QUEUE, f"{queue_name!r} is not a synced queue") from None
    if not queue.captures_consumed:
        raise RejectedInputError(RejectReason.NOT_CAPTURED, f"{queue_name!r} is a mirror queue")
    client_set = _client_set_id(message)
    if client_set is not None:
        raise RejectedInputError(
            RejectReason.CLIENT_SET_ID,
            f"message {client_set[:100]!r} on {queue_name} has an id its client set (an AMQP message-id or "
            "OpenWire's text view): it may name another message, and its DR copy is left in place",
        )

    departure = _departure(headers)
    raw_id = headers.get(MESSAGE_ID_HEADER) or _body_message_id(message)
    message_id = _message_id(raw_id, queue_name)
    kind: SyncKey = queue.sync_key
    key = message.get("correlationId") if kind == "correlation-id" else message_id
    if not key and kind == "correlation-id" and queue.message_id_fallback:
        kind, key = "message-id", message_id
    if not key:
        missing = "correlation id" if kind == "correlation-id" else MESSAGE_ID_HEADER
        raise RejectedInputError(RejectReason.MISSING_KEY, f"message {raw_id} on {queue_name} has no {missing}")
    if not isinstance(key, str):
        raise RejectedInputError(RejectReason.INVALID_KEY, f"correlation id of {raw_id} is not a string")
    try:
        key = validate_key(key, kind)
    except InvalidKeyError as e:
        raise RejectedInputError(RejectReason.INVALID_KEY, str(e)) from e
    departed_at = _consumed_at_ms(message)
    if departure != "consumed" and received_at_ms is not None:
        departed_at = received_at_ms
    return ConsumedRecord(
        queue=queue_name,
        key=key,
        key_kind=kind,
        consumed_at_ms=departed_at,
        message_id=message_id,
        departure=departure,
    )


def _message_id(raw: str | None, queue_name: str) -> str:
    """The consumed message's own JMS id: required, because the purge removes exactly that message."""
    if raw is None:
        raise RejectedInputError(RejectReason.MISSING_KEY, f"advisory for {queue_name} carries no {MESSAGE_ID_HEADER}")
    try:
        return validate_message_id(raw)
    except InvalidKeyError as e:
        raise RejectedInputError(RejectReason.INVALID_KEY, f"{MESSAGE_ID_HEADER}: {e}") from e
