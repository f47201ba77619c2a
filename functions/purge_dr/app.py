"""The purge task of the DR-side Step Functions loop: remove consumed messages from DR queues.

The task loops inside for up to BROKERSYNC_PURGE_MAX_SECONDS so one state transition buys
many removals; it returns ``idle`` only when it stopped early for want of work, which the
state machine uses to choose between an immediate repeat and a short wait. An invocation that
used its whole time is repeated at once, even when its last round left nothing pending: a
wait there would hold every key consumed during it a second longer at each invocation's end.

It keeps looping through idle rounds too (polling every 0.2 s) instead of returning at the
first empty round: three state transitions cost about eleven times a second of this
function, so an idle loop of short invocations and waits would be the most expensive way to
wait (docs, "Cost"). BROKERSYNC_PURGE_RETURN_WHEN_IDLE=true restores the short returns.
"""

from __future__ import annotations

import os
import time
from datetime import timedelta
from typing import Any

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.utilities.parameters.exceptions import GetParameterError
from aws_lambda_powertools.utilities.typing import LambdaContext

from brokersync.broker.statistics import StatisticsClient
from brokersync.config import (
    DEFAULT_PURGE_MAX_SECONDS,
    ENV_PURGE_MAX_SECONDS,
    ENV_PURGE_MISSING_AFTER_S,
    runtime_topology,
    seconds_setting,
)
from brokersync.purge.late_copies import LateCopySweep
from brokersync.purge.remover import SelectorRemover
from brokersync.purge.service import PurgeReport, PurgeService, PurgeSettings
from brokersync.role_gate import RoleGate
from brokersync.runtime import broker_connector, ledger_from_env, role_region_from_env, role_store
from brokersync.side_by_side import SerialMetrics
from brokersync.sides import Duty, run_each
from brokersync.topology import Topology

logger = Logger()
metrics = Metrics()
#: What the library adds to: both brokers' duties (and a purge round's queues) add side by side.
SINK = SerialMetrics(metrics)

TOPOLOGY = runtime_topology()
LEDGER = ledger_from_env()
#: The purge acts only while this region's broker purges some queue and sync runs (the role
#: record): the DR broker, and the primary for active-active queues consumed on DR (brokersync.sides).
GATE = RoleGate(role_store(), TOPOLOGY, "dr", role_region_from_env(), per_queue=True)
MAX_SECONDS = seconds_setting(ENV_PURGE_MAX_SECONDS) or DEFAULT_PURGE_MAX_SECONDS
_MISSING_AFTER_S = seconds_setting(ENV_PURGE_MISSING_AFTER_S)
SETTINGS = PurgeSettings(missing_after=timedelta(seconds=_MISSING_AFTER_S)) if _MISSING_AFTER_S else PurgeSettings()
#: Kept across the warm environment's invocations (one per broker purged), so that sweeps keep their pace.
LATE_COPIES: dict[str, LateCopySweep] = {}
#: Kept likewise: per broker, per queue, the message ids not found on it and when to look again.
NOT_FOUND: dict[str, dict[str, dict[str, float]]] = {}
RETURN_WHEN_IDLE = os.environ.get("BROKERSYNC_PURGE_RETURN_WHEN_IDLE", "false").lower() == "true"
#: Seconds before the invocation's end by which a purge round stops starting selector groups.
HARD_MARGIN_S = 8.0


def _primary_statistics(topology: Topology) -> StatisticsClient | None:
    """The primary's counters, for the copy backlog (loss-risk) metric; None when its secret is unreadable.

    The purge never needs the primary to do its job, so a primary that cannot be reached only
    leaves that one metric out (the DR side keeps purging during a regional outage).
    """
    try:
        return StatisticsClient(broker_connector(topology.primary))
    except GetParameterError as e:
        logger.warning("copy backlog not measured: %s", e)
        return None


def _iteration(event: object) -> int:
    """The loop's count so far; 0 for an event without a whole number there (an invocation by hand)."""
    value = event.get("iteration") if isinstance(event, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


@logger.inject_lambda_context
@metrics.log_metrics
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    iteration = _iteration(event) + 1
    # Sync stopped (a transition in progress): wait inside the invocation, as an idle purge
    # does, and start purging within seconds of StartSync.
    standing = GATE.wait_to_act(
        max(0.0, min(MAX_SECONDS, context.get_remaining_time_in_millis() / 1000 - 10)), while_stopped_only=True
    )
    if not standing.acting:
        # Sync stopped (a transition): wait in the loop for it to start again. The DR role
        # elsewhere: this region's loop ends, so a loop costs only where it purges.
        logger.info("purge on standby", reason=standing.reason, epoch=standing.epoch)
        return {
            "purged": 0,
            "missing": 0,
            "pending": 0,
            "rounds": 0,
            "idle": True,
            "iteration": iteration,
            "standby": standing.reason,
            "endLoop": standing.sync_running,
            "epoch": standing.epoch,
        }
    remaining_s = context.get_remaining_time_in_millis() / 1000
    budget = min(MAX_SECONDS, remaining_s - 10)
    # A round started near the budget's end still has to finish inside the invocation: the
    # remover starts no selector group past this, and a receipt wait ends 5 s after it at most.
    hard_deadline = time.monotonic() + remaining_s - HARD_MARGIN_S

    def purge_on(duty: Duty) -> PurgeReport:
        topology = duty.view  # after a failover the DR broker is the old primary
        broker = broker_connector(duty.broker)
        service = PurgeService(
            LEDGER,
            SelectorRemover(broker),
            topology,
            settings=SETTINGS,
            metrics=SINK,
            dr_statistics=StatisticsClient(broker),
            primary_statistics=_primary_statistics(topology),
            late_copies=LATE_COPIES.setdefault(duty.broker.name, LateCopySweep()),
            waiting=NOT_FOUND.setdefault(duty.broker.name, {}),
        )
        return service.run(
            max_seconds=budget, stop_when_idle=RETURN_WHEN_IDLE, hard_deadline=hard_deadline, stop=record_moved
        )

    with GATE.watch(standing) as record_moved:
        reports = run_each(standing.duties, purge_on)
    pending = sum(r.pending for r in reports)
    return {
        "purged": sum(r.purged for r in reports),
        "missing": sum(r.missing for r in reports),
        "pending": pending,
        "rounds": max(r.rounds for r in reports),
        # A run that did no round (an invocation with less than its margin left) is idle too:
        # repeated at once, it would be a loop of invocations doing nothing.
        "idle": all(r.returned_idle or r.rounds == 0 for r in reports),
        "iteration": iteration,
        "brokers": [d.broker.name for d in standing.duties],
        "epoch": standing.epoch,
    }
