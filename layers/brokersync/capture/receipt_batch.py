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
from collections.abc import Iterable
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


def record_receipt_batch(
    messages: Iterable[tuple[str, str]],
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


def _decode(data: str) -> bytes:
    try:
        return base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError) as e:
        raise RejectedInputError(RejectReason.MALFORMED, f"data is not base64: {e}") from e
