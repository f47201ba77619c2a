"""The purge's round and the relay's ledger write over many queues, when a ledger request takes DynamoDB's time.

The sync bench spreads 1,000 msg/s over N queues (decision 0048), but there every ledger
request is served by moto on the same two cores as both brokers and both functions: moto
spends about 5 ms of CPU on each, one request at a time, so the lag there is moto's queue,
whatever the purge does. In AWS a request is a round trip that costs the caller's cores
nothing while it waits. This bench gives the ledger that shape and nothing else: the
in-memory ledger behind a fixed wait per backend call (``--latency-ms``, 5 by default: a
DynamoDB request from Lambda in its region), and the real DR broker for the removals.

It measures, for each queue count and for the queues worked one after another (1 worker)
against side by side (the product's default), in waves that alternate the two:

1. **the relay's part**: the wall time of writing one batch to the ledger (its capture items,
   pointers and audit counts) for ``--keys-per-wave`` consumed messages spread over the queues;
2. **the purge's part**: the wall time from those keys being in the ledger to the purge loop
   (:class:`~brokersync.purge.service.PurgeService`, as the function builds it, with the DR
   broker's statistics) returning with every one removed; and the CPU the bench process
   (the purge's threads) and the DR broker spent on it, per 1,000 removed.

Each wave puts ``--keys-per-wave`` messages on DR (0.2 s of 1,000 msg/s by default, a round's
worth) and as many that are never consumed; every wave's consumed ones are removed, and at the
end no unconsumed message may be gone or carry a raised redelivery flag.

A backend call is one wait, where DynamoDB may split a large batch read into a few requests:
the figure is the shape of the wait, not AWS's exact latency.

Run: ``.venv/bin/python bench/queue_rounds.py [--queues 1,4,10] [--waves 8] [--latency-ms 5]``
(writes bench/results/queue_rounds.json; ``--no-record`` to only print)
"""

from __future__ import annotations

import argparse
import itertools
import statistics as stats_mod
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

from ulid import ULID

from brokersync.broker.statistics import StatisticsClient
from brokersync.broker.stomp import StompConnector
from brokersync.capture.audit import CaptureAudit
from brokersync.capture.records import ConsumedRecord
from brokersync.capture.writer import LedgerWriter
from brokersync.ledger.ledger import Ledger
from brokersync.ledger.memory import MemoryBackend
from brokersync.purge.remover import SelectorRemover
from brokersync.purge.service import PurgeService, PurgeSettings
from brokersync.side_by_side import QUEUE_WORKERS
from brokersync.topology import Queue, Topology, load_topology
from brokersync_ci import bench_results
from brokersync_ci.process_cpu import cpu_seconds
from brokersync_local.backlog import fill_queue, queue_depth, wait_until
from brokersync_local.browsing import browse
from brokersync_local.world import LocalWorld, WorldPorts

ROOT = Path(__file__).resolve().parents[1]
PORTS = WorldPorts(primary_openwire=63416, primary_stomp=63413, dr_openwire=64416, dr_stomp=64413, aws=5093)
PREFIX = "BENCH.ROUNDS"
BODY = "x" * 1024
#: How long a wave's messages may take to be stored on DR, and the purge to remove them.
WAVE_TIMEOUT_S = 120.0


class LatentBackend:
    """The in-memory ledger backend, each call first waiting ``latency_s`` (a round trip: no CPU spent)."""

    def __init__(self, latency_s: float) -> None:
        self.inner = MemoryBackend()
        self.latency_s = latency_s
        self.calls = Counter[str]()
        self._calls_lock = threading.Lock()  # the queues call side by side: no count may be lost

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self.inner, name)
        if not callable(attribute):
            return attribute

        def call(*args: Any, **kwargs: Any) -> Any:
            with self._calls_lock:
                self.calls[name] += 1
            time.sleep(self.latency_s)
            return attribute(*args, **kwargs)

        return call


def queue_names(count: int) -> list[str]:
    return [f"{PREFIX}.{i}" for i in range(1, count + 1)]


