"""Recording one batch of receipts delivered by the Amazon MQ event source mapping.

Lambda's MQ trigger has no partial-batch response: failing the invocation redelivers the
whole batch. So the two kinds of failure are handled oppositely. A bad receipt can never
become good by retrying, so it is logged, counted and skipped; a ledger failure may pass,
so it propagates, the invocation fails, and Lambda retries the batch (the ledger's writes
are idempotent, so the receipts already written are simply written again).
"""

from __future__ import annotations

import base64
import binascii
import logging
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from brokersync.capture.receipts import parse_receipt
from brokersync.capture.records import ConsumedRecord, RejectedInputError, RejectReason
from brokersync.capture.writer import LedgerWriter
from brokersync.metrics import MetricsSink
from brokersync.topology import Topology

logger = logging.getLogger(__name__)


@dataclass
class ReceiptBatchResult:
    recorded: int = 0
    write_units: float = 0.0
    rejected: Counter[str] = field(default_factory=Counter)


class NotAReceiptBatchError(ValueError):
    """The event is not an Amazon MQ batch at all: an invocation by hand with the wrong event."""


def batch_messages(event: object) -> list[tuple[str, object]]:
    """``(message id, data)`` of each message of an Amazon MQ trigger's ``event``, as given.

    What is wrong with one message (not an object, no data) is that receipt's fault: it is
    skipped and counted by :func:`record_receipt_batch` like any other bad receipt, since failing
    the batch would redeliver it, and the good receipts beside it, for ever. An event that is
    not a batch is refused whole: there is nothing in it to record.
    """
    messages = event.get("messages") if isinstance(event, Mapping) else None
    if not isinstance(messages, list):
        raise NotAReceiptBatchError(
            'the event must be an Amazon MQ batch, {"eventSource": "aws:mq", "messages": [...]}; '
            f"got {type(event).__name__} without a messages list"
        )
    pairs: list[tuple[str, object]] = []
    for index, message in enumerate(messages):
        fields = message if isinstance(message, Mapping) else {}
        message_id = fields.get("messageID")
        pairs.append((message_id if isinstance(message_id, str) else f"#{index} of the batch", fields.get("data")))
    return pairs


def record_receipt_batch(
    messages: Iterable[tuple[str, object]],
    topology: Topology,
    writer: LedgerWriter,
    metrics: MetricsSink,
) -> ReceiptBatchResult:
    """Record ``(message_id, base64 data)`` pairs; skip and count bad ones; raise if the ledger fails."""
    result = ReceiptBatchResult()
    records: list[ConsumedRecord] = []
    for message_id, data in messages:
        try:
            records.append(parse_receipt(_decode(data), topology))
        except RejectedInputError as e:
            result.rejected[e.reason.value] += 1
            metrics.add_metric(f"ReceiptRejected_{e.reason.value}", "Count", 1)
            logger.warning("receipt %s skipped (%s): %s", message_id, e.reason.value, e.detail)
    if records:
        written = writer.write(records)
        for record, error in written.refused:
            result.rejected[RejectReason.INVALID_KEY.value] += 1
            metrics.add_metric(f"ReceiptRejected_{RejectReason.INVALID_KEY.value}", "Count", 1)
            logger.warning("receipt for %s on %s refused by the ledger: %s", record.key, record.queue, error)
        result.recorded = written.records
        result.write_units = written.write_units
        metrics.add_metric("Captured", "Count", written.records)
        metrics.add_metric("CaptureWriteUnits", "Count", written.write_units)
    return result


def _decode(data: object) -> bytes:
    if not isinstance(data, str):
        raise RejectedInputError(RejectReason.MALFORMED, f"data is not base64 text: {type(data).__name__}")
    try:
        return base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError) as e:
        raise RejectedInputError(RejectReason.MALFORMED, f"data is not base64: {e}") from e
