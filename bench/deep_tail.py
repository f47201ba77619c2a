"""Keys consumed out of order deep in a backlog: how long the purge takes to remove them, touching nothing else.

A real DR queue holds the primary's backlog of unconsumed messages (a slow consumer, a
night's batch), and the messages that *are* consumed need not be the oldest: a consumer
with a selector, a priority, or a message group takes them from the tail. The purge must
still remove those copies, not leave them to the reconciliation, and must not raise the
redelivery counter of anything in front of them.

One run, on a fresh local pair:

1. ``--backlog`` persistent messages are put on the DR queue (sent straight to the DR
   broker, as the bridge would have copied them: messages that are not consumed on the
   primary);
2. ``--tail`` more are produced on the primary and copied over the bridge, so they sit at
   the tail of the DR queue, behind the whole backlog; the application consumes exactly
   those on the primary, which gives their message ids;
3. the purge's remover (:class:`~brokersync.purge.remover.SelectorRemover`, as the purge
   loop uses it) is called with those ids, round after round, until every one is removed
   or ``--timeout`` passes; each round's time is recorded, the first one being what the
   loop's first pass would see;
4. the DR queue's depth is read from the broker's statistics (the backlog must be whole)
   and the queue is browsed: no message the browse returns may carry a raised redelivery
   flag, and how many it returns is how far into the queue the broker pages (what a
   selector can see at all).

Each body size given is measured on a fresh pair: the broker pages a queue into memory up to
the DR policy's ``memoryLimit`` (``tuning.dr.memory_limit_mb``), so whether the tail is
within a selector's reach depends on the backlog's bytes, not its count.

Run: ``.venv/bin/python bench/deep_tail.py [--backlog 100000] [--tail 100] [--body-bytes 1024,256]
[--dr-memory-mb MB] [--repeat 2]``
(writes bench/results/deep_tail.json; ``--no-record`` to only print)
"""

from __future__ import annotations

import argparse
import queue as queue_mod
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import stomp

from brokersync.broker.stomp import StompConnector
from brokersync.purge.remover import SelectorRemover
from brokersync.topology import Queue, Topology, load_topology
from brokersync_ci import bench_results
from brokersync_local.backlog import fill_queue, queue_depth, wait_until
from brokersync_local.browsing import browse
from brokersync_local.world import LocalWorld, WorldPorts, with_dr_memory_limit

ROOT = Path(__file__).resolve().parents[1]
PORTS = WorldPorts(primary_openwire=63616, primary_stomp=63613, dr_openwire=64616, dr_stomp=64613, aws=5098)
QUEUE = "BENCH.TAIL"
#: How long the backlog may take to be stored, and the tail to be copied and consumed.
FILL_TIMEOUT_S = 600.0


def bench_topology(dr_memory_mb: int | None = None) -> Topology:
    """The topology with the bench's one queue; ``dr_memory_mb`` sizes the DR queue's memory limit."""
    base = load_topology(ROOT / "topology.yaml")
    return with_dr_memory_limit(base.model_copy(update={"queues": [Queue(name=QUEUE, mode="sync")]}), dr_memory_mb)


class _Taker(stomp.ConnectionListener):
    def __init__(self) -> None:
        self.frames: queue_mod.Queue[stomp.utils.Frame] = queue_mod.Queue()

    def on_message(self, frame: stomp.utils.Frame) -> None:
        self.frames.put(frame)


def consume_tail(primary: StompConnector, count: int) -> list[str]:
    """The application on the primary takes the ``count`` tail messages; their message ids, in order."""
    taker = _Taker()
    connection = primary.connect(taker, name="bench-tail-consumer")
    connection.subscribe(f"/queue/{QUEUE}", id="t", ack="client-individual")
    ids: list[str] = []
    deadline = time.monotonic() + FILL_TIMEOUT_S
    while len(ids) < count and time.monotonic() < deadline:
        try:
            frame = taker.frames.get(timeout=1)
        except queue_mod.Empty:
            continue
        connection.ack(frame.headers["ack"])
        ids.append(frame.headers["message-id"])
    connection.disconnect()
    if len(ids) < count:
        raise TimeoutError(f"the primary's consumer took {len(ids)} of {count} tail messages")
    return ids


