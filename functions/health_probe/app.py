"""Scheduled health probe (every minute, both regions): risk windows, roles, a stale primary, configurations.

A thin adapter over :mod:`brokersync.health`: it measures, emits the figures as metrics
(what it cannot measure is left out, so the alarms read it as breaching) and returns the
whole report, which is also logged for Logs Insights. With ``AutoFailback=true`` a stale
primary found here starts the failback, once per role epoch.
"""

from __future__ import annotations

import os
from typing import Any

import boto3
from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.utilities.typing import LambdaContext

from brokersync.broker.statistics import StatisticsClient
from brokersync.config import ENV_AUTO_FAILBACK_ARN, runtime_topology
from brokersync.failover.auto_failback import start_failback_once
from brokersync.health import HealthProbe, emit
from brokersync.runtime import (
    broker_connector,
    broker_control,
    ledger_from_env,
    role_region_from_env,
    role_store,
    sync_control,
)
from brokersync.snapshot.browser import oldest_timestamp_ms

logger = Logger()
metrics = Metrics()

TOPOLOGY = runtime_topology()
CONTROL = broker_control(TOPOLOGY)
PROBE = HealthProbe(
    role_store(),
    TOPOLOGY,
    ledger_from_env(),
    statistics=lambda broker: StatisticsClient(broker_connector(broker)),
    oldest_timestamp_ms=lambda broker, queue: oldest_timestamp_ms(broker_connector(broker), queue),
    region=role_region_from_env(),
    configuration=lambda name: CONTROL.current_document(name)[2],
    purge_loop_running=sync_control().purge_loop_running,
)
AUTO_FAILBACK_ARN = os.environ.get(ENV_AUTO_FAILBACK_ARN) or None


@logger.inject_lambda_context
@metrics.log_metrics
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    report = PROBE.probe()
    emit(report, metrics)
    result = report.as_dict()
    if report.stale_primaries and AUTO_FAILBACK_ARN:
        result["failback"] = start_failback_once(boto3.client("stepfunctions"), AUTO_FAILBACK_ARN, report.epoch)
        logger.warning("stale primary: failback started", broker=report.stale_primaries, execution=result["failback"])
    if report.unmeasured or report.stale_primaries or report.forwarding_connectors or report.configuration_drift:
        logger.warning("health probe", report=result)
    else:
        logger.info("health probe", report=result)
    return result
