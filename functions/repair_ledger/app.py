"""Feed the reconciliation's purge list back to the ledger, so the purge loop removes what advisories missed.

Event: ``{"prefix": "reconcile/<run>/purge_list_json/"}`` (the reconcile state machine's last
step, after the Glue job). Reads every gzipped JSON-lines part under the prefix and hands the
rows to :func:`brokersync.repair.repair_from_purge_list`, which records only exact message ids.
"""

from __future__ import annotations

import gzip
import zlib
from collections.abc import Iterator
from typing import Any

import boto3
from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.utilities.typing import LambdaContext

from brokersync.config import setting
from brokersync.invocation import event_object
from brokersync.repair import MALFORMED_ROW, PurgeListRow, purge_list_row, repair_from_purge_list
from brokersync.runtime import ledger_from_env

logger = Logger()
metrics = Metrics()

BUCKET = setting("BROKERSYNC_SNAPSHOT_BUCKET")
S3 = boto3.client("s3")
LEDGER = ledger_from_env()


def _rows(prefix: str) -> Iterator[PurgeListRow]:
    """Every row of every part, streamed: a part is decompressed line by line, never held whole."""
    for page in S3.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=prefix):
        for item in page.get("Contents", []):
            if not item["Key"].endswith(".json.gz"):
                continue
            with gzip.GzipFile(fileobj=S3.get_object(Bucket=BUCKET, Key=item["Key"])["Body"]) as part:
                try:
                    for line in part:
                        if line.strip():
                            yield purge_list_row(line)
                except (gzip.BadGzipFile, EOFError, zlib.error) as e:  # a truncated or corrupt part: the rest go on
                    logger.exception("purge-list part unreadable after its first rows", key=item["Key"], error=str(e))
                    yield MALFORMED_ROW


@logger.inject_lambda_context
@metrics.log_metrics
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    prefix = event_object(event, {"prefix": "reconcile/<run>/purge_list_json/"}).get("prefix")
    if not isinstance(prefix, str) or not prefix.startswith("reconcile/"):
        raise ValueError(f"prefix must name a reconcile run's purge list (reconcile/<run>/...), not {prefix!r}")
    report = repair_from_purge_list(LEDGER, _rows(prefix))
    metrics.add_metric(name="RepairRecorded", unit="Count", value=report.recorded)
    metrics.add_metric(name="RepairSkipped", unit="Count", value=sum(report.skipped.values()))
    return {"recorded": report.recorded, "skipped": dict(report.skipped)}