def bench_topology(queues: int) -> Topology:
    base = load_topology(ROOT / "topology.yaml")
    return base.model_copy(update={"queues": [Queue(name=name, mode="sync") for name in queue_names(queues)]})


def _ids_on(dr: StompConnector, queue: str, expected: int) -> list[str]:
    frames = browse(dr, queue, timeout_s=60)
    if len(frames) != expected:
        raise RuntimeError(f"{queue}: browsed {len(frames)} messages, {expected} expected")
    return [frame.headers["message-id"] for frame in frames]


class Way:
    """One way of working the queues (a width), built once per queue count as the functions build theirs once
    per warm environment: its ledger writer, audit and purge service, sharing the count's ledger."""

    def __init__(self, view: Topology, ledger: Ledger, backend: LatentBackend, workers: int) -> None:
        dr = StompConnector(view.dr.stomp)
        self.view, self.dr = view, dr
        self.writer = LedgerWriter(ledger, queue_workers=workers)
        self.audit = CaptureAudit(backend, StatisticsClient(dr), view, queue_workers=workers)  # type: ignore[arg-type]
        self.purge = PurgeService(
            ledger,
            SelectorRemover(dr),
            view,
            settings=PurgeSettings(queue_workers=workers),
            dr_statistics=StatisticsClient(dr),
        )

    def wave(self, dr_pid: int, keys: int) -> tuple[dict[str, float], list[str]]:
        """``keys`` consumed messages over the queues (written, then purged), and as many left unconsumed."""
        names = [q.name for q in self.view.queues]
        shares = {name: keys // len(names) + (i < keys % len(names)) for i, name in enumerate(names)}
        unconsumed: list[str] = []
        records: list[ConsumedRecord] = []
        now_ms = int(time.time() * 1000)
        for name, share in shares.items():
            before = queue_depth(self.dr, name)
            fill_queue(self.dr, name, 2 * share, BODY, connections=1)
            wanted = before + 2 * share
            wait_until(lambda n=name, d=wanted: queue_depth(self.dr, n) >= d, WAVE_TIMEOUT_S, f"{name} filled")
            ids = _ids_on(self.dr, name, wanted)[before:]
            consumed, kept = ids[0::2], ids[1::2]  # every other one: the purge must pick them out
            unconsumed += kept
            records += [
                ConsumedRecord(name, str(ULID()), "correlation-id", now_ms - 200 + (i * 200) // share, mid)
                for i, mid in enumerate(consumed)
            ]
        began = time.monotonic()
        self.writer.write(records)
        self.audit.record_captured(Counter((r.queue, "bench") for r in records))
        written_s = time.monotonic() - began

        cpu_before, dr_before, began = time.process_time(), cpu_seconds(dr_pid), time.monotonic()
        report = self.purge.run(max_seconds=WAVE_TIMEOUT_S, stop_when_idle=True)
        purge_s = time.monotonic() - began
        purge_cpu, dr_cpu = time.process_time() - cpu_before, cpu_seconds(dr_pid) - dr_before
        if report.purged != len(records):
            raise RuntimeError(f"the purge removed {report.purged} of {len(records)} consumed messages")
        return {
            "write_s": written_s,
            "purge_s": purge_s,
            "purge_rounds": report.rounds,
            "purge_cpu_s_per_1000": 1000 * purge_cpu / len(records),
            "dr_broker_cpu_s_per_1000": 1000 * dr_cpu / len(records),
        }, unconsumed


def progress(line: str) -> None:
    print(f"{time.strftime('%H:%M:%S')} {line}", file=sys.stderr, flush=True)


def _summary(values: list[float]) -> dict[str, float]:
    median = stats_mod.median(values)
    return {
        "median": round(median, 4),
        "min": round(min(values), 4),
        "max": round(max(values), 4),
        "spread": round((max(values) - min(values)) / median, 3) if median else 0.0,
    }


def measure(queue_counts: list[int], waves: int, keys: int, latency_s: float) -> dict[str, Any]:
    """Every queue count on one fresh pair, its waves alternating one worker and the default."""
    widths = {"one_by_one": 1, "side_by_side": QUEUE_WORKERS}
    result: dict[str, Any] = {
        "latency_ms": latency_s * 1000,
        "keys_per_wave": keys,
        "waves": waves,
        "queue_workers": QUEUE_WORKERS,
        "by_queues": {},
    }
    with tempfile.TemporaryDirectory(prefix="bench-queue-rounds-") as state:
        # Each queue count on queues of its own: what one count leaves on DR is not in front of the next.
        world = LocalWorld(bench_topology(sum(queue_counts)), Path(state), PORTS)
        world.up(timeout_s=90, log=lambda _m: None)
        try:
            dr = StompConnector(world.topology.dr.stomp)
            dr_pid = world.brokers["dr"].pid
            assert dr_pid is not None
            for first, count in zip(itertools.accumulate([0, *queue_counts]), queue_counts, strict=False):
                view = world.topology.model_copy(update={"queues": world.topology.queues[first : first + count]})
                backend = LatentBackend(latency_s)
                ledger = Ledger(backend)  # type: ignore[arg-type]
                ways = {label: Way(view, ledger, backend, workers) for label, workers in widths.items()}
                per: dict[str, list[dict[str, float]]] = {label: [] for label in widths}
                unconsumed: set[str] = set()
                for label in bench_results.alternating(list(widths), waves):
                    figures, kept = ways[label].wave(dr_pid, keys)
                    per[label].append(figures)
                    unconsumed.update(kept)
                    progress(f"{count} queues, {label}: " + ", ".join(f"{k} {v:.3f}" for k, v in figures.items()))
                left = [frame for q in view.queues for frame in browse(dr, q.name, timeout_s=120)]
                result["by_queues"][str(count)] = {
                    "ledger_calls_per_wave": round(sum(backend.calls.values()) / (2 * waves), 1),
                    **{
                        label: {name: _summary([w[name] for w in runs]) for name in runs[0]}
                        for label, runs in per.items()
                    },
                    "unconsumed": len(unconsumed),
                    "unconsumed_kept": sum(1 for f in left if f.headers["message-id"] in unconsumed),
                    "left_on_dr": len(left),
                    "redelivered_on_dr": sum(1 for f in left if f.headers.get("redelivered") == "true"),
                }
        finally:
            world.destroy()
    for figures in result["by_queues"].values():
        one, side = figures["one_by_one"], figures["side_by_side"]
        figures["purge_s_side_over_one"] = round(side["purge_s"]["median"] / one["purge_s"]["median"], 3)
        figures["write_s_side_over_one"] = round(side["write_s"]["median"] / one["write_s"]["median"], 3)
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--queues", default="1,4,10", help="queue counts, each on queues of its own on the same pair (1,4,10)"
    )
    parser.add_argument("--waves", type=int, default=8, help="waves per queue count and way (8)")
    parser.add_argument(
        "--keys-per-wave", type=int, default=200, help="consumed messages per wave, over all queues (200)"
    )
    parser.add_argument("--latency-ms", type=float, default=5.0, help="wait per ledger backend call (5)")
    bench_results.add_arguments(parser, "queue_rounds", repeat=1)
    args = parser.parse_args()
    counts = [int(c) for c in args.queues.split(",") if c.strip()]
    if not counts or min(counts) < 1 or args.waves < 1 or args.keys_per_wave < max(counts):
        parser.error("--queues must be 1 or more each, --waves 1 or more, --keys-per-wave at least the most queues")
    result = bench_results.run_repeated(
        lambda: measure(counts, args.waves, args.keys_per_wave, args.latency_ms / 1000),
        args.repeat,
        lambda line: print(line, file=sys.stderr, flush=True),
    )
    return bench_results.finish("queue_rounds", result, args)


if __name__ == "__main__":
    sys.exit(bench_results.exit_code(main))
