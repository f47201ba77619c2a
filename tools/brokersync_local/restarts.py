"""Restarting the local DR broker and waiting for the primary's bridges to it: one way for every test and bench."""

from __future__ import annotations

import time
from collections.abc import Callable

from brokersync_local.world import LocalWorld


def restart_dr(
    world: LocalWorld,
    *,
    down_s: float = 0.0,
    while_down: Callable[[], None] | None = None,
    timeout_s: float = 60.0,
) -> float:
    """Stop the DR broker (its journal kept), keep it down ``down_s``, start it, and wait for the bridges.

    ``while_down`` runs once the broker has stopped. Returns the seconds from the restarted
    broker listening to every one of the primary's bridges to it being established again:
    the network connector's reconnect backoff (ActiveMQ's own caps it at 30 s; the topology's
    ``tuning.bridge.max_reconnect_delay_ms`` sets the cap, decision 0025). Raises
    :class:`TimeoutError` when the bridges are not back within ``timeout_s``, rather than
    leave a shared world unbridged for whatever runs next.
    """
    primary = world.brokers["primary"]
    # The primary's log counts every bridge it ever established: the restart adds one per parallel bridge.
    expected = primary.bridges_established() + world.topology.tuning.bridge.parallel_bridges
    world.brokers["dr"].stop()
    if while_down is not None:
        while_down()
    time.sleep(down_s)
    world.start_broker("dr").wait_ready(60)
    listening = time.monotonic()
    while primary.bridges_established() < expected:
        waited = time.monotonic() - listening
        if waited >= timeout_s:
            raise TimeoutError(f"the primary's bridges to DR were not back {waited:.0f}s after DR restarted")
        time.sleep(0.1)
    return time.monotonic() - listening
