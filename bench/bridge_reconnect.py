"""How soon copies flow again after the DR broker comes back: the bridge's reconnect cap the topology
ships, against ActiveMQ's own 30 s, after the same outages.

A network connector that loses its peer tries again after 1 s and doubles the wait after each
failed attempt, up to a cap (``tuning.bridge.max_reconnect_delay_ms``, decision 0025). A DR
broker that was down for longer than a few attempts therefore waits, once it listens again,
until the bridge's next attempt; the copies made meanwhile wait in the primary's outflow. An
Amazon MQ reboot takes minutes, so every failover, failback and maintenance window lands in
the capped part of the backoff.

Two local pairs run side by side, one rendered with the shipped topology's cap and one with
ActiveMQ's 30 s. Each outage stops the DR broker of one pair (its journal kept), keeps it down
for a drawn time, starts it, and times from its listening again to the primary logging every
bridge established; the other pair then gets the same outage. The order alternates, so neither
pair always goes first. Outage lengths are drawn from a seeded generator, the same for both.

Run: ``.venv/bin/python bench/bridge_reconnect.py [--outages 8] [--max-down 60] [--seed 25]``
(writes bench/results/bridge_reconnect.json; ``--no-record`` to only print)
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from brokersync.topology import ACTIVEMQ_MAX_RECONNECT_DELAY_MS, Topology, load_topology
from brokersync_ci import bench_results
from brokersync_local.restarts import restart_dr
from brokersync_local.world import LocalWorld, WorldPorts

ROOT = Path(__file__).resolve().parents[1]
#: One pair per way, on ports of their own.
PORTS = {
    "shipped": WorldPorts(primary_openwire=63216, primary_stomp=63213, dr_openwire=64216, dr_stomp=64213, aws=5091),
    "activemq": WorldPorts(primary_openwire=63116, primary_stomp=63113, dr_openwire=64116, dr_stomp=64113, aws=5090),
}
#: Longer than ActiveMQ's own cap plus a connect on two loaded cores: a bridge not back by then is a failure.
BRIDGE_TIMEOUT_S = 60.0


def way_topology(way: str) -> Topology:
    """The shipped topology, as a user deploys it, or the same with ActiveMQ's own reconnect cap."""
    shipped = load_topology(ROOT / "topology.yaml")
    if way == "shipped":
        return shipped
    bridge = shipped.tuning.bridge.model_copy(update={"max_reconnect_delay_ms": ACTIVEMQ_MAX_RECONNECT_DELAY_MS})
    return shipped.model_copy(update={"tuning": shipped.tuning.model_copy(update={"bridge": bridge})})


def outage(world: LocalWorld, down_s: float) -> dict[str, float]:
    """One DR outage, ``down_s`` beyond its stop and start: how long it lasted, and the bridge's wait after it."""
    stopped: list[float] = []
    waited = restart_dr(
        world, down_s=down_s, while_down=lambda: stopped.append(time.monotonic()), timeout_s=BRIDGE_TIMEOUT_S
    )
    listening = time.monotonic() - waited
    return {"outage_s": round(listening - stopped[0], 2), "bridge_back_s": round(waited, 2)}


def summary(waits: list[float]) -> dict[str, float]:
    return {
        "median": round(statistics.median(waits), 2),
        "mean": round(statistics.fmean(waits), 2),
        "min": min(waits),
        "max": max(waits),
    }


def progress(line: str) -> None:
    print(f"{time.strftime('%H:%M:%S')} {line}", file=sys.stderr, flush=True)


def measure(outages: int, max_down_s: float, seed: int) -> dict[str, Any]:
    """``outages`` outages of each pair, lengths drawn in [0, ``max_down_s``], pairs alternating."""
    draw = random.Random(seed)
    downs = [round(draw.uniform(0, max_down_s), 1) for _ in range(outages)]
    ways = list(PORTS)
    per: dict[str, list[dict[str, float]]] = {way: [] for way in ways}
    worlds: dict[str, LocalWorld] = {}
    with tempfile.TemporaryDirectory(prefix="bench-bridge-reconnect-") as state:
        try:
            for way in ways:
                worlds[way] = LocalWorld(way_topology(way), Path(state) / way, PORTS[way])
                worlds[way].up(timeout_s=90, log=lambda _m: None)
            order = bench_results.alternating(ways, outages)
            for index, way in enumerate(order):
                down_s = downs[index // len(ways)]
                figures = outage(worlds[way], down_s)
                per[way].append(figures)
                progress(f"{way}: outage {figures['outage_s']} s, bridge back after {figures['bridge_back_s']} s")
        finally:
            for world in worlds.values():
                world.destroy()
    return {
        "outages": outages,
        "down_s": downs,
        **{
            way: {
                "max_reconnect_delay_ms": worlds[way].topology.tuning.bridge.max_reconnect_delay_ms,
                "restarts": per[way],
                "bridge_back_s": summary([r["bridge_back_s"] for r in per[way]]),
            }
            for way in ways
        },
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--outages", type=int, default=8, help="outages of each pair (8)")
    parser.add_argument("--max-down", type=float, default=60.0, help="longest drawn down time, seconds (60)")
    parser.add_argument("--seed", type=int, default=25, help="seed of the drawn down times (25)")
    bench_results.add_arguments(parser, "bridge_reconnect", repeat=None)
    args = parser.parse_args()
    if args.outages < 1 or args.max_down < 0:
        parser.error("--outages must be 1 or more and --max-down 0 or more")
    result = measure(args.outages, args.max_down, args.seed)
    return bench_results.finish("bridge_reconnect", result, args)


if __name__ == "__main__":
    sys.exit(bench_results.exit_code(main))