def measure(
    backlog: int, tail: int, body_bytes: int, timeout_s: float, dr_memory_mb: int | None = None
) -> dict[str, Any]:
    """One run on a fresh pair (see the module's docstring)."""
    body = "x" * body_bytes
    with tempfile.TemporaryDirectory(prefix="bench-deep-tail-") as state:
        world = LocalWorld(bench_topology(dr_memory_mb), Path(state), PORTS)  # the DR heap follows the limit
        world.up(timeout_s=90, log=lambda _m: None)
        try:
            topology = world.topology
            primary, dr = StompConnector(topology.primary.stomp), StompConnector(topology.dr.stomp)
            started = time.monotonic()
            fill_queue(dr, QUEUE, backlog, body)
            wait_until(lambda: queue_depth(dr, QUEUE) >= backlog, FILL_TIMEOUT_S, f"{backlog} messages stored on DR")
            filled_s = time.monotonic() - started
            fill_queue(primary, QUEUE, tail, body, connections=1)
            wait_until(lambda: queue_depth(dr, QUEUE) >= backlog + tail, FILL_TIMEOUT_S, "the tail copied to DR")
            ids = consume_tail(primary, tail)

            remover = SelectorRemover(dr)
            outstanding = list(ids)
            rounds: list[dict[str, Any]] = []
            began = time.monotonic()
            while outstanding and time.monotonic() - began < timeout_s:
                result = remover.remove(QUEUE, outstanding)
                rounds.append({"removed": len(result.removed), "elapsed_s": round(result.elapsed_s, 3)})
                if result.error is not None:
                    raise result.error
                removed = set(result.removed)
                outstanding = [key for key in outstanding if key not in removed]
            all_removed_s = time.monotonic() - began if not outstanding else None
            depth_after = queue_depth(dr, QUEUE)
            browsed = browse(dr, QUEUE, timeout_s=600)
            return {
                "backlog": backlog,
                "tail": tail,
                "message_bytes": body_bytes,
                "backlog_stored_s": round(filled_s, 1),
                "removed": tail - len(outstanding),
                "not_removed": len(outstanding),
                "first_round_s": rounds[0]["elapsed_s"] if rounds else None,
                "first_round_removed": rounds[0]["removed"] if rounds else 0,
                "all_removed_within_s": None if all_removed_s is None else round(all_removed_s, 3),
                "rounds": len(rounds),
                "rounds_that_removed": [r for r in rounds if r["removed"]],
                "depth_after": depth_after,
                "backlog_kept": depth_after == backlog + len(outstanding),
                "browsable_after": len(browsed),
                "redelivered_after": sum(1 for frame in browsed if frame.headers.get("redelivered") == "true"),
            }
        finally:
            world.destroy()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backlog", type=int, default=100_000, help="messages in front of the tail (100000)")
    parser.add_argument("--tail", type=int, default=100, help="messages consumed at the tail (100)")
    parser.add_argument("--body-bytes", default="1024,256", help="message sizes, one fresh pair each (1024,256)")
    parser.add_argument("--timeout", type=float, default=120.0, help="how long the purge may try (120 s)")
    parser.add_argument(
        "--dr-memory-mb", type=int, default=None, help="the DR queue's memory limit (default: topology.yaml's)"
    )
    bench_results.add_arguments(parser, "deep_tail", repeat=2)
    args = parser.parse_args()
    sizes = [int(size) for size in args.body_bytes.split(",") if size.strip()]

    def measure_sizes() -> dict[str, Any]:
        return {
            "dr_memory_limit_mb": bench_topology(args.dr_memory_mb).tuning.dr.memory_limit_mb,
            "by_body_bytes": {
                str(size): measure(args.backlog, args.tail, size, args.timeout, args.dr_memory_mb) for size in sizes
            },
        }

    result = bench_results.run_repeated(
        measure_sizes, args.repeat, lambda line: print(line, file=sys.stderr, flush=True)
    )
    return bench_results.finish("deep_tail", result, args)


if __name__ == "__main__":
    sys.exit(bench_results.exit_code(main))
