"""JSON receipts: how consumers that cannot rely on advisories report what they consumed.

A receipt is a small JSON object published to ``BROKERSYNC.RECEIPTS``::

    {"queue": "ORDERS", "key": "01JD5Z...", "messageId": "ID:host-1-2-3:1:1:1:7",
     "consumedAt": "2026-11-22T10:00:00.123Z"}

``messageId`` is the consumed message's own JMS id: required when ``key`` is a ULID, because
two messages can share a correlation id and the purge removes exactly the one consumed;
for a message-id key it may be left out (the key is the id). ``consumedAt`` may also be
epoch milliseconds. Receipts larger than :data:`MAX_RECEIPT_BYTES`
are refused outright: a receipt is three short fields, so anything bigger is a producer
publishing to the wrong queue, and parsing it would only waste the batch's time.
"""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from brokersync.capture.records import ConsumedRecord, RejectedInputError, RejectReason
from brokersync.keys import MAX_KEY_LENGTH, InvalidKeyError, SyncKey, key_identity, key_kind
from brokersync.ledger.codec import plausible_consumed_at_ms
from brokersync.topology import MAX_QUEUE_NAME_LENGTH, Topology

MAX_RECEIPT_BYTES = 4096
#: ISO 8601's basic date (``20261122``) is the one form of it made of digits alone; any other
#: string of digits is an epoch time.
_ISO_BASIC_DATE_DIGITS = 8


class Receipt(BaseModel):
    """The documented receipt schema (extra fields are tolerated for forward compatibility)."""

    model_config = ConfigDict(extra="ignore", populate_by_name=True)

    queue: Annotated[str, Field(min_length=1, max_length=MAX_QUEUE_NAME_LENGTH)]
    key: Annotated[str, Field(min_length=1, max_length=MAX_KEY_LENGTH)]
    message_id: Annotated[str | None, Field(default=None, alias="messageId", min_length=1, max_length=MAX_KEY_LENGTH)]
    consumed_at_ms: int = Field(alias="consumedAt")

    @field_validator("consumed_at_ms", mode="before")
    @classmethod
    def _epoch_ms(cls, value: object) -> int:
        """Epoch ms as a JSON integer, a float (``time.time() * 1000``, floored to its millisecond) or
        a string of digits (clients that send every field as text), else ISO 8601. Each is then
        held to 2000-2100, which is what refuses epoch seconds in any of these forms."""
        if isinstance(value, float) and math.isfinite(value):
            value = math.floor(value)
        elif isinstance(value, str) and value.isascii() and value.isdigit() and len(value) > _ISO_BASIC_DATE_DIGITS:
            value = int(value)
        elif isinstance(value, str):
            parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
            if parsed.tzinfo is None:
                parsed = parsed.replace(tzinfo=UTC)
            value = int(parsed.timestamp() * 1000)
        ms = plausible_consumed_at_ms(value)
        if ms is None:
            raise ValueError("consumedAt must be ISO 8601 or epoch milliseconds, from 2000 to 2100")
        return ms


class ReceiptIdError(ValueError):
    """A receipt's message id does not name the message its key does; ``reason`` says how."""

    def __init__(self, reason: RejectReason, message: str) -> None:
        super().__init__(message)
        self.reason = reason


def receipt_identity(key: str, kind: SyncKey, message_id: str | None) -> tuple[str, str]:
    """The receipt's key and message id, checked as the purge needs them; the topology plays no part.

    One definition for the record function (:func:`parse_receipt`) and the client helper that
    publishes receipts, so a receipt the helper sends is never one the function refuses for
    its key or id. Raises :class:`InvalidKeyError` for a malformed key or id or a message id
    that differs from a message-id key (:func:`~brokersync.keys.key_identity`), and
    :class:`ReceiptIdError` for a ULID key without a message id: two messages can share a
    correlation id, and the purge removes exactly the one consumed, by its id.
    """
    key, checked_id = key_identity(key, kind, message_id)
    if checked_id is None:
        raise ReceiptIdError(
            RejectReason.MISSING_KEY, f"a receipt for ULID key {key} needs the consumed message's id (messageId)"
        )
    return key, checked_id


def receipt_json(queue: str, key: str, consumed_at_ms: int, message_id: str | None = None) -> str:
    """Serialise a receipt exactly as :func:`parse_receipt` expects it (used by the client helper)."""
    body: dict[str, object] = {"queue": queue, "key": key, "consumedAt": consumed_at_ms}
    if message_id is not None:
        body["messageId"] = message_id
    return json.dumps(body, separators=(",", ":"))


def _one_value_per_name(pairs: list[tuple[str, object]]) -> dict[str, object]:
    """A JSON object's fields, refusing a name given twice (parsers keep the last one silently).

    A receipt naming two keys or two message ids says two things about what was consumed; which
    one the sender meant cannot be known, and the purge removes by the id it is given.
    """
    fields: dict[str, object] = {}
    for name, value in pairs:
        if name in fields:
            raise ValueError(f"{name!r} is given twice")
        fields[name] = value
    return fields


def parse_receipt(data: bytes | str, topology: Topology) -> ConsumedRecord:
    """Validate one receipt against the topology; raise :class:`RejectedInputError` saying why not."""
    raw = data.encode() if isinstance(data, str) else data
    if len(raw) > MAX_RECEIPT_BYTES:
        raise RejectedInputError(RejectReason.OVERSIZED, f"receipt of {len(raw)} bytes exceeds {MAX_RECEIPT_BYTES}")
    try:
        receipt = Receipt.model_validate_json(raw)
    except ValidationError as e:
        first = e.errors()[0]
        field = ".".join(str(p) for p in first["loc"]) or "(receipt)"
        raise RejectedInputError(RejectReason.MALFORMED, f"{field}: {first['msg']}") from e
    # pydantic's parser is the strict one (UTF-8 only, no BOM, no NaN, no lone surrogate); the
    # standard library's only sees the names pydantic folded together. A receipt is at most 4 KB.
    try:
        json.loads(raw, object_pairs_hook=_one_value_per_name)
    except (ValueError, RecursionError) as e:
        raise RejectedInputError(RejectReason.MALFORMED, f"(receipt): {e}") from e
    try:
        queue = topology.queue(receipt.queue)
    except KeyError:
        raise RejectedInputError(RejectReason.UNKNOWN_QUEUE, f"{receipt.queue!r} is not a synced queue") from None
    if not queue.captures_consumed:
        raise RejectedInputError(RejectReason.NOT_CAPTURED, f"{receipt.queue!r} is a mirror queue")
    kind = key_kind(receipt.key)
    if kind != queue.sync_key and not (kind == "message-id" and queue.message_id_fallback):
        raise RejectedInputError(RejectReason.INVALID_KEY, f"{receipt.queue} is synced by {queue.sync_key}")
    try:
        key, message_id = receipt_identity(receipt.key, kind, receipt.message_id)
    except InvalidKeyError as e:
        raise RejectedInputError(RejectReason.INVALID_KEY, str(e)) from e
    except ReceiptIdError as e:
        raise RejectedInputError(e.reason, str(e)) from e
    return ConsumedRecord(
        queue=queue.name, key=key, key_kind=kind, consumed_at_ms=receipt.consumed_at_ms, message_id=message_id
    )
