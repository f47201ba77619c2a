"""``brokersync copy-burst``: the local pair copying a burst of messages, shown as it happens.

It starts the local world (unless it is already up), sends a burst of persistent messages
with ULID correlation ids to every synced queue on the primary, and prints each queue's
depth on the DR broker about once a second until every copy has arrived. Then it checks
the copies message by message (ids, correlation ids, bodies) by browsing the DR queues, a
browse being the one read that changes nothing, and stops what it started.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from brokersync.broker.statistics import StatisticsClient
from brokersync.broker.stomp import StompConnector
from brokersync.client import send
from brokersync.topology import load_topology
from brokersync_local.browsing import browse
from brokersync_local.world import LocalWorld, WorldPorts


@dataclass
class CopyBurstSettings:
    topology: Path
    state_dir: Path
    messages: int = 200
    timeout_s: float = 60.0
    keep: bool = False
    ports: WorldPorts | None = None


def run_copy_burst(settings: CopyBurstSettings, out: Callable[[str], None] = print) -> int:
    """Run the copy burst; 0 when every copy arrived intact."""
    world = LocalWorld(load_topology(settings.topology), settings.state_dir, settings.ports)
    started_here = not world.running()
    world.up(log=out)
    try:
        return _copy_burst(world, settings, out)
    finally:
        if started_here and not settings.keep:
            world.down(log=out)


def _copy_burst(world: LocalWorld, settings: CopyBurstSettings, out: Callable[[str], None]) -> int:
    topology = world.topology
    primary = StompConnector(topology.primary.stomp)
    dr = StompConnector(topology.dr.stomp)
    dr_stats = StatisticsClient(dr)
    names = [q.name for q in topology.queues]
    before = {name: s.size for name, s in dr_stats.queue_stats(names).items()}

    sent: dict[str, dict[str, str]] = {name: {} for name in names}
    connection = primary.connect(name="brokersync-demo-producer")
    started = time.monotonic()
    for index in range(settings.messages):
        queue = names[index % len(names)]
        body = f'{{"demo": {index}, "queue": "{queue}"}}'
        key = send(connection, queue, body, headers={"amq-msg-type": "text"})
        sent[queue][key] = body
    connection.disconnect()
    out(f"sent {settings.messages} persistent messages to {', '.join(names)} on {topology.primary.name}")

    deadline = started + settings.timeout_s
    while True:
        depth = {name: s.size - before.get(name, 0) for name, s in dr_stats.queue_stats(names).items()}
        elapsed = time.monotonic() - started
        line = "  ".join(f"{name}: {depth.get(name, 0)}/{len(sent[name])}" for name in names)
        out(f"[{elapsed:5.1f}s] on {topology.dr.name}: {line}")
        if all(depth.get(name, 0) >= len(sent[name]) for name in names):
            break
        if time.monotonic() > deadline:
            out(f"not every copy arrived within {settings.timeout_s:.0f}s")
            return 1
        time.sleep(1.0)

    mismatches = 0
    for name in names:
        copies = {f.headers.get("correlation-id"): f.body for f in browse(dr, name)}
        for key, body in sent[name].items():
            if copies.get(key) != body:
                mismatches += 1
    total = sum(len(v) for v in sent.values())
    out(f"verified on {topology.dr.name}: {total - mismatches}/{total} copies with the same correlation id and body")
    return 0 if mismatches == 0 else 1


def main_copy_burst(args: object) -> int:
    settings = CopyBurstSettings(
        topology=Path(getattr(args, "topology", "topology.yaml")),
        state_dir=Path(getattr(args, "state_dir", ".brokersync/local")),
        messages=getattr(args, "messages", 200),
        keep=getattr(args, "keep", False),
    )
    try:
        return run_copy_burst(settings)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
