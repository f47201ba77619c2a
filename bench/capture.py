"""Capture throughput and cost: one relay against the raw STOMP drains of the same queue.

Prints one JSON object measured in one run (three runs by default, each on a fresh pair,
with their spread) and writes it into bench/results/capture.json:

    {"captured_per_s": ..., "raw_drain_per_s": ..., "relay_cpu_s_per_1000": ...,
     "raw_drain_cpu_s_per_1000": ..., "wcu_per_1000_msgs": ..., "usd_per_million_msgs": ..., ...}

Method: on a fresh local pair, N messages with ULID correlation ids are produced to the
primary and consumed there with no relay running, so N consumed advisories wait in
BROKERSYNC.CONSUMED. The raw drain reads them with the same subscription the relay uses
(jms-advisory-json, client-individual acks sent from the reading thread) and nothing else.
A third batch is read by a minimal STOMP 1.2 reader on a plain socket (the lean drain,
bench-only): the same subscription, the same individual ACKs, without a client library's
per-frame machinery; what reading and acking an advisory costs in Python at the least.
Then N more advisories are made and one relay drains them into the ledger table in moto's
DynamoDB (real HTTP requests), parsing, batching, writing and acking. Write units are
counted per request from the item sizes by DynamoDB's rules and priced at on-demand rates.
Beside each rate, the CPU it cost from the kernel's accounting: this process (the drain, or
the relay with its ledger writes, less the bench's own depth polling) and the primary broker,
per 1,000 advisories.

Run: ``.venv/bin/python bench/capture.py [--messages N] [--repeat N] [--no-record]``
"""

from __future__ import annotations

import argparse
import os
import queue as queue_mod
import socket
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import boto3
import stomp
from ulid import ULID

from brokersync.broker.statistics import StatisticsClient
from brokersync.broker.stomp import StompConnector
from brokersync.capture.relay import ADVISORY_TRANSFORMATION, AdvisoryRelay, RelaySettings
from brokersync.capture.writer import LedgerWriter
from brokersync.ledger import dynamodb_ledger
from brokersync.ledger.schema import create_ledger_table
from brokersync.topology import CONSUMED_QUEUE, Topology, load_topology
from brokersync_ci import bench_results
from brokersync_ci.process_cpu import CpuMeter
from brokersync_local.world import LocalWorld, WorldPorts

ROOT = Path(__file__).resolve().parent.parent
PORTS = WorldPorts(primary_openwire=63816, primary_stomp=63813, dr_openwire=64816, dr_stomp=64813, aws=5096)
#: On-demand prices used (us-east-1): write request units and replicated write request units.
PRICE_PER_MILLION_WRU = 0.625
PRICE_PER_MILLION_RWRU = 0.625
REPLICAS = 2


def make_advisories(primary: StompConnector, count: int) -> None:
    """Produce and consume ``count`` ORDERS messages on the primary; wait until every advisory waits."""
    connection = primary.connect(name="bench-producer")
    for _ in range(count):
        connection.send("/queue/ORDERS", "x" * 256, headers={"correlation-id": str(ULID()), "persistent": "true"})
    connection.disconnect()
    frames: queue_mod.Queue[stomp.utils.Frame] = queue_mod.Queue()

    class Listener(stomp.ConnectionListener):
        def on_message(self, frame: stomp.utils.Frame) -> None:
            frames.put(frame)

    consumer = primary.connect(Listener(), name="bench-consumer")
    consumer.subscribe("/queue/ORDERS", id="c", ack="client-individual", headers={"activemq.prefetchSize": "500"})
    for _ in range(count):
        consumer.ack(frames.get(timeout=60).headers["ack"])
    consumer.disconnect()
    wait_depth(StatisticsClient(primary), CONSUMED_QUEUE, count)


