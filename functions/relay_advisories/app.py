"""Scheduled relay: drain BROKERSYNC.CONSUMED on the primary into the ledger, then audit.

Where active-active queues exist the DR broker's BROKERSYNC.CONSUMED is drained too, one
thread per broker (brokersync.sides): it holds the consumption of the queues consumed there,
and the advisories of the purge's own removals, which are counted and dropped.

Each invocation relays for BROKERSYNC_RELAY_MAX_SECONDS (below the function timeout), then
goes on until the next minute's invocation consumes too (at most BROKERSYNC_RELAY_HAND_OVER_S),
acks only what the ledger holds, and compares the primary's dequeue counters with what was
captured so advisories lost in a broker restart are reported.
"""

from __future__ import annotations

import os
import time
from collections import Counter
from typing import Any

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.utilities.typing import LambdaContext

from brokersync.broker.statistics import StatisticsClient
from brokersync.capture.audit import AuditFinding, CaptureAudit
from brokersync.capture.relay import AdvisoryRelay, RelayReport
from brokersync.capture.writer import LedgerWriter
from brokersync.config import (
    DEFAULT_RELAY_HAND_OVER_S,
    DEFAULT_RELAY_MAX_SECONDS,
    ENV_RELAY_HAND_OVER_S,
    ENV_RELAY_MAX_SECONDS,
    RELAY_WRAP_UP_S,
    runtime_topology,
)
from brokersync.role_gate import RoleGate
from brokersync.runtime import broker_connector, ledger_from_env, role_region_from_env, role_store
from brokersync.side_by_side import SerialMetrics
from brokersync.sides import Duty, run_each

logger = Logger()
metrics = Metrics()
#: What the library adds to: both brokers' duties (and a purge round's queues) add side by side.
SINK = SerialMetrics(metrics)

TOPOLOGY = runtime_topology()
LEDGER = ledger_from_env()
#: The relay acts only while this region's broker captures some queue and sync runs (the role
#: record): the primary, and the DR broker too where active-active queues exist (brokersync.sides).
GATE = RoleGate(role_store(), TOPOLOGY, "primary", role_region_from_env(), per_queue=True)
MAX_SECONDS = float(os.environ.get(ENV_RELAY_MAX_SECONDS, DEFAULT_RELAY_MAX_SECONDS))
HAND_OVER_S = float(os.environ.get(ENV_RELAY_HAND_OVER_S, DEFAULT_RELAY_HAND_OVER_S))


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
    remaining = max(0.0, budget - (time.monotonic() - started))
    # Waiting for the next invocation never reaches into the time the wrap-up needs.
    hand_over = max(0.0, min(HAND_OVER_S, context.get_remaining_time_in_millis() / 1000 - remaining - RELAY_WRAP_UP_S))

    def relay_on(duty: Duty) -> tuple[RelayReport, list[AuditFinding]]:
        broker = broker_connector(duty.broker)  # after a failover the primary is the old DR broker
        statistics = StatisticsClient(broker)
        audit = CaptureAudit(LEDGER.backend, statistics, duty.view, metrics=SINK)  # type: ignore[arg-type]
        relay = AdvisoryRelay(
            broker,
            LedgerWriter(LEDGER, queue_workers=duty.whole.tuning.queues_at_once),
            duty.whole,
            statistics=statistics,
            audit=audit,
            metrics=SINK,
            passive=duty.passive,
            roles_hold=lambda: GATE.still_holds(standing),
        )
        report = relay.run(max_seconds=remaining, stop=record_moved, hand_over_s=hand_over)
        return report, audit.check()

    with GATE.watch(standing) as record_moved:
        results = run_each(standing.duties, relay_on)
    reports = [report for report, _ in results]
    return {
        "captured": sum(r.captured for r in reports),
        "parked": dict(sum((r.parked for r in reports), Counter())),
        "batches": sum(r.batches for r in reports),
        "writeUnits": sum(r.write_units for r in reports),
        "reconnects": sum(r.reconnects for r in reports),
        "handOverSeconds": max((r.hand_over_s for r in reports), default=0.0),
        "handedOver": all(r.handed_over for r in reports) if reports else False,
        "passiveDrained": sum(r.passive for r in reports),
        "passiveDeferred": sum(r.passive_deferred for r in reports),
        "lostAdvisories": sum(f.missing for _, findings in results for f in findings if f.final),
        "brokers": [d.broker.name for d in standing.duties],
        "epoch": standing.epoch,
    }
