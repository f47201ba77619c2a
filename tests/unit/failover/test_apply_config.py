"""apply-config: a role's configuration made the broker's next revision, and with a reboot, what it runs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from brokersync.broker.statistics import QueueStats
from brokersync.failover.apply_config import apply_role_configuration, wait_for_relay
from brokersync.failover.control_plane import AppliedConfiguration
from brokersync.failover.errors import ConfigurationApplyError
from brokersync.render import render_configuration
from brokersync.topology import CONSUMED_QUEUE, Topology, load_topology


class _Broker:
    """One Amazon MQ broker as BrokerControl sees it: revisions, a pending one, a state."""

    def __init__(self, document: str, states_after_reboot: list[str]) -> None:
        self.revisions = [document]
        self.current = 1
        self.pending: int | None = None
        self.reboots = 0
        self.states: list[str] = []
        self.states_after_reboot = states_after_reboot

    # The BrokerControl methods apply_role_configuration uses.
    def current_document(self, name: str) -> tuple[str, int, str]:
        return "c-1", self.current, self.revisions[self.current - 1]

    def apply(self, name: str, document: str, description: str) -> AppliedConfiguration:
        created = self.revisions[-1] != document
        if created:
            self.revisions.append(document)
        if self.current != len(self.revisions):
            self.pending = len(self.revisions)
        return AppliedConfiguration(name, "c-1", len(self.revisions), created)

    def needs_reboot(self, name: str, revision: int) -> bool:
        return self.pending is not None or self.current != revision

    def reboot(self, name: str) -> None:
        self.reboots += 1
        self.current, self.pending = self.pending or self.current, None
        self.states = list(self.states_after_reboot)

    def state(self, name: str) -> str:
        return self.states.pop(0) if len(self.states) > 1 else (self.states or ["RUNNING"])[0]


@pytest.fixture
def topology(topology_path: Path) -> Topology:
    return load_topology(topology_path)


def _dr_broker(topology: Topology, states: list[str] | None = None) -> _Broker:
    return _Broker(render_configuration(topology, "dr"), states or ["REBOOT_IN_PROGRESS", "RUNNING"])


def _apply(broker: _Broker, topology: Topology, **kwargs: Any) -> Any:
    return apply_role_configuration(broker, topology, "orders-usw2", "primary", poll_s=0, **kwargs)  # type: ignore[arg-type]


def test_without_reboot_the_role_configuration_is_the_next_revision_and_nothing_restarts(topology: Topology) -> None:
    broker = _dr_broker(topology)

    applied = _apply(broker, topology)

    assert (applied.revision, applied.created, applied.rebooted, broker.reboots) == (2, True, False, 0)
    assert "networkConnector" in broker.revisions[1], "the DR broker's next revision is a primary configuration"


def test_applying_twice_creates_one_revision_and_reboots_once(topology: Topology) -> None:
    broker = _dr_broker(topology)

    first = _apply(broker, topology, reboot=True)
    second = _apply(broker, topology, reboot=True)

    assert (first.created, first.rebooted, first.state) == (True, True, "RUNNING")
    assert (second.created, second.rebooted, second.revision) == (False, False, first.revision)
    assert broker.reboots == 1


def test_a_reboot_is_followed_until_the_broker_runs_and_reported(topology: Topology) -> None:
    broker = _dr_broker(topology, ["REBOOT_IN_PROGRESS", "REBOOT_IN_PROGRESS", "RUNNING"])
    lines: list[str] = []

    _apply(broker, topology, reboot=True, progress=lines.append)

    assert lines[-2:] == ["orders-usw2: REBOOT_IN_PROGRESS", "orders-usw2: RUNNING"]


def test_a_broker_that_does_not_come_back_is_an_error_naming_it(topology: Topology) -> None:
    broker = _dr_broker(topology, ["REBOOT_IN_PROGRESS", "CRITICAL_ACTION_REQUIRED"])

    with pytest.raises(ConfigurationApplyError, match="orders-usw2 is CRITICAL_ACTION_REQUIRED"):
        _apply(broker, topology, reboot=True)


def test_a_reboot_that_outlasts_the_timeout_is_an_error(topology: Topology) -> None:
    broker = _dr_broker(topology, ["REBOOT_IN_PROGRESS"])
    ticks = iter(range(100))

    with pytest.raises(ConfigurationApplyError, match="not RUNNING 5s after"):
        _apply(broker, topology, reboot=True, timeout_s=5, clock=lambda: float(next(ticks)), sleep=lambda _s: None)


def test_a_broker_the_topology_does_not_name_is_refused(topology: Topology) -> None:
    with pytest.raises(ConfigurationApplyError, match="no broker 'orders-euw1'"):
        apply_role_configuration(_dr_broker(topology), topology, "orders-euw1", "dr")  # type: ignore[arg-type]


class _Advisories:
    """The primary's advisory queue as the statistics plugin reports it, one read at a time."""

    def __init__(self, sizes: list[int]) -> None:
        self.sizes = sizes

    def queue_stats(self, names: list[str]) -> dict[str, Any]:
        size = self.sizes.pop(0) if len(self.sizes) > 1 else self.sizes[0]
        return {CONSUMED_QUEUE: QueueStats(CONSUMED_QUEUE, size, 0, 0, 0, 0, 0, 1, "b-1", "orders-usw2")}


def test_a_primary_reboots_only_once_the_relay_has_taken_every_advisory() -> None:
    advisories = _Advisories([40, 3, 0, 0])

    assert wait_for_relay(advisories, poll_s=0) == 0  # type: ignore[arg-type]
    assert advisories.sizes == [0]


def test_advisories_still_queued_at_the_timeout_are_reported_not_waited_for_forever() -> None:
    ticks = iter(range(100))
    lines: list[str] = []

    left = wait_for_relay(
        _Advisories([7]),  # type: ignore[arg-type]
        timeout_s=5,
        progress=lines.append,
        clock=lambda: float(next(ticks)),
        sleep=lambda _s: None,
    )

    assert left == 7 and "7 consumed advisories still queued" in lines[-1]