def wait_depth(stats: StatisticsClient, queue: str, depth: int, timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = stats.queue_stats([queue]).get(queue)
        if (found.size if found else 0) == depth:
            return
        time.sleep(0.05)
    raise TimeoutError(f"{queue} did not reach depth {depth}")


@dataclass
class Drain:
    """One drain of ``count`` advisories: its rate and the CPU it cost, ours and the primary broker's."""

    per_s: float
    cpu_s: float
    broker_cpu_s: float


def raw_drain(primary: StompConnector, broker_pid: int, count: int) -> Drain:
    frames: queue_mod.Queue[stomp.utils.Frame] = queue_mod.Queue()

    class Listener(stomp.ConnectionListener):
        def on_message(self, frame: stomp.utils.Frame) -> None:
            frames.put(frame)

    connection = primary.connect(Listener(), name="bench-raw")
    meter = CpuMeter({"ours": os.getpid(), "broker": broker_pid})
    meter.start()
    started = time.perf_counter()
    connection.subscribe(
        f"/queue/{CONSUMED_QUEUE}",
        id="raw",
        ack="client-individual",
        headers={"transformation": ADVISORY_TRANSFORMATION, "activemq.prefetchSize": "1000"},
    )
    for _ in range(count):
        connection.ack(frames.get(timeout=60).headers["ack"])
    elapsed = time.perf_counter() - started
    spent = meter.stop()
    connection.disconnect()
    return Drain(count / elapsed, spent["ours"], spent["broker"])


def _lean_frames(buf: bytes) -> tuple[list[bytes], int]:
    """The ``ack`` values of the whole frames at the head of ``buf``, and where the rest starts."""
    acks: list[bytes] = []
    pos = 0
    size = len(buf)
    while True:
        while pos < size and buf[pos] in b"\r\n":  # optional EOLs between frames
            pos += 1
        head_end = buf.find(b"\n\n", pos)
        if head_end < 0:
            return acks, pos
        head = buf[pos:head_end]
        if not head.startswith(b"MESSAGE\n"):
            raise RuntimeError(f"lean drain got {head[:200]!r}")
        length_at = head.find(b"\ncontent-length:")
        if length_at >= 0:
            line_end = head.find(b"\n", length_at + 1)
            length = int(head[length_at + 16 : line_end if line_end >= 0 else None])
            end = head_end + 2 + length
            if end >= size:
                return acks, pos
        else:
            end = buf.find(b"\x00", head_end + 2)
            if end < 0:
                return acks, pos
        ack_at = head.find(b"\nack:")
        if ack_at < 0:
            raise RuntimeError(f"lean drain got a MESSAGE without an ack header: {head[:200]!r}")
        line_end = head.find(b"\n", ack_at + 1)
        acks.append(head[ack_at + 5 : line_end if line_end >= 0 else None])
        pos = end + 1


def lean_drain(primary: StompConnector, broker_pid: int, count: int) -> Drain:
    """The raw drain's subscription read by a minimal STOMP 1.2 reader: each recv's ACKs in one write."""
    endpoint = primary.endpoints[0]
    with socket.create_connection((endpoint.host, endpoint.port), timeout=60) as sock:
        sock.sendall(b"CONNECT\naccept-version:1.2\nhost:localhost\nheart-beat:0,0\n\n\x00")
        buf = b""
        while b"\x00" not in buf:
            chunk = sock.recv(65536)
            if not chunk or not (buf := buf + chunk).startswith(b"CONNECTED"):
                raise RuntimeError(f"lean drain could not connect: {buf[:200]!r}")
        buf = buf[buf.index(b"\x00") + 1 :]
        meter = CpuMeter({"ours": os.getpid(), "broker": broker_pid})
        meter.start()
        started = time.perf_counter()
        sock.sendall(
            f"SUBSCRIBE\nid:lean\ndestination:/queue/{CONSUMED_QUEUE}\nack:client-individual\n"
            f"transformation:{ADVISORY_TRANSFORMATION}\nactivemq.prefetchSize:1000\n\n\x00".encode()
        )
        acked = 0
        while acked < count:
            chunk = sock.recv(262144)
            if not chunk:
                raise ConnectionError("the broker closed the lean drain's connection")
            buf += chunk
            acks, used = _lean_frames(buf)
            buf = buf[used:]
            if acks:
                sock.sendall(b"".join(b"ACK\nid:" + ack + b"\n\n\x00" for ack in acks))
                acked += len(acks)
        elapsed = time.perf_counter() - started
        spent = meter.stop()
        sock.sendall(b"DISCONNECT\n\n\x00")
    return Drain(count / elapsed, spent["ours"], spent["broker"])


def relay_drain(world: LocalWorld, primary: StompConnector, count: int) -> tuple[Drain, float]:
    os.environ.update(
        {"AWS_ACCESS_KEY_ID": "local", "AWS_SECRET_ACCESS_KEY": "local", "AWS_DEFAULT_REGION": "us-west-2"}
    )
    table = f"bench-{uuid.uuid4().hex[:8]}"
    create_ledger_table(
        boto3.client("dynamodb", endpoint_url=world.moto.endpoint, region_name="us-west-2"),
        table,
        ROOT / "template.yaml",
    )
    ledger = dynamodb_ledger(table, region="us-west-2", host=world.moto.endpoint)
    relay = AdvisoryRelay(primary, LedgerWriter(ledger), world.topology, settings=RelaySettings())
    stop = threading.Event()
    stats = StatisticsClient(primary)
    done_at: list[float] = []
    watcher_cpu_s: list[float] = []

    def watch() -> None:
        while not stop.is_set():
            found = stats.queue_stats([CONSUMED_QUEUE]).get(CONSUMED_QUEUE)
            if found is not None and found.size == 0 and found.inflight_count == 0:
                done_at.append(time.perf_counter())
                stop.set()
            time.sleep(0.05)
        watcher_cpu_s.append(time.thread_time())  # the bench's own polling, not the relay's work

    watcher = threading.Thread(target=watch, daemon=True)
    meter = CpuMeter({"ours": os.getpid(), "broker": world.brokers["primary"].pid})  # type: ignore[dict-item]
    meter.start()
    started = time.perf_counter()
    watcher.start()
    report = relay.run(max_seconds=300, stop=stop)
    watcher.join(timeout=10)
    spent = meter.stop()
    if report.captured != count:
        raise AssertionError(f"relay captured {report.captured} of {count}")
    rate = count / ((done_at[0] if done_at else time.perf_counter()) - started)
    return Drain(rate, spent["ours"] - sum(watcher_cpu_s), spent["broker"]), report.write_units


def measure(topology: Topology, messages: int) -> dict[str, object]:
    """One run on a fresh pair: the raw drain and the relay's capture of the same advisories."""
    with tempfile.TemporaryDirectory(prefix="bench-capture-") as state:
        world = LocalWorld(topology, Path(state), PORTS)
        world.up(timeout_s=90, log=lambda _m: None)
        try:
            primary = StompConnector(world.topology.primary.stomp)
            make_advisories(primary, messages)
            raw = raw_drain(primary, world.brokers["primary"].pid, messages)  # type: ignore[arg-type]
            make_advisories(primary, messages)
            lean = lean_drain(primary, world.brokers["primary"].pid, messages)  # type: ignore[arg-type]
            make_advisories(primary, messages)
            relay, units = relay_drain(world, primary, messages)
        finally:
            world.destroy()
    wcu_per_1000 = units / messages * 1000
    usd_per_million = wcu_per_1000 * 1000 * (PRICE_PER_MILLION_WRU + (REPLICAS - 1) * PRICE_PER_MILLION_RWRU) / 1e6
    per_1000 = 1000 / messages
    return {
        "captured_per_s": round(relay.per_s),
        "raw_drain_per_s": round(raw.per_s),
        "ratio": round(relay.per_s / raw.per_s, 2),
        "relay_cpu_s_per_1000": round(relay.cpu_s * per_1000, 4),
        "raw_drain_cpu_s_per_1000": round(raw.cpu_s * per_1000, 4),
        "relay_over_raw_cpu": round(relay.cpu_s / raw.cpu_s, 2),
        "lean_drain_per_s": round(lean.per_s),
        "lean_drain_cpu_s_per_1000": round(lean.cpu_s * per_1000, 4),
        "raw_over_lean_cpu": round(raw.cpu_s / lean.cpu_s, 2),
        "primary_broker_cpu_s_per_1000": {
            "relay": round(relay.broker_cpu_s * per_1000, 4),
            "raw_drain": round(raw.broker_cpu_s * per_1000, 4),
            "lean_drain": round(lean.broker_cpu_s * per_1000, 4),
        },
        "wcu_per_1000_msgs": round(wcu_per_1000, 1),
        "usd_per_million_msgs": round(usd_per_million, 4),
        "prices_used": {
            "usd_per_million_write_request_units": PRICE_PER_MILLION_WRU,
            "usd_per_million_replicated_write_request_units": PRICE_PER_MILLION_RWRU,
            "replicas": REPLICAS,
            "region": "us-east-1 on-demand",
        },
        "ledger": "moto DynamoDB over HTTP on loopback",
        "messages": messages,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=5_000)
    bench_results.add_arguments(parser, "capture", repeat=3)
    args = parser.parse_args()
    topology = load_topology(ROOT / "topology.yaml")
    result = bench_results.run_repeated(lambda: measure(topology, args.messages), args.repeat, _progress)
    return bench_results.finish("capture", result, args)


def _progress(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


if __name__ == "__main__":
    sys.exit(bench_results.exit_code(main))
