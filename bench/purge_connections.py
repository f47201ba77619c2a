"""What one removal call costs the purge and the DR broker, with its connection kept or opened for it, and
how long it takes with TCP's delays (Nagle, the delayed ACK) off or on.

The sync bench runs the whole pair on two shared cores, and its run-to-run spread (the primary
broker alone moved by a fifth in one sitting) is larger than a connection per call is worth.
This bench isolates the call: a real DR broker, and the remover as the purge runs it, making
the calls a purge round makes (one per queue with keys: ``--ids-per-call`` consumed messages
to remove, beside as many that stay), in waves that alternate the remover keeping its
connection (:meth:`SelectorRemover.keeping_connections`, decision 0051), opening one per
call, as before, and keeping it with Nagle's algorithm and the delayed ACK left on, as before
decision 0052 (``RemoverSettings.no_tcp_delays``). It reports, per call, the wall time, the
CPU of this process (the remover and stomp.py's receiver thread: nothing else runs here
during a wave) and of the DR broker's process, and at
the end checks that every message that was not to be removed is still on DR, never
redelivered.

Run: ``.venv/bin/python bench/purge_connections.py [--waves 6] [--calls-per-wave 100]
[--ids-per-call 5]`` (writes bench/results/purge_connections.json; ``--no-record`` to only print)
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from brokersync.broker.stomp import StompConnector
from brokersync.purge.remover import RemoverSettings, SelectorRemover
from brokersync.topology import Queue, Topology, load_topology
from brokersync_ci import bench_results
from brokersync_ci.process_cpu import cpu_seconds
from brokersync_local.backlog import fill_queue, queue_depth, wait_until
from brokersync_local.browsing import browse
from brokersync_local.world import LocalWorld, WorldPorts

ROOT = Path(__file__).resolve().parents[1]
PORTS = WorldPorts(primary_openwire=63316, primary_stomp=63313, dr_openwire=64316, dr_stomp=64313, aws=5092)
QUEUE = "BENCH.CONNECTIONS"
BODY = "x" * 1024
#: How long a wave's messages may take to be stored on DR.
FILL_TIMEOUT_S = 120.0
#: Each way the remover is measured: the product's, a connection per call (before 0051), and
#: the kernel's delayed TCP acknowledgements (before 0052).
WAYS = {
    "kept": RemoverSettings(),
    "per_call": RemoverSettings(keep_connections=False),
    "kept_tcp_delays": RemoverSettings(no_tcp_delays=False),
}


def bench_topology() -> Topology:
    base = load_topology(ROOT / "topology.yaml")
    return base.model_copy(update={"queues": [Queue(name=QUEUE, mode="sync")]})


def _wave(
    dr: StompConnector, dr_pid: int, way: str, calls: int, ids_per_call: int
) -> tuple[dict[str, float], set[str]]:
    """``calls`` removal calls of ``ids_per_call`` ids each, over messages put there for them; what stays."""
    before = queue_depth(dr, QUEUE)
    wanted = before + 2 * calls * ids_per_call
    fill_queue(dr, QUEUE, 2 * calls * ids_per_call, BODY, connections=1)
    wait_until(lambda: queue_depth(dr, QUEUE) >= wanted, FILL_TIMEOUT_S, "the wave's messages on DR")
    ids = [frame.headers["message-id"] for frame in browse(dr, QUEUE, timeout_s=60)][before:]
    removed_ids, kept = ids[0::2], set(ids[1::2])  # every other one: the selector must pick them out
    remover = SelectorRemover(dr, WAYS[way])
    removed = 0
    cpu_before, dr_before, began = time.process_time(), cpu_seconds(dr_pid), time.monotonic()
    with remover.keeping_connections():
        for start in range(0, len(removed_ids), ids_per_call):
            result = remover.remove(QUEUE, removed_ids[start : start + ids_per_call])
            if result.error is not None:
                raise RuntimeError(f"removal failed: {result.error}")
            removed += len(result.removed)
    elapsed, cpu, dr_cpu = time.monotonic() - began, time.process_time() - cpu_before, cpu_seconds(dr_pid) - dr_before
    if removed != len(removed_ids):
        raise RuntimeError(f"removed {removed} of {len(removed_ids)}")
    return {
        "purge_cpu_ms_per_call": 1000 * cpu / calls,
        "dr_broker_cpu_ms_per_call": 1000 * dr_cpu / calls,
        "wall_ms_per_call": 1000 * elapsed / calls,
    }, kept


def progress(line: str) -> None:
    print(f"{time.strftime('%H:%M:%S')} {line}", file=sys.stderr, flush=True)


def measure(waves: int, calls: int, ids_per_call: int) -> dict[str, Any]:
    """``waves`` waves each way on one fresh pair, after one of each not measured, in the order kept,
    per call, TCP delays, TCP delays, per call, kept, ..."""
    per: dict[str, list[dict[str, float]]] = {way: [] for way in WAYS}
    with tempfile.TemporaryDirectory(prefix="bench-purge-connections-") as state:
        world = LocalWorld(bench_topology(), Path(state), PORTS)
        world.up(timeout_s=90, log=lambda _m: None)
        try:
            dr = StompConnector(world.topology.dr.stomp)
            dr_pid = world.brokers["dr"].pid
            assert dr_pid is not None
            stays: set[str] = set()
            for way in WAYS:  # the broker's JIT warms up on a wave of each way, not measured
                stays |= _wave(dr, dr_pid, way, calls, ids_per_call)[1]
            for way in bench_results.alternating(list(WAYS), waves):
                figures, kept = _wave(dr, dr_pid, way, calls, ids_per_call)
                per[way].append(figures)
                stays |= kept
                progress(f"{way}: " + ", ".join(f"{k} {v:.3f}" for k, v in figures.items()))
            left = browse(dr, QUEUE, timeout_s=120)
        finally:
            world.destroy()
    result: dict[str, Any] = {
        "waves": waves,
        "calls_per_wave": calls,
        "ids_per_call": ids_per_call,
        **{way: bench_results.spread(runs) for way, runs in per.items()},
        "stayed": len(stays),
        "stayed_on_dr": sum(1 for f in left if f.headers["message-id"] in stays),
        "redelivered_on_dr": sum(1 for f in left if f.headers.get("redelivered", "false") != "false"),
    }
    for name in ("purge_cpu_ms_per_call", "dr_broker_cpu_ms_per_call"):
        kept, each = result["kept"][name]["median"], result["per_call"][name]["median"]
        result[f"{name}_saved"] = round(each - kept, 3)
    result["wall_ms_per_call_saved_without_tcp_delays"] = round(
        result["kept_tcp_delays"]["wall_ms_per_call"]["median"] - result["kept"]["wall_ms_per_call"]["median"], 3
    )
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--waves", type=int, default=6, help="waves each way (6)")
    parser.add_argument("--calls-per-wave", type=int, default=100, help="removal calls in a wave (100)")
    parser.add_argument("--ids-per-call", type=int, default=5, help="messages each call removes (5)")
    bench_results.add_arguments(parser, "purge_connections", repeat=1)
    args = parser.parse_args()
    if min(args.waves, args.calls_per_wave, args.ids_per_call) < 1:
        parser.error("--waves, --calls-per-wave and --ids-per-call must be 1 or more")
    result = bench_results.run_repeated(
        lambda: measure(args.waves, args.calls_per_wave, args.ids_per_call),
        args.repeat,
        lambda line: print(line, file=sys.stderr, flush=True),
    )
    return bench_results.finish("purge_connections", result, args)


if __name__ == "__main__":
    sys.exit(bench_results.exit_code(main))
