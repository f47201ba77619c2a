"""Pairs of their own, for tests whose brokers must be configured unlike the session's pair.

A customer's base configuration (the scheduler, the redelivery plugin) or another topology
(a virtual topic's consumer queue) needs brokers started for it; these helpers start such a
pair, hand out its connectors with the queues emptied after each test, restart one broker on
a configuration rendered past a render's checks, and wait for messages to appear.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from brokersync.broker.stomp import StompConnector
from brokersync.topology import Role, Topology
from brokersync_local.tls import LocalTls
from brokersync_local.world import LocalWorld, WorldPorts
from brokersync_local.wrapper import wrap_for_local
from tests.emptying import empty_pair
from tests.integration.test_exact_removal import primary_ids
from tests.ports import shifted_ports

#: A test's pair: its topology (ports localised), the primary's and the DR broker's connectors.
Pair = tuple[Topology, StompConnector, StompConnector]


@contextmanager
def own_pair(
    topology: Topology, state_dir: Path, ports: WorldPorts, base: str | None = None, tls: LocalTls | None = None
) -> Iterator[LocalWorld]:
    """A pair on ``ports`` (shifted as the suite's are), rendered into ``base``, TLS only with ``tls``.

    Destroyed on exit.
    """
    world = LocalWorld(topology, state_dir, shifted_ports(ports), base, tls)
    world.up(timeout_s=90, log=lambda _m: None)
    try:
        yield world
    finally:
        world.destroy()


@contextmanager
def emptied_after(world: LocalWorld, queues: list[str] | None = None) -> Iterator[Pair]:
    """The pair's topology and connectors; its synced queues (or ``queues``) emptied afterwards."""
    topology = world.topology
    yield topology, StompConnector(topology.primary.stomp), StompConnector(topology.dr.stomp)
    empty_pair(topology, queues)


def restart_with(world: LocalWorld, role: Role, configuration: str) -> None:
    """Restart the broker playing ``role`` on ``configuration`` (an Amazon MQ document)."""
    broker = world.brokers[role]
    broker.pid = broker.pid or world.read_env()[role]["pid"]
    broker.stop()
    broker.prepare(wrap_for_local(configuration, broker.name, broker.ports))
    broker.start()
    broker.wait_ready(60)


def ids_once_there(connector: StompConnector, queue: str, count: int, timeout_s: float = 30) -> set[str]:
    """The ids on ``queue`` once at least ``count`` messages are there (browsed, nothing consumed)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        ids = primary_ids(connector, queue)
        if len(ids) >= count:
            return ids
        time.sleep(0.2)
    raise AssertionError(f"fewer than {count} messages reached {queue} within {timeout_s} s")
