"""The purge task of the DR-side Step Functions loop: remove consumed messages from DR queues.

The task loops inside for up to BROKERSYNC_PURGE_MAX_SECONDS so one state transition buys
many removals; it returns whether anything is still pending, which the state machine uses
to choose between an immediate repeat and a short wait.
"""

from __future__ import annotations

import os
from typing import Any

from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.utilities.typing import LambdaContext

from brokersync.broker.statistics import StatisticsClient
from brokersync.config import runtime_topology
from brokersync.purge.remover import SelectorRemover
from brokersync.purge.service import PurgeService
from brokersync.runtime import ledger_from_env, stomp_connector

logger = Logger()
tracer = Tracer()
metrics = Metrics()

TOPOLOGY = runtime_topology()
LEDGER = ledger_from_env()
DR = stomp_connector(TOPOLOGY, "dr")
MAX_SECONDS = float(os.environ.get("BROKERSYNC_PURGE_MAX_SECONDS", "40"))


@logger.inject_lambda_context
@tracer.capture_lambda_handler
@metrics.log_metrics
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    service = PurgeService(LEDGER, SelectorRemover(DR), TOPOLOGY, metrics=metrics, dr_statistics=StatisticsClient(DR))
    budget = min(MAX_SECONDS, context.get_remaining_time_in_millis() / 1000 - 10)
    report = service.run(max_seconds=budget, stop_when_idle=True)
    return {
        "purged": report.purged,
        "missing": report.missing,
        "pending": report.pending,
        "rounds": report.rounds,
        "idle": report.pending == 0,
        "iteration": int(event.get("iteration", 0)) + 1,
    }
