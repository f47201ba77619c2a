"""Sync-path benchmark: copy, capture and purge under stepped load, and purge against a raw drain.

Prints one JSON object measured in one run:

    {"primary_ingest_msgs_per_s": ..., "sustained_msgs_per_s": ..., "lag_p50_s": ..., "lag_p99_s": ...,
     "purge_head_msgs_per_s": ..., "raw_drain_msgs_per_s": ..., "deep_backlog_100k": {...}, "steps": [...]}

* primary ingest: persistent 1 KB messages produced as fast as four connections allow, with
  the composite copy on (the ceiling every other figure is compared with);
* steps: a producer at a fixed rate and a consumer on the primary taking everything, each in
  a process of its own as the application would be on its own hosts, and the relay and the
  purge loop running in this one (ledger in memory, so the figures are the brokers' and
  ours, not moto's); lag is from the consume on the primary to the removal on DR, per message.
  ``sustained`` is the highest step that, like every step below it, drained its copy
  backlog and pending purges within two seconds of its end (a lucky step above one that
  fell behind does not count);
* purge head vs raw drain: the same DR queue of N messages, once drained by a plain
  client-individual consumer, once refilled and half of it (the oldest, at the head)
  removed by the purge;
* deep backlog: 100 keys at the tail of a 100,000-message DR queue.

Run: ``.venv/bin/python bench/sync.py [--rates 250,500,1000,2000] [--step-seconds 20] [--bridges 2] [--skip-drain]``
"""

from __future__ import annotations

import sys

# Run as a script, this folder comes first on sys.path, and bench/copy.py would shadow the
# standard library's ``copy`` module for everything imported below.
if sys.path and sys.path[0].rstrip("/").endswith("bench"):
    sys.path.pop(0)

import argparse
import itertools
import json
import multiprocessing as mp
import queue as queue_mod
import statistics as stats_mod
import tempfile
import threading
import time
from collections.abc import Callable
from multiprocessing.connection import Connection
from multiprocessing.sharedctypes import Synchronized
from multiprocessing.synchronize import Event as EventType
from pathlib import Path

import stomp
from ulid import ULID

from brokersync.broker.statistics import StatisticsClient
from brokersync.broker.stomp import StompConnector
from brokersync.capture.relay import AdvisoryRelay, RelaySettings
from brokersync.capture.writer import LedgerWriter
from brokersync.exceptions import BrokerSyncError
from brokersync.ledger import Ledger, memory_ledger
from brokersync.purge.remover import PurgeInvariantError, RemovalResult, SelectorRemover
from brokersync.purge.service import PurgeService, PurgeSettings
from brokersync.topology import Queue, Topology, load_topology
from brokersync_local.browsing import browse
from brokersync_local.world import LocalWorld, WorldPorts

ROOT = Path(__file__).resolve().parent.parent
PORTS = WorldPorts(primary_openwire=63916, primary_stomp=63913, dr_openwire=64916, dr_stomp=64913, aws=5097)
QUEUE = "BENCH.SYNC"
BODY = "x" * 1024


def bench_topology(parallel_bridges: int = 1) -> Topology:
    base = load_topology(ROOT / "topology.yaml")
    bridge = base.tuning.bridge.model_copy(update={"parallel_bridges": parallel_bridges})
    tuning = base.tuning.model_copy(update={"bridge": bridge})
    return base.model_copy(update={"queues": [Queue(name=QUEUE, mode="sync")], "tuning": tuning})


class TimedRemover(SelectorRemover):
    """Records when each message id was removed, for the lag figures."""

    def __init__(self, connector: StompConnector) -> None:
        super().__init__(connector)
        self.removed_at: dict[str, float] = {}

    def remove(self, queue: str, keys: list[str], *, deadline: float | None = None) -> RemovalResult:
        result = super().remove(queue, keys, deadline=deadline)
        now = time.time()
        for key in result.removed:
            self.removed_at.setdefault(key, now)
        return result


