"""The metrics port: what library code needs of a metrics object.

At the edge this is powertools' ``Metrics`` (EMF to CloudWatch); locally and in tests it is
:class:`RecordingMetrics`, which keeps the values so the CLI can print them and tests can
assert them. Library code never imports powertools' Metrics itself.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Protocol


class MetricsSink(Protocol):
    def add_metric(self, name: str, unit: str, value: float) -> None: ...


class NullMetrics:
    def add_metric(self, name: str, unit: str, value: float) -> None:
        return None


class RecordingMetrics:
    """Keeps every value per metric name, in order."""

    def __init__(self) -> None:
        self.values: dict[str, list[float]] = defaultdict(list)

    def add_metric(self, name: str, unit: str, value: float) -> None:
        self.values[name].append(value)

    def total(self, name: str) -> float:
        return sum(self.values.get(name, []))
