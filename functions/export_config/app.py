"""Scheduled export of this region's brokers' current configuration revisions and the topology."""

from __future__ import annotations

import json
import os
from typing import Any

import boto3
import yaml
from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.utilities.typing import LambdaContext

from brokersync.config import ENV_BROKER_IDS, runtime_topology, setting
from brokersync.config_export import broker_id_overrides, export_configurations
from brokersync.invocation import event_object

logger = Logger()
metrics = Metrics()

BUCKET = setting("BROKERSYNC_CONFIG_BUCKET")
REGION = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
MQ = boto3.client("mq")
S3 = boto3.client("s3")
TOPOLOGY = runtime_topology()
#: Ids that differ from the topology's (the local world's moto ids); empty in AWS.
BROKER_IDS = json.loads(os.environ.get(ENV_BROKER_IDS) or "{}") or None


@logger.inject_lambda_context
@metrics.log_metrics
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    topology_text = yaml.safe_dump(TOPOLOGY.model_dump(mode="json"), sort_keys=False)
    exported = export_configurations(
        MQ,
        S3,
        BUCKET,
        TOPOLOGY,
        topology_text,
        region=REGION,
        broker_ids=broker_id_overrides(event_object(event, {}).get("brokerIds"), TOPOLOGY) or BROKER_IDS,
    )
    metrics.add_metric(name="ConfigurationsExported", unit="Count", value=len(exported))
    return {
        "exported": [{"broker": e.broker, "revision": e.revision, "key": e.key, "sha256": e.sha256} for e in exported]
    }
