"""Amazon MQ event source mapping on BROKERSYNC.RECEIPTS → ledger.

The trigger has no partial-batch response: bad receipts are logged, counted and skipped
by the library; a ledger failure raises, failing the invocation so Lambda retries the batch.
"""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.utilities.data_classes import event_source
from aws_lambda_powertools.utilities.data_classes.active_mq_event import ActiveMQEvent
from aws_lambda_powertools.utilities.typing import LambdaContext

from brokersync.capture.receipt_batch import record_receipt_batch
from brokersync.capture.writer import LedgerWriter
from brokersync.config import runtime_topology
from brokersync.runtime import ledger_from_env

logger = Logger()
metrics = Metrics()

TOPOLOGY = runtime_topology()
WRITER = LedgerWriter(ledger_from_env())


@logger.inject_lambda_context
@metrics.log_metrics
@event_source(data_class=ActiveMQEvent)
def lambda_handler(event: ActiveMQEvent, context: LambdaContext) -> dict[str, Any]:
    result = record_receipt_batch(((m.message_id, m.data) for m in event.messages), TOPOLOGY, WRITER, metrics)
    return {"recorded": result.recorded, "rejected": dict(result.rejected), "writeUnits": result.write_units}
