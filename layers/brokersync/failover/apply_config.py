"""A role's configuration applied to one broker: the ``aws mq`` steps of a deploy, as one call.

An operator needs this outside a transition: at set-up, and when a pair is re-paired with a
broker in a third region (the survivor's network connector still points at the lost broker).
By hand it is four calls and a wait (render, ``update-configuration``, ``update-broker``,
``reboot-broker``, then polling the state); done here it is the same calls the failover steps
make (:class:`~brokersync.failover.control_plane.BrokerControl`, each safe to repeat), so a
second run creates no second revision and reboots nothing that already runs the document.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from brokersync.broker.statistics import StatisticsClient
from brokersync.exceptions import BrokerSyncError
from brokersync.failover.control_plane import RUNNING, BrokerControl
from brokersync.failover.errors import ConfigurationApplyError
from brokersync.render import render_configuration
from brokersync.topology import CONSUMED_QUEUE, Role, Topology

#: States in which a broker will not come back on its own (Amazon MQ's documented states).
FAILED_STATES = ("CRITICAL_ACTION_REQUIRED", "DELETION_IN_PROGRESS")
#: A reboot of an active/standby broker takes up to about 15 minutes.
DEFAULT_REBOOT_TIMEOUT_S = 1800.0


@dataclass(frozen=True)
class ConfigurationApplied:
    broker: str
    role: Role
    configuration_id: str
    revision: int
    #: A new revision was created (False when the broker's latest revision was this document).
    created: bool
    #: The broker was rebooted onto the revision (False without ``reboot``, or when it ran it already).
    rebooted: bool
    state: str
    warnings: list[dict[str, Any]] = field(default_factory=list)


def topology_for(topology: Topology, broker: str, role: Role) -> Topology:
    """``topology`` with ``broker`` playing ``role`` (the other broker the other role)."""
    if broker not in {b.name for b in topology.brokers}:
        raise ConfigurationApplyError(f"the topology has no broker {broker!r} ({[b.name for b in topology.brokers]})")
    return topology if topology.broker(role).name == broker else topology.swapped()


def apply_role_configuration(
    control: BrokerControl,
    topology: Topology,
    broker: str,
    role: Role,
    *,
    reboot: bool = False,
    timeout_s: float = DEFAULT_REBOOT_TIMEOUT_S,
    poll_s: float = 10.0,
    progress: Callable[[str], None] = lambda _line: None,
    before_reboot: Callable[[], None] = lambda: None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> ConfigurationApplied:
    """Render ``role`` for ``broker`` over what it runs now and make it the broker's next revision.

    With ``reboot`` the broker is rebooted onto it (unless it already runs it) and this waits,
    at most ``timeout_s``, until Amazon MQ reports it RUNNING; ``before_reboot`` runs first
    (for a primary, :func:`wait_for_relay`). The customer's own settings in the current
    document stay (the render merges into it).
    """
    _, current_revision, current = control.current_document(broker)
    document = render_configuration(topology_for(topology, broker, role), role, base=current)
    applied = control.apply(broker, document, f"BrokerSync apply-config: {role}")
    verb = "created" if applied.created else "reused"
    progress(f"{broker}: {verb} revision {applied.revision} of {role} configuration (runs {current_revision})")
    rebooted = False
    if reboot and control.needs_reboot(broker, applied.revision):
        before_reboot()
        progress(f"{broker}: rebooting onto revision {applied.revision}")
        control.reboot(broker)
        rebooted = True
    state = wait_until_running(control, broker, timeout_s, poll_s, progress, clock, sleep) if rebooted else ""
    return ConfigurationApplied(
        broker,
        role,
        applied.configuration_id,
        applied.revision,
        applied.created,
        rebooted,
        state or control.state(broker),
        applied.warnings,
    )


def wait_until_running(
    control: BrokerControl,
    broker: str,
    timeout_s: float,
    poll_s: float,
    progress: Callable[[str], None] = lambda _line: None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> str:
    """Poll the broker's state until RUNNING; a failed state or the timeout is an error."""
    deadline = clock() + timeout_s
    seen = ""
    while True:
        state = control.state(broker)
        if state != seen:
            progress(f"{broker}: {state}")
            seen = state
        if state == RUNNING:
            return state
        if state in FAILED_STATES:
            raise ConfigurationApplyError(f"{broker} is {state} after the reboot: see its Amazon MQ console")
        if clock() >= deadline:
            raise ConfigurationApplyError(f"{broker} was not RUNNING {timeout_s:.0f}s after the reboot (last {state})")
        sleep(poll_s)


def wait_for_relay(
    statistics: StatisticsClient,
    timeout_s: float = 120.0,
    poll_s: float = 0.5,
    progress: Callable[[str], None] = lambda _line: None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> int:
    """Before a primary reboots: wait until the relay has taken every consumed advisory; what is left.

    Forwarded advisories are not persistent, so a reboot drops those the relay has not taken
    yet, and their messages stay on DR until a reconciliation repairs the ledger. With the
    consumers stopped first, waiting for ``BROKERSYNC.CONSUMED`` to be empty (twice in a row)
    makes the reboot drop none; with consumers running it shrinks the loss to what they
    consume in the last moments. Returns the advisories still queued at the timeout (0 when
    drained); a broker that cannot be read is reported and not waited for.
    """
    deadline = clock() + timeout_s
    empty_reads = 0
    left = 0
    while True:
        try:
            stats = statistics.queue_stats([CONSUMED_QUEUE]).get(CONSUMED_QUEUE)
        except BrokerSyncError as e:
            progress(f"the relay's backlog cannot be read ({e}): rebooting without waiting for it")
            return -1
        left = stats.size if stats is not None else 0
        empty_reads = empty_reads + 1 if left == 0 else 0
        if empty_reads >= 2:
            return 0
        if clock() >= deadline:
            progress(f"{left} consumed advisories still queued after {timeout_s:.0f}s: the reboot drops them")
            return left
        sleep(poll_s)
