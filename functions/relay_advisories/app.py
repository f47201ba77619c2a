"""Scheduled relay: drain BROKERSYNC.CONSUMED on the primary into the ledger, then audit.

Each invocation relays for BROKERSYNC_RELAY_MAX_SECONDS (below the function timeout), acks
only what the ledger holds, and compares the primary's dequeue counters with what was
captured so advisories lost in a broker restart are reported.
"""

from __future__ import annotations

import os
import time
from typing import Any

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.utilities.typing import LambdaContext

from brokersync.broker.statistics import StatisticsClient
from brokersync.capture.audit import CaptureAudit
from brokersync.capture.relay import AdvisoryRelay
from brokersync.capture.writer import LedgerWriter
from brokersync.config import DEFAULT_RELAY_MAX_SECONDS, ENV_RELAY_MAX_SECONDS, runtime_topology
from brokersync.role_gate import RoleGate
from brokersync.runtime import broker_connector, ledger_from_env, role_region_from_env, role_store

logger = Logger()
metrics = Metrics()

TOPOLOGY = runtime_topology()
LEDGER = ledger_from_env()
#: The relay acts only while this region's broker plays primary and sync runs (the role record).
GATE = RoleGate(role_store(), TOPOLOGY, "primary", role_region_from_env())
MAX_SECONDS = float(os.environ.get(ENV_RELAY_MAX_SECONDS, DEFAULT_RELAY_MAX_SECONDS))


@logger.inject_lambda_context
@metrics.log_metrics
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    budget = min(MAX_SECONDS, context.get_remaining_time_in_millis() / 1000 - 5)
    started = time.monotonic()
    # Sync stopped (a transition): wait for it to start again. The primary role elsewhere:
    # return at once (the next minute's schedule looks again), so a standby region costs nothing.
    standing = GATE.wait_to_act(max(0.0, budget), while_stopped_only=True)
    if not standing.acting:
        logger.info("relay on standby", reason=standing.reason, epoch=standing.epoch)
        return {"captured": 0, "standby": standing.reason, "epoch": standing.epoch}
    topology = standing.topology  # after a failover the primary is the old DR broker
    primary = broker_connector(topology.primary)
    statistics = StatisticsClient(primary)
    audit = CaptureAudit(LEDGER.backend, statistics, topology, metrics=metrics)  # type: ignore[arg-type]
    relay = AdvisoryRelay(primary, LedgerWriter(LEDGER), topology, statistics=statistics, audit=audit, metrics=metrics)
    with GATE.watch(standing) as record_moved:
        report = relay.run(max_seconds=max(0.0, budget - (time.monotonic() - started)), stop=record_moved)
    findings = audit.check()
    return {
        "captured": report.captured,
        "parked": dict(report.parked),
        "batches": report.batches,
        "writeUnits": report.write_units,
        "reconnects": report.reconnects,
        "lostAdvisories": sum(f.missing for f in findings if f.final),
        "epoch": standing.epoch,
    }
