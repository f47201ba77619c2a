"""Each process's CPU per message relative to the application's in the same step.

The sync bench meters CPU-seconds per 1,000 messages for each process from the kernel's
accounting. Its application, the producer and the consumer, does the same work per message in
every step of every run, and yet its figure moved by up to 75 % between two back-to-back runs
on this machine, with every other process's moving the same way (decision 0042): the whole
machine ran slower or faster. A process's figure divided by the application's in the same step
takes that out, and is what two runs can be held to agree on. Ratios within one step (the
relay and the purge over the primary broker) never needed it; ratios between two steps (the
DR broker at 50,000 deep over 0 deep) do, because the steps run minutes apart.

Used by the performance page (``bench/performance.md.j2``) on the figures the results files
hold, so every results file, old ones included, gets the same treatment.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

#: The bench's own clients: the same work per message in every step, so the yardstick.
APPLICATION = ("producer", "consumer")
#: Left out of the relative figures: the yardstick itself, and moto, which stands in for DynamoDB.
_NOT_RELATED = (*APPLICATION, "aws_emulator")


def _relative(cpu_s_per_1000: Mapping[str, float]) -> dict[str, float]:
    application = sum(cpu_s_per_1000[name] for name in APPLICATION)
    if application <= 0:
        raise ValueError("the application spent no CPU in this step: nothing to relate the figures to")
    return {name: value / application for name, value in cpu_s_per_1000.items() if name not in _NOT_RELATED}


def over_application(cpu_s_per_1000: Mapping[str, float]) -> dict[str, float]:
    """Each process's CPU-seconds per 1,000 messages ÷ the application's (producer + consumer), same step."""
    return {name: round(value, 3) for name, value in _relative(cpu_s_per_1000).items()}


def depth_ratio_over_application(run: Mapping[str, Any], process: str = "dr_broker") -> float:
    """``process`` at the run's deepest step ÷ at its shallowest, each first divided by the application's.

    From the unrounded relative figures: rounding both to three places first can move the
    ratio's second decimal when the figures are small."""
    steps = list(run["sync"].values())
    deepest, shallowest = (_relative(step["cpu_s_per_1000"])[process] for step in (steps[-1], steps[0]))
    return round(deepest / shallowest, 2)