class Collector(stomp.ConnectionListener):
    def __init__(self) -> None:
        self.frames: queue_mod.Queue[stomp.utils.Frame] = queue_mod.Queue()

    def on_message(self, frame: stomp.utils.Frame) -> None:
        self.frames.put(frame)


def produce(connector: StompConnector, queue: str, count: int, connections: int = 4) -> list[str]:
    keys = [str(ULID()) for _ in range(count)]
    chunks = [keys[i::connections] for i in range(connections)]

    def worker(chunk: list[str]) -> None:
        connection = connector.connect(name="bench-producer")
        for key in chunk:
            connection.send(f"/queue/{queue}", BODY, headers={"persistent": "true", "correlation-id": key})
        connection.disconnect()

    threads = [threading.Thread(target=worker, args=(chunk,)) for chunk in chunks]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return keys


def wait_depth(client: StatisticsClient, queue: str, depth: int, timeout_s: float = 300) -> float:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = client.queue_stats([queue]).get(queue)
        if (found.size if found else 0) >= depth:
            return time.perf_counter()
        time.sleep(0.05)
    raise TimeoutError(f"{queue} did not reach {depth}")


def drain_rate(connector: StompConnector, queue: str, count: int) -> float:
    collector = Collector()
    connection = connector.connect(collector, name="bench-drain")
    started = time.perf_counter()
    connection.subscribe(f"/queue/{queue}", id="d", ack="client-individual", headers={"activemq.prefetchSize": "500"})
    for _ in range(count):
        connection.ack(collector.frames.get(timeout=60).headers["ack"])
    elapsed = time.perf_counter() - started
    connection.disconnect()
    return count / elapsed


def primary_ingest(world: LocalWorld, count: int) -> float:
    primary = StompConnector(world.topology.primary.stomp)
    started = time.perf_counter()
    produce(primary, QUEUE, count)
    rate = count / (wait_depth(StatisticsClient(primary), QUEUE, count) - started)
    drain_rate(primary, QUEUE, count)
    wait_depth(StatisticsClient(StompConnector(world.topology.dr.stomp)), QUEUE, count)
    drain_rate(StompConnector(world.topology.dr.stomp), QUEUE, count)
    # The drain above raised consumed advisories that belong to no step: drop them.
    drain_rate(primary, "BROKERSYNC.CONSUMED", count)
    return rate


def keep_running(step: Callable[[], object], stop: threading.Event, errors: list[str]) -> None:
    """Run a relay or purge pass again and again, as the deployed loops do.

    A broker error ends the pass, not the loop (the state machines' Retry and Catch); it is
    recorded for the step's figures. A purge invariant error is never retried, there or here.
    """
    while not stop.is_set():
        try:
            step()
        except PurgeInvariantError:
            raise
        except BrokerSyncError as e:
            errors.append(f"{type(e).__name__}: {e}")
            stop.wait(1.0)


def sample_backlog(
    topology: Topology,
    stop: threading.Event,
    every_s: float,
    consumed: Synchronized,
    removed_at: dict[str, float],
    timeline: list[dict[str, float]],
) -> None:
    """Where a backlog builds over a step: the copy not yet on DR (the loss-risk window) or DR
    messages consumed on the primary and not yet removed (the duplicate-risk window)."""
    primary = StatisticsClient(StompConnector(topology.primary.stomp))
    dr = StatisticsClient(StompConnector(topology.dr.stomp))
    copy_queue = topology.dr_name(QUEUE)
    started = time.monotonic()
    while not stop.wait(every_s):
        copy = primary.queue_stats([copy_queue]).get(copy_queue)
        on_dr = dr.queue_stats([QUEUE]).get(QUEUE)
        timeline.append(
            {
                "t_s": round(time.monotonic() - started),
                "copy_backlog": copy.size if copy else 0,
                "dr_depth": on_dr.size if on_dr else 0,
                "pending_purge": consumed.value - len(removed_at),
            }
        )


