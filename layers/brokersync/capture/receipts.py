"""JSON receipts: how consumers that cannot rely on advisories report what they consumed.

A receipt is a small JSON object published to ``BROKERSYNC.RECEIPTS``::

    {"queue": "ORDERS", "key": "01JD5Z...", "consumedAt": "2026-11-22T10:00:00.123Z"}

``consumedAt`` may also be epoch milliseconds. Receipts larger than :data:`MAX_RECEIPT_BYTES`
are refused outright: a receipt is three short fields, so anything bigger is a producer
publishing to the wrong queue, and parsing it would only waste the batch's time.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from brokersync.capture.records import ConsumedRecord, RejectedInputError, RejectReason
from brokersync.keys import InvalidKeyError, key_kind, validate_key
from brokersync.topology import Topology

MAX_RECEIPT_BYTES = 4096


class Receipt(BaseModel):
    """The documented receipt schema (extra fields are tolerated for forward compatibility)."""

    model_config = ConfigDict(extra="ignore", populate_by_name=True)

    queue: Annotated[str, Field(min_length=1, max_length=200)]
    key: Annotated[str, Field(min_length=1, max_length=300)]
    consumed_at_ms: int = Field(alias="consumedAt")

    @field_validator("consumed_at_ms", mode="before")
    @classmethod
    def _epoch_ms(cls, value: object) -> int:
        if isinstance(value, bool):
            raise ValueError("consumedAt must be ISO 8601 or epoch milliseconds")  # noqa: TRY004 (pydantic wants ValueError)
        if isinstance(value, int):
            return value
        if isinstance(value, str):
            parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
            if parsed.tzinfo is None:
                parsed = parsed.replace(tzinfo=UTC)
            return int(parsed.timestamp() * 1000)
        raise ValueError("consumedAt must be ISO 8601 or epoch milliseconds")


def receipt_json(queue: str, key: str, consumed_at_ms: int) -> str:
    """Serialise a receipt exactly as :func:`parse_receipt` expects it (used by the client helper)."""
    return json.dumps({"queue": queue, "key": key, "consumedAt": consumed_at_ms}, separators=(",", ":"))


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
        key = validate_key(receipt.key, kind)
    except InvalidKeyError as e:
        raise RejectedInputError(RejectReason.INVALID_KEY, str(e)) from e
    return ConsumedRecord(queue=queue.name, key=key, key_kind=kind, consumed_at_ms=receipt.consumed_at_ms)
