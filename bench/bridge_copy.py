"""Copy-path throughput: primary ingest, and how fast the network bridge carries messages to DR.

Prints one JSON object measured in one run, the default configuration and the tuned one
side by side:

    {"primary_ingest_msgs_per_s": ..., "default_bridge_msgs_per_s": ..., "tuned_bridge_msgs_per_s": ..., ...}

Method (persistent 1 KB messages, real brokers on loopback, a fresh pair per configuration):
* end to end: N messages produced to the primary over STOMP from several connections while
  the DR broker is up; the rate is N over the time until the last copy is stored on DR;
* backlog: the DR broker is stopped, N messages are produced (the primary's ingest rate,
  composite copy included), the DR broker is started, and the rate at which its queue fills
  from the first copy to the last is the bridge's catch-up rate.
"default" is what ActiveMQ does out of the box (journal synced per message on DR, one
bridge); "tuned" is what the renderer emits by default (see docs, "Copy throughput").

Run: ``.venv/bin/python bench/bridge_copy.py [--messages N] [--bridges 1,2,4] [--repeat N] [--no-record]``
(writes bench/results/copy.json)
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import threading
import time
from pathlib import Path

from brokersync.broker.statistics import StatisticsClient
from brokersync.broker.stomp import StompConnector
from brokersync.topology import Queue, Topology, load_topology
from brokersync_ci import bench_results
from brokersync_local.world import LocalWorld, WorldPorts

ROOT = Path(__file__).resolve().parent.parent
PORTS = WorldPorts(primary_openwire=63716, primary_stomp=63713, dr_openwire=64716, dr_stomp=64713, aws=5095)
QUEUE = "BENCH.COPY"
BODY = "x" * 1024


def bench_topology(parallel_bridges: int, journal_disk_sync: str) -> Topology:
    base = load_topology(ROOT / "topology.yaml")
    bridge = base.tuning.bridge.model_copy(update={"parallel_bridges": parallel_bridges})
    dr = base.tuning.dr.model_copy(update={"journal_disk_sync": journal_disk_sync})
    return base.model_copy(
        update={
            "queues": [Queue(name=QUEUE, mode="sync")],
            "tuning": base.tuning.model_copy(update={"bridge": bridge, "dr": dr}),
        }
    )


def produce(connector: StompConnector, count: int, connections: int) -> float:
    """Send ``count`` persistent messages over ``connections`` connections; return the send rate.

    The send rate is what the client managed; :func:`stored_rate` is what the broker kept.
    """
    per = count // connections
    errors: list[BaseException] = []

    def worker() -> None:
        try:
            connection = connector.connect(name="bench-producer")
            for _ in range(per):
                connection.send(f"/queue/{QUEUE}", BODY, headers={"persistent": "true"})
            connection.disconnect()
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=worker) for _ in range(connections)]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=600)
    elapsed = time.perf_counter() - started
    if errors:
        raise errors[0]
    return per * connections / elapsed


def wait_for_depth(stats: StatisticsClient, expected: int, timeout_s: float) -> float:
    """Block until the queue holds ``expected`` messages; return the perf_counter time it did."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = stats.queue_stats([QUEUE]).get(QUEUE)
        if found is not None and found.size >= expected:
            return time.perf_counter()
        time.sleep(0.05)
    raise TimeoutError(f"fewer than {expected} messages arrived within {timeout_s}s")


def bridge_rate(stats: StatisticsClient, expected: int, timeout_s: float) -> float:
    """Rate at which DR's queue fills, from the first arrival to the last."""
    deadline = time.monotonic() + timeout_s
    first: tuple[float, int] | None = None
    while time.monotonic() < deadline:
        size = stats.queue_stats([QUEUE]).get(QUEUE)
        depth = size.size if size else 0
        now = time.perf_counter()
        if depth > 0 and first is None:
            first = (now, depth)
        if depth >= expected and first is not None:
            return (depth - first[1]) / max(now - first[0], 1e-6)
        time.sleep(0.05)
    raise TimeoutError(f"DR received fewer than {expected} messages within {timeout_s}s")


