"""The CloudWatch alarm evaluation stand-in: the template's alarm rules applied to emitted datapoints.

moto stores alarms and metric data but never evaluates an alarm, so a local world cannot
show that an alarm fires. This evaluates one metric alarm as CloudWatch documents it:
datapoints aggregated per ``Period`` with the alarm's ``Statistic``; the last
``EvaluationPeriods`` periods examined; ``DatapointsToAlarm`` of them (default: all) must
breach; a period with no datapoint counts as ``TreatMissingData`` says (``breaching``,
``notBreaching``, ``ignore`` keeps the previous state, ``missing`` with every period empty is
``INSUFFICIENT_DATA``). Metric-math alarms are not evaluated (none of ours is).

The datapoints come from the functions' own output: powertools writes Embedded Metric
Format lines, which :func:`emf_datapoints` reads, the way CloudWatch Logs turns them into
metrics in AWS.
"""

from __future__ import annotations

import json
import operator
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

ALARM, OK, INSUFFICIENT = "ALARM", "OK", "INSUFFICIENT_DATA"

_COMPARE: dict[str, Callable[[float, float], bool]] = {
    "GreaterThanThreshold": operator.gt,
    "GreaterThanOrEqualToThreshold": operator.ge,
    "LessThanThreshold": operator.lt,
    "LessThanOrEqualToThreshold": operator.le,
}
_STATISTIC: dict[str, Callable[[list[float]], float]] = {
    "Maximum": max,
    "Minimum": min,
    "Sum": sum,
    "Average": lambda values: sum(values) / len(values),
    "SampleCount": lambda values: float(len(values)),
}


@dataclass(frozen=True)
class Datapoint:
    metric: str
    dimensions: tuple[tuple[str, str], ...]
    timestamp_s: float
    value: float


def emf_datapoints(lines: Iterable[str]) -> list[Datapoint]:
    """Every metric value in Embedded Metric Format lines (other lines are skipped)."""
    points: list[Datapoint] = []
    for line in lines:
        text = line.strip()
        if not text.startswith("{") or '"_aws"' not in text:
            continue
        try:
            document = json.loads(text)
        except json.JSONDecodeError:
            continue
        meta = document.get("_aws", {})
        timestamp_s = float(meta.get("Timestamp", 0)) / 1000
        for directive in meta.get("CloudWatchMetrics", []):
            for names in directive.get("Dimensions", [[]]):
                dimensions = tuple(sorted((n, str(document.get(n, ""))) for n in names))
                for metric in directive.get("Metrics", []):
                    values = document.get(metric["Name"])
                    for value in values if isinstance(values, list) else [values]:
                        if value is not None:
                            points.append(Datapoint(metric["Name"], dimensions, timestamp_s, float(value)))
    return points


def _matches(alarm: dict[str, Any], point: Datapoint) -> bool:
    wanted = tuple(sorted((d["Name"], str(d["Value"])) for d in alarm.get("Dimensions", [])))
    return point.metric == alarm["MetricName"] and point.dimensions == wanted


def evaluate(alarm: dict[str, Any], points: Iterable[Datapoint], now_s: float, previous: str = INSUFFICIENT) -> str:
    """The state of ``alarm`` (resolved CloudFormation properties) at ``now_s`` given ``points``."""
    if "Metrics" in alarm:
        raise NotImplementedError(f"{alarm.get('AlarmName')}: metric-math alarms are not evaluated here")
    period = int(alarm["Period"])
    periods = int(alarm["EvaluationPeriods"])
    needed = int(alarm.get("DatapointsToAlarm", periods))
    compare = _COMPARE[alarm["ComparisonOperator"]]
    statistic = _STATISTIC[alarm["Statistic"]]
    threshold = float(alarm["Threshold"])
    missing = alarm.get("TreatMissingData", "missing")
    current = now_s - now_s % period  # start of the period now running
    buckets: dict[int, list[float]] = {age: [] for age in range(periods)}  # age 0: the current period
    for point in points:
        age = int((current - (point.timestamp_s - point.timestamp_s % period)) // period)
        if _matches(alarm, point) and 0 <= age < periods:
            buckets[age].append(point.value)
    breaching = 0
    present = 0
    for values in buckets.values():
        if values:
            present += 1
            breaching += compare(statistic(values), threshold)
        elif missing == "breaching":
            breaching += 1
    if present == 0 and missing in ("missing", "ignore"):
        return INSUFFICIENT if missing == "missing" else previous
    return ALARM if breaching >= needed else OK
