"""``brokersync cost --rate R``: what the BrokerSync stacks cost a month at R msg/s, and why.

A model, not a bill: each line is a measured figure (the ledger's write units as the sync
bench counted them at each rate, the functions' loop budgets, the purge loop's polls of each
synced queue) times a published on-demand price. The
prices are us-east-1 list prices as published when this was written; pass ``--prices
FILE.json`` with today's to refresh them. The brokers themselves are not included: the pair
exists with or without BrokerSync.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

from brokersync.capture.relay import RelaySettings
from brokersync.config import DEFAULT_PURGE_MAX_SECONDS, RELAY_BILLED_SECONDS, RELAY_SCHEDULE_PERIOD_S
from brokersync.purge.service import PurgeSettings
from brokersync.text_files import read_text_file

SECONDS_PER_MONTH = 30 * 24 * 3600
#: A relay writes a queue's batch every flush interval while that queue has traffic.
RELAY_BATCHES_PER_S = 1 / RelaySettings.flush_interval_s
#: Purge rounds a second: a round that found nothing pauses ``idle_sleep_s``, and one that
#: caught up is followed by the next ``idle_sleep_s`` after it began.
PURGE_ROUNDS_PER_S = 1 / PurgeSettings.idle_sleep_s
#: What DynamoDB charges an eventually consistent read of up to 4 KB, and so the least a Query
#: costs even when it finds nothing: half a read request unit.
EVENTUALLY_CONSISTENT_READ_UNITS = 0.5


@dataclass(frozen=True)
class Prices:
    usd_per_million_write_units: float = 0.625  # DynamoDB on-demand WRU
    usd_per_million_replicated_write_units: float = 0.625  # global table rWRU
    usd_per_million_read_units: float = 0.125
    usd_per_gb_month_storage: float = 0.25
    usd_per_gb_month_pitr: float = 0.20
    usd_per_gb_export: float = 0.10  # DynamoDB export to S3 (full)
    usd_per_gb_second_lambda_arm64: float = 0.0000133334
    usd_per_million_lambda_requests: float = 0.20
    usd_per_thousand_state_transitions: float = 0.025
    usd_per_gb_inter_region: float = 0.02
    usd_per_custom_metric_month: float = 0.30
    usd_per_alarm_metric_month: float = 0.10
    usd_per_dashboard_month: float = 3.00
    usd_per_secret_month: float = 0.40
    usd_per_dpu_hour_glue: float = 0.44


@dataclass(frozen=True)
class Usage:
    """What the stacks do per message and per month, from measurements and the template."""

    #: The ledger's write units, fitted to the sync bench's counts at 50 to 1,000 msg/s on one
    #: queue (bench/results/sync_write_units_by_rate.json; tests/unit/test_cost.py refits and
    #: compares). Each relay batch (four a second while a queue has traffic) writes a work
    #: pointer, an audit count and each 250 ms item it touches, however few messages it holds;
    #: each purge round that removes something writes marks items and deletes pointers. So a
    #: quiet queue costs more per message than a busy one: per queue, ``min(rate, batches a
    #: second)`` times the units per batch, plus the units per message.
    relay_units_per_batch: float = 3.009
    relay_units_per_message: float = 0.0353
    purge_units_per_round: float = 1.679
    purge_units_per_message: float = 0.0354
    #: The capture and marks items the purge reads for the keys it removes.
    read_units_per_1000: float = 10.0
    #: Work-pointer queries per synced queue per second, with traffic or without: the purge loop
    #: reads every synced queue's pointers in each of its rounds (tests/unit/purge/test_service.py
    #: holds the idle loop to it). An upper bound: a round's own time comes on top of the pause.
    pointer_polls_per_queue_per_s: float = PURGE_ROUNDS_PER_S
    ledger_bytes_per_key: float = 45.0  # capture element + mark element + pointer share
    retention_days: float = 7.0  # the ledger's TTL
    message_bytes: float = 1024.0
    function_gb: float = 0.5
    relay_seconds_per_minute: float = RELAY_BILLED_SECONDS  # on its 1-minute schedule, hand-over included
    purge_seconds_per_invocation: float = DEFAULT_PURGE_MAX_SECONDS  # looping through idle rounds
    transitions_per_purge_invocation: float = 2.0  # Purge task + EnoughIterations choice
    #: The health probe, every minute in both regions (brokersync.health): seconds per run.
    probe_seconds_per_run: float = 2.0
    custom_metrics: int = 34  # EMF metric names (service dimension) per region, both regions: 16 + 9 probe x 2
    alarm_metrics: int = 31  # metrics in the alarms of both stacks (metric-math alarms count each)
    dashboards: int = 1  # one per pair
    secrets: int = 4  # two broker secrets, each replicated to the other region
    reconcile_runs_per_month: float = 30.0
    glue_dpu_hours_per_run: float = 2 * 10 / 60  # 2 G.1X workers for about 10 minutes


def ledger_write_units_per_s(rate: float, queues: int, usage: Usage) -> float:
    """The relay's and the purge's write units a second at ``rate`` msg/s spread evenly over ``queues``."""
    if rate <= 0 or queues <= 0:
        return 0.0
    per_queue = rate / queues
    relay = min(per_queue, RELAY_BATCHES_PER_S) * usage.relay_units_per_batch
    purge = min(per_queue, PURGE_ROUNDS_PER_S) * usage.purge_units_per_round
    return queues * (relay + purge) + rate * (usage.relay_units_per_message + usage.purge_units_per_message)


def monthly_cost(
    rate: float, prices: Prices | None = None, usage: Usage | None = None, *, queues: int = 1
) -> dict[str, Any]:
    """Dollars a month per line item for both stacks at ``rate`` msg/s over ``queues`` synced queues, and their total.

    The rate is the pair's total, spread evenly. What grows with the queues rather than the
    messages: each queue with traffic has its own relay batches and purge rounds, whose writes
    carry a fixed part however few messages they hold, and the purge loop reads each synced
    queue's work pointers several times a second whether or not anything was consumed from it.
    """
    p, u = prices or Prices(), usage or Usage()
    messages = rate * SECONDS_PER_MONTH
    thousands = messages / 1000
    table_gb = rate * u.retention_days * 86400 * u.ledger_bytes_per_key / 1e9  # one region's replica
    purge_invocations = SECONDS_PER_MONTH / u.purge_seconds_per_invocation
    relay_invocations = SECONDS_PER_MONTH / RELAY_SCHEDULE_PERIOD_S
    probe_invocations = 2 * SECONDS_PER_MONTH / 60  # both regions, every minute
    writes = ledger_write_units_per_s(rate, queues, u) * SECONDS_PER_MONTH / 1e6
    lines = {
        "ledger_writes": writes * (p.usd_per_million_write_units + p.usd_per_million_replicated_write_units),
        "ledger_reads": thousands * u.read_units_per_1000 / 1e6 * p.usd_per_million_read_units,
        "ledger_pointer_polls": queues
        * u.pointer_polls_per_queue_per_s
        * SECONDS_PER_MONTH
        * EVENTUALLY_CONSISTENT_READ_UNITS
        / 1e6
        * p.usd_per_million_read_units,
        "ledger_storage_and_pitr": 2 * table_gb * (p.usd_per_gb_month_storage + p.usd_per_gb_month_pitr),
        "ledger_replication_transfer": table_gb / u.retention_days * 30 * p.usd_per_gb_inter_region,
        "relay_lambda": u.function_gb
        * u.relay_seconds_per_minute
        * relay_invocations
        * p.usd_per_gb_second_lambda_arm64,
        "purge_lambda": u.function_gb * SECONDS_PER_MONTH * p.usd_per_gb_second_lambda_arm64,
        "probe_lambda": u.function_gb * u.probe_seconds_per_run * probe_invocations * p.usd_per_gb_second_lambda_arm64,
        "lambda_requests": (purge_invocations + relay_invocations + probe_invocations)
        / 1e6
        * p.usd_per_million_lambda_requests,
        "purge_loop_transitions": purge_invocations
        * u.transitions_per_purge_invocation
        / 1000
        * p.usd_per_thousand_state_transitions,
        "copies_inter_region_transfer": messages * u.message_bytes / 1e9 * p.usd_per_gb_inter_region,
        "cloudwatch_metrics_alarms_dashboards": u.custom_metrics * p.usd_per_custom_metric_month
        + u.alarm_metrics * p.usd_per_alarm_metric_month
        + u.dashboards * p.usd_per_dashboard_month,
        "secrets": u.secrets * p.usd_per_secret_month,
        "reconcile_export": u.reconcile_runs_per_month * table_gb * p.usd_per_gb_export,
        "reconcile_glue": u.reconcile_runs_per_month * u.glue_dpu_hours_per_run * p.usd_per_dpu_hour_glue,
    }
    rounded = {name: round(value, 2) for name, value in lines.items()}
    return {
        "rate_msgs_per_s": rate,
        "captured_queues": queues,
        "usd_per_month": rounded,
        "total_usd_per_month": round(sum(lines.values()), 2),
        "purge_loop_usd_per_day": round(lines["purge_loop_transitions"] / 30, 3),
    }


def load_prices(path: Path | None) -> Prices:
    """The default prices with those ``path`` names replaced; ``ValueError`` names what is wrong in it.

    A price is a finite number of dollars, 0 or more: a negative one would subtract from the
    month, and a string or ``NaN`` would fail (or poison) every line it enters.
    """
    if path is None:
        return Prices()
    given = json.loads(read_text_file(path))
    if not isinstance(given, dict):  # a ValueError like every other fault of the file: exit 2
        raise ValueError(  # noqa: TRY004
            f"{path}: expected a JSON object of price names to numbers, not {type(given).__name__}"
        )
    known = {f.name for f in fields(Prices)}
    unknown = sorted(set(given) - known)
    if unknown:
        raise ValueError(f"{path}: unknown price names {', '.join(unknown)} (known: {', '.join(sorted(known))})")
    for name, value in given.items():
        valid = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value) and value >= 0
        if not valid:
            raise ValueError(f"{path}: {name} is {value!r}; a price is a number of dollars, 0 or more")
    return Prices(**given)


def report(rates: list[float], prices: Prices, *, queues: int = 1) -> dict[str, Any]:
    """Every rate's estimate; ``ValueError`` when one overflows, which JSON could only print as ``Infinity``."""
    estimates = [monthly_cost(rate, prices, queues=queues) for rate in rates]
    for estimate in estimates:
        if not math.isfinite(estimate["total_usd_per_month"]):
            raise ValueError(
                f"at {estimate['rate_msgs_per_s']:g} msg/s over {queues} queues with these prices the month "
                "overflows a number of dollars: give a smaller rate, fewer queues or smaller prices"
            )
    return {"estimates": estimates, "prices_used": asdict(prices)}
