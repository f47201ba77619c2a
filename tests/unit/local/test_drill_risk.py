"""The drill's risk sampler keeps sampling whatever a drill does to its brokers meanwhile."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from brokersync.topology import load_topology
from brokersync_local.drill_risk import RiskSample, RiskSampler

ROOT = Path(__file__).resolve().parents[3]


class GrowingConnectors:
    """A connector that, while it is being asked, has the drill add a broker, then does not answer."""

    def __init__(self, connectors: dict[str, Any]) -> None:
        self.connectors = connectors

    def connect(self, *args: Any, **kwargs: Any) -> None:
        self.connectors["orders-euw1"] = Unanswering()
        raise OSError("connection refused")


class Unanswering:
    def connect(self, *args: Any, **kwargs: Any) -> None:
        raise OSError("connection refused")


def _sampler(connectors: dict[str, Any]) -> RiskSampler:
    topology = load_topology(ROOT / "topology.yaml")
    queue = topology.queues[0].name
    return RiskSampler(topology, queue, connectors, ledger=lambda: None, started=time.time, every_s=0.01)


def test_a_broker_added_while_a_sample_reads_the_others_does_not_end_the_sample() -> None:
    connectors: dict[str, Any] = {}
    connectors["orders-use1"] = GrowingConnectors(connectors)
    connectors["orders-usw2"] = Unanswering()

    assert _sampler(connectors).sample().copy_backlog is None  # measured nothing, raised nothing
    assert "orders-euw1" in connectors


def test_a_sample_that_fails_is_recorded_unmeasured_and_sampling_goes_on() -> None:
    sampler = _sampler({})
    calls = iter([RuntimeError("a bug in one sample"), None, None, None])

    def sample() -> RiskSample:
        failure = next(calls, None)
        if failure is not None:
            raise failure
        return RiskSample(0.0, 0, 0.0, 0, 0.0)

    sampler.sample = sample  # type: ignore[method-assign]
    sampler.start()
    time.sleep(0.2)
    sampler.stop()

    assert sampler.samples[0].copy_backlog is None
    assert any(s.copy_backlog == 0 for s in sampler.samples[1:])