def app_producer(endpoints: list[str], rate: float, seconds: float, produced: Synchronized) -> None:
    """The application's producer, in its own process as it would be on its own host."""
    connection = StompConnector(endpoints).connect(name="bench-step-producer")
    sent = 0
    started = time.perf_counter()
    while (elapsed := time.perf_counter() - started) < seconds:
        due = int(elapsed * rate)
        while sent < due:
            connection.send(f"/queue/{QUEUE}", BODY, headers={"persistent": "true", "correlation-id": str(ULID())})
            sent += 1
        produced.value = sent  # published once per tick, not locked per message
        time.sleep(0.002)
    connection.disconnect()


def app_consumer(endpoints: list[str], stop: EventType, consumed: Synchronized, result: Connection) -> None:
    """The application's consumer on the primary: takes everything, acks each message, and
    sends back when it consumed each key (the start of the lag)."""
    consumed_at: dict[str, float] = {}
    collector = Collector()
    connection = StompConnector(endpoints).connect(collector, name="bench-step-consumer")
    connection.subscribe(f"/queue/{QUEUE}", id="c", ack="client-individual", headers={"activemq.prefetchSize": "200"})
    while not stop.is_set() or not collector.frames.empty():
        try:
            frame = collector.frames.get(timeout=0.2)
        except queue_mod.Empty:
            continue
        connection.ack(frame.headers["ack"])
        consumed_at[frame.headers["message-id"]] = time.time()  # the purge removes by message id
        consumed.value = len(consumed_at)
    connection.disconnect()
    result.send(consumed_at)
    result.close()


def run_step(
    world: LocalWorld, rate: float, seconds: float, purge_batch: int = PurgeSettings.batch_keys
) -> dict[str, float]:
    """One load step. The application (producer, consumer) runs in two processes of its own,
    as it would on its own hosts, so that its work does not queue behind the relay's and
    the purge's for one interpreter lock; the relay and the purge share this process because
    they share the in-memory ledger."""
    topology = world.topology
    primary, dr = StompConnector(topology.primary.stomp), StompConnector(topology.dr.stomp)
    ledger: Ledger = memory_ledger()
    remover = TimedRemover(dr)
    relay = AdvisoryRelay(primary, LedgerWriter(ledger), topology, settings=RelaySettings(flush_interval_s=0.1))
    purge = PurgeService(ledger, remover, topology, settings=PurgeSettings(idle_sleep_s=0.02, batch_keys=purge_batch))
    stop = threading.Event()
    spawn = mp.get_context("spawn")
    produced, consumed = spawn.Value("q", 0), spawn.Value("q", 0)
    app_stop = spawn.Event()
    results, results_child = spawn.Pipe(duplex=False)
    producer = spawn.Process(target=app_producer, args=(topology.primary.stomp, rate, seconds, produced))
    consumer = spawn.Process(target=app_consumer, args=(topology.primary.stomp, app_stop, consumed, results_child))

    timeline: list[dict[str, float]] = []
    errors: list[str] = []
    threads = [
        threading.Thread(target=keep_running, args=(lambda: relay.run(max_seconds=2, stop=stop), stop, errors)),
        threading.Thread(target=keep_running, args=(lambda: purge.run(max_seconds=0.5), stop, errors)),
        threading.Thread(
            target=sample_backlog,
            args=(topology, stop, max(seconds / 20, 1.0), consumed, remover.removed_at, timeline),
        ),
    ]
    consumer.start()
    for thread in threads:
        thread.start()
    producer.start()
    producer.join()
    step_end = time.monotonic()
    drained_in = None
    while time.monotonic() - step_end < 30:
        if len(remover.removed_at) >= produced.value and consumed.value >= produced.value:
            drained_in = time.monotonic() - step_end
            break
        time.sleep(0.1)
    app_stop.set()
    if not results.poll(60):
        raise RuntimeError("the application's consumer process sent no results (see its traceback above)")
    consumed_at: dict[str, float] = results.recv()
    consumer.join(timeout=30)
    stop.set()
    for thread in threads:
        thread.join(timeout=30)
    lags = sorted(remover.removed_at[k] - consumed_at[k] for k in remover.removed_at if k in consumed_at)
    quantiles = stats_mod.quantiles(lags, n=100) if len(lags) >= 2 else [0.0] * 99
    return {
        "rate": rate,
        "produced": produced.value,
        "consumed": len(consumed_at),
        "purged": len(remover.removed_at),
        "lag_p50_s": round(quantiles[49], 3),
        "lag_p99_s": round(quantiles[98], 3),
        "drained_within_s": round(drained_in, 2) if drained_in is not None else None,
        "loop_errors": errors,
        "timeline": timeline,
    }


