"""Amazon MQ event source mapping on BROKERSYNC.RECEIPTS → ledger.

Both brokers have the trigger (each stack's mapping reads its own region's broker), and a
batch is recorded only while the broker it came from plays primary and sync runs, as the
role record says. Otherwise the invocation fails with ``NotActingNowError``: the receipts
stay on the broker and Lambda retries them, so a receipt sent during a transition is
recorded once it ends, never dropped and never recorded as consumed on the DR broker.

The trigger has no partial-batch response: bad receipts are logged, counted and skipped
by the library; a ledger failure raises, failing the invocation so Lambda retries the batch.
"""

from __future__ import annotations

import json
import os
from typing import Any

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.utilities.data_classes import event_source
from aws_lambda_powertools.utilities.data_classes.active_mq_event import ActiveMQEvent
from aws_lambda_powertools.utilities.typing import LambdaContext

from brokersync.capture.receipt_batch import batch_messages, record_receipt_batch
from brokersync.capture.writer import LedgerWriter
from brokersync.config import ENV_BROKER_IDS, runtime_topology
from brokersync.exceptions import NotActingNowError
from brokersync.role_gate import RoleGate
from brokersync.runtime import ledger_from_env, role_region_from_env, role_store

logger = Logger()
metrics = Metrics()

TOPOLOGY = runtime_topology()
WRITER = LedgerWriter(ledger_from_env(), queue_workers=TOPOLOGY.tuning.queues_at_once)
GATE = RoleGate(role_store(), TOPOLOGY, "primary", role_region_from_env())
BROKER_IDS: dict[str, str] = json.loads(os.environ.get(ENV_BROKER_IDS) or "{}")


@logger.inject_lambda_context
@metrics.log_metrics
@event_source(data_class=ActiveMQEvent)
def lambda_handler(event: ActiveMQEvent, context: LambdaContext) -> dict[str, Any]:
    messages = batch_messages(event.raw_event)
    source = event.get("eventSourceArn")
    standing = GATE.standing_of(source if isinstance(source, str) else None, BROKER_IDS)
    if not standing.acting:
        metrics.add_metric("ReceiptsHeld", "Count", len(messages))
        raise NotActingNowError(f"receipts held on the broker: {standing.reason} (epoch {standing.epoch})")
    result = record_receipt_batch(messages, TOPOLOGY, WRITER, metrics)
    return {"recorded": result.recorded, "rejected": dict(result.rejected), "writeUnits": result.write_units}