def measure(parallel_bridges: int, journal_disk_sync: str, messages: int, producers: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="bench-copy-") as state:
        world = LocalWorld(bench_topology(parallel_bridges, journal_disk_sync), Path(state), PORTS)
        world.up(timeout_s=90, log=lambda _m: None)
        try:
            primary = StompConnector(world.topology.primary.stomp)
            primary_stats = StatisticsClient(primary)
            dr_stats = StatisticsClient(StompConnector(world.topology.dr.stomp))

            started = time.perf_counter()
            produce(primary, messages, producers)
            end_to_end = messages / (wait_for_depth(dr_stats, messages, 600) - started)
            drain_queue(world)

            world.brokers["dr"].stop()
            started = time.perf_counter()
            produce(primary, messages, producers)
            ingest = messages / (wait_for_depth(primary_stats, messages, 600) - started)
            world.brokers["dr"].start()
            world.brokers["dr"].wait_ready()
            backlog = bridge_rate(dr_stats, messages, timeout_s=600)
        finally:
            world.destroy()
    return {"ingest": ingest, "end_to_end": end_to_end, "backlog": backlog}


def drain_queue(world: LocalWorld) -> None:
    """Empty both copies between the two measurements (the primary's consumers would do this)."""
    for role in ("primary", "dr"):
        connector = StompConnector(world.topology.broker(role).stomp)
        connection = connector.connect(name="bench-drain")
        connection.subscribe(f"/queue/{QUEUE}", id="drain", ack="auto")
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            found = StatisticsClient(connector).queue_stats([QUEUE]).get(QUEUE)
            if found is None or found.size == 0:
                break
            time.sleep(0.1)
        connection.disconnect()


def measure_all(messages: int, producers: int, bridges: list[int]) -> dict[str, object]:
    """One run: the default configuration, the tuned one, and the tuned one with parallel bridges."""
    default = measure(1, "always", messages, producers)
    tuned = measure(1, "periodic", messages, producers)
    extra = {n: measure(n, "periodic", messages, producers) for n in bridges}
    return {
        "primary_ingest_msgs_per_s": round(default["ingest"]),
        "default_bridge_msgs_per_s": round(default["end_to_end"]),
        "tuned_bridge_msgs_per_s": round(tuned["end_to_end"]),
        "speedup": round(tuned["end_to_end"] / default["end_to_end"], 2),
        "default_backlog_drain_msgs_per_s": round(default["backlog"]),
        "tuned_backlog_drain_msgs_per_s": round(tuned["backlog"]),
        "backlog_speedup": round(tuned["backlog"] / default["backlog"], 2),
        "tuned_primary_ingest_msgs_per_s": round(tuned["ingest"]),
        "tuned_with_parallel_bridges": {
            str(n): {
                "end_to_end": round(r["end_to_end"]),
                "backlog": round(r["backlog"]),
                "speedup": round(r["end_to_end"] / default["end_to_end"], 2),
                "backlog_speedup": round(r["backlog"] / default["backlog"], 2),
            }
            for n, r in sorted(extra.items())
        },
        "default": "journalDiskSyncStrategy=always on DR, 1 bridge",
        "tuned": "journalDiskSyncStrategy=periodic (1000 ms) on DR, 1 bridge",
        "messages": messages,
        "message_bytes": len(BODY),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=10_000)
    parser.add_argument("--producers", type=int, default=4)
    parser.add_argument("--bridges", default="", help="also measure the tuned setup with N parallel bridges (e.g. 2,4)")
    bench_results.add_arguments(parser, "copy", repeat=1)
    args = parser.parse_args()
    bridges = sorted({int(b) for b in args.bridges.split(",") if b})
    result = bench_results.run_repeated(
        lambda: measure_all(args.messages, args.producers, bridges),
        args.repeat,
        lambda line: print(line, file=sys.stderr, flush=True),
    )
    return bench_results.finish("copy", result, args)


if __name__ == "__main__":
    sys.exit(bench_results.exit_code(main))
