"""Snapshot the synced queues of one broker (the DR broker unless the event says "primary") to S3.

Event: ``{"role": "dr" | "primary", "prefix": "snapshots/<run id>/dr"}``; both optional.
The reconciliation state machine calls it once per role, then runs the Glue job on the parts.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import boto3
from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.utilities.typing import LambdaContext

from brokersync.config import runtime_topology, setting
from brokersync.invocation import event_object
from brokersync.runtime import broker_connector, role_store
from brokersync.snapshot import QueueBrowser, snapshot_broker

logger = Logger()
metrics = Metrics()

BUCKET = setting("BROKERSYNC_SNAPSHOT_BUCKET")
S3 = boto3.client("s3")
TOPOLOGY = runtime_topology()
ROLES = role_store()


@logger.inject_lambda_context
@metrics.log_metrics
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    fields = event_object(event, {"role": "dr"})
    role = fields.get("role", "dr")
    if role not in ("primary", "dr"):
        raise ValueError(f"role must be 'primary' or 'dr', not {role!r}")
    topology = ROLES.current(TOPOLOGY)
    broker = topology.broker(role)
    prefix = fields.get("prefix") or f"snapshots/{datetime.now(UTC):%Y%m%dT%H%M%SZ}/{role}"
    if not isinstance(prefix, str) or not prefix.startswith("snapshots/") or ".." in prefix:
        raise ValueError(f"prefix must lie under snapshots/ (where this function may write), not {prefix!r}")

    def put(key: str, body: bytes) -> None:
        S3.put_object(Bucket=BUCKET, Key=key, Body=body, ServerSideEncryption="aws:kms")

    report = snapshot_broker(topology, broker, QueueBrowser(broker_connector(broker)), put, prefix)
    metrics.add_metric(name="SnapshotMessages", unit="Count", value=sum(report.lines.values()))
    if report.possibly_truncated:
        logger.warning("browse may have stopped at the page limit", extra={"queues": report.possibly_truncated})
    return {"bucket": BUCKET, "prefix": prefix, **report.manifest()}