def purge_vs_drain(world: LocalWorld, count: int) -> tuple[float, float]:
    topology = world.topology
    dr = StompConnector(topology.dr.stomp)
    produce(dr, QUEUE, count)
    wait_depth(StatisticsClient(dr), QUEUE, count)
    raw = drain_rate(dr, QUEUE, count)
    produce(dr, QUEUE, count, connections=1)
    wait_depth(StatisticsClient(dr), QUEUE, count)
    ids = [f.headers["message-id"] for f in browse(dr, QUEUE, timeout_s=120)]  # the purge selects message ids
    head = ids[: count // 2]
    started = time.perf_counter()
    result = SelectorRemover(dr).remove(QUEUE, head)
    rate = len(result.removed) / (time.perf_counter() - started)
    drain_rate(dr, QUEUE, count - len(result.removed))
    return rate, raw


def deep_backlog(world: LocalWorld, count: int = 100_000, targets: int = 100) -> dict[str, float]:
    dr = StompConnector(world.topology.dr.stomp)
    produce(dr, QUEUE, count, connections=1)
    wait_depth(StatisticsClient(dr), QUEUE, count, timeout_s=600)
    ids = [f.headers["message-id"] for f in browse(dr, QUEUE, timeout_s=600)]
    started = time.perf_counter()
    result = SelectorRemover(dr).remove(QUEUE, ids[-targets:])
    elapsed = time.perf_counter() - started
    return {"queue_depth": count, "targets": targets, "found": len(result.removed), "seconds": round(elapsed, 2)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rates", default="250,500,1000,2000")
    parser.add_argument("--step-seconds", type=float, default=20)
    parser.add_argument("--head-messages", type=int, default=10_000)
    parser.add_argument("--deep", type=int, default=100_000)
    parser.add_argument("--bridges", type=int, default=1, help="parallel network bridges (no order across them)")
    parser.add_argument("--purge-batch", type=int, default=PurgeSettings.batch_keys, help="keys per purge round")
    parser.add_argument("--skip-drain", action="store_true", help="only the ingest and the steps (long steps)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-sync-") as state:
        world = LocalWorld(bench_topology(args.bridges), Path(state), PORTS)
        world.up(timeout_s=90, log=lambda _m: None)
        try:
            ingest = primary_ingest(world, 10_000)
            steps = [
                run_step(world, float(rate), args.step_seconds, args.purge_batch) for rate in args.rates.split(",")
            ]
            head, raw = (0.0, 0.0) if args.skip_drain else purge_vs_drain(world, args.head_messages)
            deep = {} if args.skip_drain else deep_backlog(world, args.deep)
        finally:
            world.destroy()
    kept_up = list(
        itertools.takewhile(lambda s: s["drained_within_s"] is not None and s["drained_within_s"] <= 2.0, steps)
    )
    best = kept_up[-1] if kept_up else steps[0]
    print(
        json.dumps(
            {
                "primary_ingest_msgs_per_s": round(ingest),
                "sustained_msgs_per_s": best["rate"] if kept_up else 0,
                "lag_p50_s": best["lag_p50_s"],
                "lag_p99_s": best["lag_p99_s"],
                "purge_head_msgs_per_s": round(head),
                "raw_drain_msgs_per_s": round(raw),
                "deep_backlog_100k": deep,
                "steps": steps,
                "step_seconds": args.step_seconds,
                "parallel_bridges": args.bridges,
                "ledger": "in memory (the brokers' and BrokerSync's own figures, not DynamoDB's)",
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
