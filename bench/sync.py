"""What keeping DR in sync costs: CPU-seconds per 1,000 messages for every process, beside its baselines.

A rate measured on a 2-core machine moves with whatever else runs; the work each process
does per message does not, and it is what a user pays for (the DR broker's size, Lambda's
GB-seconds). So each step runs the application at a fixed rate for a fixed time and reads,
from the kernel's accounting (``/proc/PID/stat``, user + system time, all threads), what each
process spent: the primary broker, the DR broker, the relay, the purge, the application's
producer and consumer, and (for information) the AWS emulator. Each runs in a process of its
own, as in production; the ledger is DynamoDB (moto over HTTP), so the relay's and the
purge's figures include their DynamoDB client work, as Lambda's would. Both are built as their
functions build them: the relay with its capture audit and statistics reads, the purge with
both brokers' statistics and the late-copy sweep (decision 0040), and both run what Lambda runs,
``sam build``'s layer under python3.13 with nothing else importable (``sync_functions.py``,
decision 0044; ``BROKERSYNC_LOCAL_FUNCTIONS=source`` runs ``layers/`` under the virtualenv).

One run measures, side by side:

* **baseline**: the same queue in ``mirror`` mode (copy only: no capture, no purge), the
  application alone plus the copy;
* **sync at 0, 10,000 and 50,000 deep**: BrokerSync running, with the DR queue holding that
  many messages that are not consumed on the primary, in front of the live traffic, which the
  application consumes on the primary as it arrives. The backlog is sent straight to the DR
  queue (with correlation ids, as the bridge would have copied it): on the DR broker it is
  the same persistent messages in the same queue, and its keys are in no ledger. Holding it
  on the primary instead does not work at these depths: the primary pages a queue into
  memory only up to its policy's memory limit, so neither a stuck consumer (it is never
  dispatched more than about 1,400 1 KB messages) nor a selector past the backlog can hold
  50,000 there while live traffic flows;
* **floor**: a plain consumer draining the DR queue (the baseline's copies) at the step's rate:
  the physical cost of removing a message on the DR broker;
* **baseline at the deepest backlog**: the copy-only step again, with the deepest backlog on
  DR in front of the copies: what holding a deep queue costs the DR broker with no purge, so
  that the depth-dependent part of the sync steps' figure can be told apart from it. In both
  copy-only steps the copies stay on DR (nothing removes them): the queue grows by a step's
  messages during each.

Beside each step and the floor a probe process times one small unit of work once a second
(``brokersync_ci.machine_speed``): what a CPU-second of the machine was worth during the step.
Each process's figure is also given in probe units (its CPU per 1,000 messages over the
unit's mean cost), which two runs on a host that ran faster in one of them can agree on.

For each sync step: lag per message (consume on the primary to removal on DR, p50/p99), and
the backlog's messages on DR checked afterwards for a raised redelivery flag (must be 0).
``--repeat 2`` runs it all twice back to back, each on fresh brokers, and reports the spread.
``--queues N`` spreads the same rate over N synced queues (the backlog, the floor and the
redelivery check stay on the first): what the per-queue part of the relay's and the purge's
work costs a pair that syncs many queues.
``--rates`` adds stepped-load steps (sync at 0 deep, each rate for ``--step-seconds``).

Run: ``.venv/bin/python bench/sync.py [--rate 1000] [--seconds 60] [--depths 0,10000,50000] [--repeat 2]``
(writes bench/results/sync.json; ``--no-record`` to only print)
"""

from __future__ import annotations

import argparse
import contextlib
import json
import multiprocessing as mp
import os
import queue as queue_mod
import statistics as stats_mod
import subprocess
import sys
import tempfile
import threading
import time
from multiprocessing.connection import Connection
from multiprocessing.sharedctypes import Synchronized
from multiprocessing.synchronize import Event as EventType
from pathlib import Path
from typing import Any
from unittest import mock

import boto3
import stomp
from sync_functions import (
    ENV_LEDGER_SHARDS,
    ENV_PURGE_CONNECTION_PER_CALL,
    ENV_PURGE_TCP_DELAYS,
    ENV_QUEUE_WORKERS,
    ENV_RELAY_READ_PAUSE_MS,
    REGION,
    TABLE,
    purge_keeps_connections,
    purge_without_tcp_delays,
    queue_workers,
    relay_read_pause_ms,
)
from ulid import ULID

from brokersync.broker.inbox import FrameInbox
from brokersync.broker.stomp import StompConnector
from brokersync.ledger.ledger import DEFAULT_SHARDS
from brokersync.ledger.schema import create_ledger_table
from brokersync.side_by_side import QUEUE_WORKERS
from brokersync.topology import Mode, Queue, Topology, load_topology
from brokersync_ci import bench_results
from brokersync_ci.machine_speed import SpeedProbe, in_probe_units, probe_units
from brokersync_ci.process_cpu import CpuMeter
from brokersync_cli.cost import SECONDS_PER_MONTH, Usage, monthly_cost
from brokersync_local.backlog import fill_queue, queue_depth, wait_until
from brokersync_local.browsing import browse
from brokersync_local.function_code import FunctionCode, local_function_code
from brokersync_local.tls import LocalTls, TlsTerminator, local_tls
from brokersync_local.world import LocalWorld, WorldPorts, with_dr_memory_limit

ROOT = Path(__file__).resolve().parent.parent
PORTS = WorldPorts(primary_openwire=63916, primary_stomp=63913, dr_openwire=64916, dr_stomp=64913, aws=5097)
QUEUE = "BENCH.SYNC"
BODY = "x" * 1024
AWS_ENV = {"AWS_ACCESS_KEY_ID": "bench", "AWS_SECRET_ACCESS_KEY": "bench", "AWS_DEFAULT_REGION": REGION}
#: Seconds of traffic at the step's rate before any measurement on a fresh pair, so that the JVMs
#: have compiled their hot paths. 15 s left the first step measuring a primary broker still
#: compiling: 0.48-0.51 CPU-s per 1,000 at 0 deep against 0.34-0.38 in the later steps of the
#: same run, and a lag p99 over 1 s only there (decision 0022 found the same in the drills).
WARM_UP_S = 60.0
#: A step ends this long after its last message at the latest (all consumed, all purged).
DRAIN_TIMEOUT_S = 90.0
#: The relay's and the purge's processes: sync_functions.py, on the code and Python Lambda runs.
FUNCTIONS_SCRIPT = Path(__file__).with_name("sync_functions.py")
#: The floor's drain is metered in this many equal parts (reported beside the whole drain's figure).
FLOOR_PARTS = 3
PROCESSES = ("primary_broker", "dr_broker", "producer", "consumer", "relay", "purge", "aws_emulator")


def queue_names(count: int = 1) -> list[str]:
    """The bench's queues: ``BENCH.SYNC`` alone, or ``BENCH.SYNC.1`` to ``BENCH.SYNC.<count>``.

    The first is the one the backlog, the floor and the redelivery check use.
    """
    if count < 1:
        raise ValueError("the bench needs at least one queue")
    return [QUEUE] if count == 1 else [f"{QUEUE}.{n}" for n in range(1, count + 1)]


def bench_topology(mode: Mode = "sync", dr_memory_mb: int | None = None, queues: int = 1) -> Topology:
    """The topology with the bench's queues; ``dr_memory_mb`` sizes the DR queues' memory limit."""
    base = load_topology(ROOT / "topology.yaml")
    synced = [Queue(name=name, mode=mode) for name in queue_names(queues)]
    return with_dr_memory_limit(base.model_copy(update={"queues": synced}), dr_memory_mb)


# -- the processes ----------------------------------------------------------------------------------
class Collector(stomp.ConnectionListener):
    def __init__(self) -> None:
        self.frames: queue_mod.Queue[stomp.utils.Frame] = queue_mod.Queue()

    def on_message(self, frame: stomp.utils.Frame) -> None:
        self.frames.put(frame)


def remover_per_1000(tally: dict[str, float] | None, sent: int) -> dict[str, float] | None:
    """Remover calls, subscriptions, ids asked for and not on DR, and seconds in calls, per 1,000 messages."""
    if not tally or not sent:
        return None
    return {name: round(value / sent * 1000, 3) for name, value in tally.items()}


def calls_per_1000(counted: dict[str, dict[str, Any]], sent: int) -> dict[str, dict[str, float]]:
    """Each function's DynamoDB calls per 1,000 messages, by operation, with their sum as ``all``."""
    found: dict[str, dict[str, float]] = {}
    for name, result in counted.items():
        calls: dict[str, int] = result.get("calls", {})
        found[name] = {op: round(n / sent * 1000, 2) for op, n in sorted(calls.items())}
        found[name]["all"] = round(sum(calls.values()) / sent * 1000, 2)
    return found


def producer_main(
    endpoints: list[str],
    queues: list[str],
    rate: float,
    seconds: float,
    produced: Synchronized,
    cpu: Synchronized,
    ready: EventType,
    go: EventType,
) -> None:
    """The application's producer: persistent 1 KB messages at a fixed rate, in its own process.

    With several queues it sends to each in turn, so each takes an equal share of the rate.

    It ends before the step's meter stops, and an exited process has no ``/proc`` entry to
    read, so it reports its own CPU seconds from ``go`` to its end (the same kernel
    accounting: user + system time of all its threads, ``CLOCK_PROCESS_CPUTIME_ID``).
    """
    connection = StompConnector(endpoints).connect(name="bench-producer")
    ready.set()
    go.wait()
    cpu_at_go = time.process_time()
    sent = 0
    started = time.perf_counter()
    while (elapsed := time.perf_counter() - started) < seconds:
        due = int(elapsed * rate)
        while sent < due:
            destination = f"/queue/{queues[sent % len(queues)]}"
            connection.send(destination, BODY, headers={"persistent": "true", "correlation-id": str(ULID())})
            sent += 1
        produced.value = sent  # published once per tick, not locked per message
        time.sleep(0.002)
    connection.disconnect()
    cpu.value = time.process_time() - cpu_at_go


def consumer_main(
    endpoints: list[str],
    queues: list[str],
    stop: EventType,
    consumed: Synchronized,
    ready: EventType,
    result: Connection,
) -> None:
    """The application's consumer on the primary: takes what arrives, acks each, notes when (the lag's start)."""
    consumed_at: dict[str, float] = {}
    collector = Collector()
    connection = StompConnector(endpoints).connect(collector, name="bench-consumer")
    for n, queue in enumerate(queues):
        connection.subscribe(
            f"/queue/{queue}", id=f"c{n}", ack="client-individual", headers={"activemq.prefetchSize": "200"}
        )
    ready.set()
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


class FunctionProcess:
    """The relay or the purge in a process of its own (``sync_functions.py``), as its function runs in Lambda.

    Under the runtime's Python with only the layer of ``sam build``'s output importable, by
    default; under this virtualenv on ``layers/`` with ``BROKERSYNC_LOCAL_FUNCTIONS=source``.
    """

    def __init__(self, role: str, code: FunctionCode, topology: Topology, endpoint: str) -> None:
        self.role = role
        self.purged = 0
        self.result: dict[str, Any] | None = None
        self._ready = threading.Event()
        self._done = threading.Event()
        read_fd, write_fd = os.pipe()
        self.process = subprocess.Popen(
            [*code.run_script(FUNCTIONS_SCRIPT), str(code.layer_dir), role, str(write_fd)],
            stdin=subprocess.PIPE,
            stdout=sys.stderr,  # its logs: the bench's stdout is the results' JSON
            pass_fds=(write_fd,),
            env={**os.environ, **AWS_ENV},
            text=True,
        )
        os.close(write_fd)
        self._replies = os.fdopen(read_fd, "r", encoding="utf-8")
        threading.Thread(target=self._read, daemon=True, name=f"{role}-replies").start()
        assert self.process.stdin is not None
        config = {"topology": topology.model_dump(mode="json"), "endpoint": endpoint}
        self.process.stdin.write(json.dumps(config) + "\n")
        self.process.stdin.flush()

    @property
    def pid(self) -> int:
        return self.process.pid

    def _read(self) -> None:
        for line in self._replies:
            reply = json.loads(line)
            if reply.get("ready"):
                self._ready.set()
            if "purged" in reply:
                self.purged = reply["purged"]
            if "result" in reply:
                self.result = reply["result"]
        self._done.set()

    def wait_ready(self, timeout_s: float) -> bool:
        return self._ready.wait(timeout_s)

    def stop(self) -> None:
        """Ask it to finish its pass and report (a line on its stdin)."""
        with contextlib.suppress(BrokenPipeError, OSError):
            assert self.process.stdin is not None
            self.process.stdin.write("stop\n")
            self.process.stdin.flush()

    def finish(self, timeout_s: float) -> dict[str, Any]:
        """What it counted, once it has stopped; an empty result if it did not report in time."""
        self._done.wait(timeout_s)
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=10)
        return self.result or {}


def functions_runtime() -> dict[str, str]:
    """Which Python ran the relay and the purge, and from which code (recorded with the figures)."""
    code = local_function_code()
    version = subprocess.run(
        [code.python, "-c", "import platform; print(platform.python_version())"],
        capture_output=True, text=True, timeout=30, check=True,
    ).stdout.strip()  # fmt: skip
    where = "the source tree (layers/)" if code.build_dir is None else "sam build's output (make functions)"
    return {"functions_python": version, "functions_code": where}


def ledger_shards() -> int:
    """The ledger's shard count in this run: the product's unless ``--ledger-shards`` measures another."""
    return int(os.environ.get(ENV_LEDGER_SHARDS, DEFAULT_SHARDS))


# -- steps ----------------------------------------------------------------------------------------------
class Pair:
    """One fresh local pair for a run, with the ledger table, and what holds its backlog."""

    def __init__(
        self, mode: Mode, state: Path, dr_memory_mb: int | None = None, tls: LocalTls | None = None, queues: int = 1
    ) -> None:
        # The DR heap follows the memory limit. With ``tls`` every connection to a broker is TLS
        # and the relay and the purge reach the ledger over HTTPS, as on Amazon MQ and AWS.
        self.world = LocalWorld(bench_topology(mode, dr_memory_mb, queues), state, PORTS, tls=tls)
        self.tls = tls
        self.topology = self.world.topology
        #: The application sends to and consumes from each; the backlog and the floor use the first.
        self.queues = [queue.name for queue in self.topology.queues]
        self.primary = StompConnector(self.topology.primary.stomp)
        self.dr = StompConnector(self.topology.dr.stomp)
        self.spawn = mp.get_context("spawn")
        self.backlog = 0
        #: The relay's and the purge's code and interpreter: the functions' build under python3.13.
        self.code = local_function_code()

    def __enter__(self) -> Pair:
        self.world.up(timeout_s=90, log=lambda _m: None)
        os.environ.update(AWS_ENV)
        self.endpoint = self.world.read_env()["aws"]["endpoint"]
        client = boto3.client("dynamodb", endpoint_url=self.endpoint, region_name=REGION)
        create_ledger_table(client, TABLE, ROOT / "template.yaml")
        self._terminator = None if self.tls is None else TlsTerminator(self.tls, PORTS.aws).__enter__()
        #: Where the relay and the purge reach the ledger: HTTPS with ``tls``, as Lambda reaches DynamoDB.
        self.functions_endpoint = self.endpoint if self._terminator is None else self._terminator.endpoint
        return self

    def __exit__(self, *_exc: object) -> None:
        if self._terminator is not None:
            self._terminator.__exit__()
        self.world.destroy()

    def grow_backlog(self, to: int) -> None:
        """Make the DR queue hold ``to`` messages not consumed on the primary (see the module's docstring)."""
        more = to - self.backlog
        if more <= 0:
            return
        first = self.queues[0]
        on_dr = queue_depth(self.dr, first)
        fill_queue(self.dr, first, more, BODY, headers=lambda: {"correlation-id": str(ULID())})
        wait_until(lambda: queue_depth(self.dr, first) >= on_dr + more, 600, "backlog stored on DR")
        self.backlog = to

    def step(self, rate: float, seconds: float, *, sync: bool) -> dict[str, Any]:
        """The application at ``rate`` for ``seconds``; with ``sync`` the relay and the purge run too."""
        spawn, topology = self.spawn, self.topology
        produced, consumed = spawn.Value("q", 0), spawn.Value("q", 0)
        producer_cpu = spawn.Value("d", 0.0)
        go, stop_app = spawn.Event(), spawn.Event()
        readies = {name: spawn.Event() for name in ("producer", "consumer")}
        consumed_pipe, consumed_child = spawn.Pipe(duplex=False)
        processes = {
            "consumer": spawn.Process(
                daemon=True,  # a failed step must not leave the bench waiting on its children
                target=consumer_main,
                args=(topology.primary.stomp, self.queues, stop_app, consumed, readies["consumer"], consumed_child),
            ),
            "producer": spawn.Process(
                daemon=True,  # a failed step must not leave the bench waiting on its children
                target=producer_main,
                args=(
                    topology.primary.stomp,
                    self.queues,
                    rate,
                    seconds,
                    produced,
                    producer_cpu,
                    readies["producer"],
                    go,
                ),
            ),
        }
        with contextlib.ExitStack() as cleanup:  # a failed step stops its functions too
            functions: dict[str, FunctionProcess] = {}
            for name in ("relay", "purge") if sync else ():
                functions[name] = function = FunctionProcess(name, self.code, topology, self.functions_endpoint)
                cleanup.callback(function.finish, 30)
                cleanup.callback(function.stop)
            for process in processes.values():
                process.start()
            for name in processes:
                if not readies[name].wait(60):
                    raise TimeoutError(f"the {name} process did not start")
            for name, function in functions.items():
                if not function.wait_ready(60):
                    raise TimeoutError(f"the {name} process did not start (its errors are above)")
            pids = {
                "primary_broker": self.world.brokers["primary"].pid,
                "dr_broker": self.world.brokers["dr"].pid,
                "aws_emulator": self.world.moto.pid,
                **{name: process.pid for name, process in processes.items()},
                **{name: function.pid for name, function in functions.items()},
            }
            # The producer ends before the meter stops: it reports its own CPU time instead.
            meter = CpuMeter({name: pid for name, pid in pids.items() if pid is not None and name != "producer"})
            probe = cleanup.enter_context(SpeedProbe())  # what the machine's CPU-second was worth meanwhile
            meter.start()
            started = time.monotonic()
            go.set()
            processes["producer"].join()
            sent = produced.value

            def drained() -> bool:
                return consumed.value >= sent and (not sync or functions["purge"].purged >= sent)

            ended = time.monotonic()
            drained_in: float | None = None
            while time.monotonic() - ended < DRAIN_TIMEOUT_S:
                if drained():
                    drained_in = time.monotonic() - ended
                    break
                time.sleep(0.05)
            cpu = {**meter.stop(), "producer": producer_cpu.value}
            speed = probe.stop()
            window_s = time.monotonic() - started
            stop_app.set()
            consumed_at: dict[str, float] = consumed_pipe.recv() if consumed_pipe.poll(60) else {}
            for function in functions.values():
                function.stop()
            counted = {name: function.finish(60) for name, function in functions.items()}
            cleanup.pop_all()  # the functions are stopped and finished: nothing left for a failure to undo
            outcome: dict[str, Any] = {"removed_at": {}, "errors": [], "remover": None, **counted.get("purge", {})}
            for process in processes.values():
                process.join(timeout=30)
            removed_at: dict[str, float] = outcome["removed_at"]

            def per_1000(tally: str) -> dict[str, float]:
                return {name: round(c.get(tally, 0) / sent * 1000, 2) for name, c in counted.items()}

            per_1000_cpu = {name: value / sent * 1000 for name, value in cpu.items()} if sent else {}
            lags = sorted(removed_at[k] - consumed_at[k] for k in removed_at if k in consumed_at)
            quantiles = stats_mod.quantiles(lags, n=100) if len(lags) >= 2 else [None] * 99
            return {
                "rate": rate,
                "seconds": seconds,
                "produced": sent,
                "consumed": len(consumed_at),
                "purged": len(removed_at) if sync else None,
                "window_s": round(window_s, 2),
                "drained_within_s": None if drained_in is None else round(drained_in, 2),
                "lag_p50_s": None if quantiles[49] is None else round(quantiles[49], 3),
                "lag_p99_s": None if quantiles[98] is None else round(quantiles[98], 3),
                "cpu_s": {name: round(value, 2) for name, value in cpu.items()},
                "cpu_s_per_1000": {name: round(value, 4) for name, value in per_1000_cpu.items()},
                "machine_speed": speed,
                "cpu_per_1000_in_probe_units": in_probe_units(per_1000_cpu, speed["unit_cpu_ms"]),
                "purge_errors": outcome["errors"],
                "remover_per_1000": remover_per_1000(outcome["remover"], sent) if sync else None,
                "ledger_write_units_per_1000": per_1000("units") if sync and sent else None,
                "ledger_reads_per_1000": per_1000("reads") if sync and sent else None,
                "ledger_calls_per_1000": calls_per_1000(counted, sent) if sync and sent else None,
            }

    def redelivered_backlog(self) -> int:
        """Messages on DR whose redelivery flag is raised (none may be: the purge never touches them)."""
        frames = browse(self.dr, self.queues[0], timeout_s=600)
        return sum(1 for frame in frames if frame.headers.get("redelivered") == "true")

    def drain_floor(self, rate: float | None = None) -> dict[str, Any]:
        """A plain consumer draining the DR queue: the DR broker's CPU per removed message.

        ``rate`` paces the ACKs (and so, through the prefetch, the dispatch) at the step's rate:
        the broker's periodic work (the store's checkpoint every few seconds, collections) is
        then shared over as many messages per second as in the steps it is compared with.
        Drained flat out, 30,000 messages took 6 s, a window that held one checkpoint or two,
        and the figure moved 17-19 % between back-to-back runs; its three parts moved four-fold
        within one run (0.09 to 0.34 CPU-s per 1,000). ``None`` drains flat out (the warm-up).

        The drain is metered in :data:`FLOOR_PARTS` equal parts, each ending only once the
        broker has confirmed every ACK in it (a receipt on its last ACK: a connection's frames
        are handled in order); the figure is the whole drain's, and the parts show how even
        it was.
        """
        count = queue_depth(self.dr, self.queues[0])
        if not count:
            return {"drained": 0, "msgs_per_s": None, "dr_broker_cpu_s_per_1000": None, "parts_cpu_s_per_1000": []}
        inbox = FrameInbox()
        connection = self.dr.connect(inbox, name="bench-floor")
        meter = CpuMeter({"dr_broker": self.world.brokers["dr"].pid})  # type: ignore[dict-item]
        parts = min(FLOOR_PARTS, count)
        bounds = [count * i // parts for i in range(parts + 1)]
        per_part: list[float] = []
        total_cpu = 0.0
        with SpeedProbe() as probe:  # stopped on a failure too
            started = time.monotonic()
            meter.start()
            connection.subscribe(
                f"/queue/{self.queues[0]}", id="f", ack="client-individual", headers={"activemq.prefetchSize": "500"}
            )
            for part in range(parts):
                size = bounds[part + 1] - bounds[part]
                receipt = f"floor-part-{part}"
                for n in range(bounds[part], bounds[part + 1]):
                    frame = inbox.get(60)
                    assert isinstance(frame, stomp.utils.Frame), "the DR broker dropped the floor's connection"
                    if rate:
                        time.sleep(max(0.0, started + n / rate - time.monotonic()))
                    connection.ack(frame.headers["ack"], receipt=receipt if n == bounds[part + 1] - 1 else None)
                with inbox.receipt_arrived:
                    if not inbox.receipt_arrived.wait_for(lambda r=receipt: r in inbox.receipts, timeout=60):
                        raise TimeoutError(f"the DR broker did not confirm the floor's acks ({receipt}) within 60 s")
                cpu = meter.stop()["dr_broker"]
                meter.start()
                total_cpu += cpu
                per_part.append(cpu / size * 1000)
            elapsed = time.monotonic() - started
            speed = probe.stop()
        connection.unsubscribe("f")
        connection.disconnect()
        return {
            "drained": count,
            "paced_msgs_per_s": rate,
            "msgs_per_s": round(count / elapsed),
            "dr_broker_cpu_s_per_1000": round(total_cpu / count * 1000, 4),
            "parts_cpu_s_per_1000": [round(c, 4) for c in per_part],
            "machine_speed": speed,
            "dr_broker_cpu_per_1000_in_probe_units": probe_units(total_cpu / count * 1000, speed["unit_cpu_ms"]),
        }


def warm_up(pair: Pair, rate: float, seconds: float, *, sync: bool) -> None:
    if seconds > 0:
        pair.step(rate, seconds, sync=sync)


def progress(line: str) -> None:
    """Where a long run is, on stderr (the JSON goes to stdout)."""
    print(f"{time.strftime('%H:%M:%S')} {line}", file=sys.stderr, flush=True)


def measure(args: argparse.Namespace) -> dict[str, Any]:
    """One run: the baseline and the floor on one fresh pair, the sync depths on another."""
    depths = [int(d) for d in args.depths.split(",") if d.strip()]
    result: dict[str, Any] = {
        "rate": args.rate,
        "seconds": args.seconds,
        "message_bytes": len(BODY),
        "queues": args.queues,
        "dr_memory_limit_mb": bench_topology("sync", args.dr_memory_mb).tuning.dr.memory_limit_mb,
        "ledger_shards": ledger_shards(),
        "queue_workers": queue_workers(),
        "relay_read_pause_ms": relay_read_pause_ms(),
        "purge_keeps_connections": purge_keeps_connections(),
        "purge_without_tcp_delays": purge_without_tcp_delays(),
        "warm_up_s": args.warm_up,
        "tls": args.tls,
        **functions_runtime(),
    }
    with contextlib.ExitStack() as stack:
        tls = None
        if args.tls:
            tls = local_tls(Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-sync-tls-"))))
            # Every client the bench starts trusts the world's certificate, and only it.
            stack.enter_context(mock.patch.dict(os.environ, tls.client_environment()))
        measure_pairs(args, depths, result, tls)
    result.update(figures(result))
    return result


def measure_pairs(args: argparse.Namespace, depths: list[int], result: dict[str, Any], tls: LocalTls | None) -> None:
    """The baseline and the floor on one fresh pair, the sync depths on another, into ``result``."""
    with (
        tempfile.TemporaryDirectory(prefix="bench-sync-") as state,
        Pair("mirror", Path(state) / "mirror", args.dr_memory_mb, tls, args.queues) as pair,
    ):
        progress("baseline pair up: warm-up")
        warm_up(pair, args.rate, args.warm_up, sync=False)
        pair.drain_floor()  # the warm-up's copies
        progress("baseline step (mirror: copy only)")
        result["baseline"] = pair.step(args.rate, args.seconds, sync=False)
        progress("floor: a plain consumer drains DR")
        result["floor"] = pair.drain_floor(args.rate)
        if (deepest := max(depths, default=0)) > 0:
            progress(f"baseline step at {deepest:,} deep")
            pair.grow_backlog(deepest)
            result["baseline_deep"] = {**pair.step(args.rate, args.seconds, sync=False), "backlog": deepest}
    with (
        tempfile.TemporaryDirectory(prefix="bench-sync-") as state,
        Pair("sync", Path(state) / "sync", args.dr_memory_mb, tls, args.queues) as pair,
    ):
        progress("sync pair up: warm-up")
        warm_up(pair, args.rate, args.warm_up, sync=True)
        steps = {}
        for deep in depths:
            progress(f"backlog of {deep:,} on DR")
            pair.grow_backlog(deep)
            progress(f"sync step at {deep:,} deep")
            step = pair.step(args.rate, args.seconds, sync=True)
            step["backlog"] = deep
            step["redelivered_on_dr"] = pair.redelivered_backlog()
            steps[str(deep)] = step
        result["sync"] = steps
        result["rate_steps"] = [
            pair.step(float(rate), args.step_seconds, sync=True) for rate in args.rates.split(",") if rate.strip()
        ]


def figures(result: dict[str, Any]) -> dict[str, Any]:
    """The goals' ratios, from the steps of one run."""
    steps = result["sync"]
    per = {deep: step["cpu_s_per_1000"] for deep, step in steps.items()}
    first, last = min(steps, key=int), max(steps, key=int)
    floor = result["floor"]["dr_broker_cpu_s_per_1000"]
    base = result["baseline"]["cpu_s_per_1000"]
    ours = {deep: p.get("relay", 0.0) + p.get("purge", 0.0) for deep, p in per.items()}
    dr_purge = {deep: p["dr_broker"] - base["dr_broker"] for deep, p in per.items()}
    return {
        "dr_broker_cpu_per_1000_by_depth": {deep: p["dr_broker"] for deep, p in per.items()},
        "dr_broker_purge_cpu_per_1000_by_depth": {deep: round(v, 4) for deep, v in dr_purge.items()},
        "dr_broker_purge_ms_per_subscription_by_depth": per_subscription(dr_purge, steps),
        "dr_deep_over_shallow": round(per[last]["dr_broker"] / per[first]["dr_broker"], 2),
        "dr_purge_deep_over_floor": round(dr_purge[last] / floor, 2) if floor else None,
        "dr_purge_shallow_over_floor": round(dr_purge[first] / floor, 2) if floor else None,
        "relay_and_purge_over_primary": round(ours[first] / per[first]["primary_broker"], 3),
        "lag_p99_s_by_depth": {deep: step["lag_p99_s"] for deep, step in steps.items()},
        "redelivered_by_depth": {deep: step["redelivered_on_dr"] for deep, step in steps.items()},
        "bill": bill(result["rate"], steps[first]),
        **copy_only_by_depth(result),
    }


def per_subscription(dr_purge: dict[str, float], steps: dict[str, Any]) -> dict[str, float | None]:
    """The DR broker's CPU the purge added, in ms per purge subscription, by depth.

    Each subscription scans the paged-in backlog at least once, and again for each dispatch
    pass its ACK lets run before the broker reads its UNSUBSCRIBE (decision 0058). Set beside
    what one scan of that backlog costs (``bench/selector_scan.py``), it says how many scans a
    subscription cost.
    """
    out: dict[str, float | None] = {}
    for deep, added in dr_purge.items():
        subscriptions = (steps[deep].get("remover_per_1000") or {}).get("subscriptions")
        out[deep] = round(added / subscriptions * 1000, 1) if subscriptions else None
    return out


def copy_only_by_depth(result: dict[str, Any]) -> dict[str, Any]:
    """The DR broker's CPU per message with no purge, deepest ÷ 0 deep: the part of depth that is not the purge's."""
    deep = result.get("baseline_deep")
    shallow = result["baseline"]["cpu_s_per_1000"].get("dr_broker")
    if not deep or not shallow:
        return {}
    return {"dr_copy_only_deep_over_shallow": round(deep["cpu_s_per_1000"]["dr_broker"] / shallow, 2)}


def bill(rate: float, step: dict[str, Any]) -> dict[str, Any]:
    """The AWS bill per million messages synced at ``rate``: the cost model with this run's counted ledger writes.

    The ledger's write units are counted per request in the relay and the purge (capture
    items, pointers and audit counts; marks and pointer deletes); everything that runs on a
    schedule whatever the rate (the relay every minute, the purge loop, the probe, metrics and
    alarms) is the cost model's (``brokersync cost``), spread over the messages of a month at
    ``rate``.
    """
    counted = step["ledger_write_units_per_1000"]
    # This run's counts are the whole of it, its batches' share included: no fitted fixed part on top.
    usage = Usage(
        relay_units_per_batch=0.0,
        relay_units_per_message=counted["relay"] / 1000,
        purge_units_per_round=0.0,
        purge_units_per_message=counted["purge"] / 1000,
    )
    month = monthly_cost(rate, usage=usage)
    per_million = 1e6 / (rate * SECONDS_PER_MONTH)
    named = ("ledger_writes", "ledger_reads", "ledger_pointer_polls", "ledger_storage_and_pitr",
             "ledger_replication_transfer",
             "relay_lambda", "purge_lambda", "probe_lambda", "lambda_requests", "purge_loop_transitions",
             "cloudwatch_metrics_alarms_dashboards")  # fmt: skip
    lines = month["usd_per_month"]
    return {
        "rate_msgs_per_s": rate,
        "ledger_write_units_per_1000": counted,
        "usd_per_million_lambda_sfn_dynamodb_cloudwatch": round(sum(lines[n] for n in named) * per_million, 4),
        "usd_per_million_everything": round(month["total_usd_per_month"] * per_million, 4),
        "usd_per_month_by_line": lines,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=float, default=1000.0, help="messages per second in every cost step (1000)")
    parser.add_argument("--seconds", type=float, default=60.0, help="length of each cost step (60)")
    parser.add_argument(
        "--warm-up",
        type=float,
        default=WARM_UP_S,
        help=f"seconds of traffic at the step's rate on each fresh pair before measuring ({WARM_UP_S:g})",
    )
    parser.add_argument("--depths", default="0,10000,50000", help="DR backlogs measured (0,10000,50000)")
    parser.add_argument(
        "--queues",
        type=int,
        default=1,
        help="synced queues sharing the rate equally (1); the backlog, the floor and the redelivery check use the "
        "first",
    )
    parser.add_argument(
        "--queue-workers",
        type=int,
        default=None,
        help=f"queues the relay's ledger writes and the purge's rounds work on at once (default: the product's, "
        f"{QUEUE_WORKERS}); 1 works through them one after another, as before decision 0049",
    )
    parser.add_argument(
        "--relay-read-pause-ms",
        type=float,
        default=None,
        help="how long the relay's receiver thread waits after a read that emptied its socket (default: the "
        "product's, 50); 0 reads as soon as a frame arrives, as before decision 0050",
    )
    parser.add_argument(
        "--purge-connection-per-call",
        action="store_true",
        help="the purge opens a DR connection for each removal call, as before decision 0051, instead of "
        "keeping one from round to round",
    )
    parser.add_argument(
        "--purge-tcp-delays",
        action="store_true",
        help="the purge's DR connections leave Nagle's algorithm and the kernel's 40 ms delayed ACK on, as before "
        "decision 0052",
    )
    parser.add_argument(
        "--dr-memory-mb",
        type=int,
        default=None,
        help="the DR queue's memory limit (tuning.dr.memory_limit_mb; the DR heap twice that): the deepest backlog "
        "the purge can work behind (default: the topology's, 128)",
    )
    parser.add_argument(
        "--ledger-shards",
        type=int,
        default=None,
        help=f"partitions per queue in the ledger (default: the product's, {DEFAULT_SHARDS}); "
        "measures what another layout would cost, nothing else changes",
    )
    parser.add_argument("--rates", default="", help="also stepped load at these rates, e.g. 500,1000,1500,2000")
    parser.add_argument("--step-seconds", type=float, default=20.0, help="length of each stepped-load step (20)")
    parser.add_argument(
        "--tls",
        action="store_true",
        help="TLS as in production: the brokers take only stomp+ssl and ssl (the bridge too), and the relay "
        "and the purge reach the ledger over HTTPS; every process pays its side of each connection",
    )
    bench_results.add_arguments(parser, "sync", repeat=2)
    args = parser.parse_args()
    if args.queues < 1:
        parser.error("--queues must be 1 or more")
    if args.queue_workers is not None:
        if args.queue_workers < 1:
            parser.error("--queue-workers must be 1 or more")
        os.environ[ENV_QUEUE_WORKERS] = str(args.queue_workers)
    if args.relay_read_pause_ms is not None:
        if not 0 <= args.relay_read_pause_ms <= 1000:
            parser.error("--relay-read-pause-ms must be 0 to 1000")
        os.environ[ENV_RELAY_READ_PAUSE_MS] = str(args.relay_read_pause_ms)
    if args.purge_connection_per_call:
        os.environ[ENV_PURGE_CONNECTION_PER_CALL] = "1"
    if args.purge_tcp_delays:
        os.environ[ENV_PURGE_TCP_DELAYS] = "1"
    if args.ledger_shards is not None:
        if args.ledger_shards < 1:
            parser.error("--ledger-shards must be 1 or more")
        os.environ[ENV_LEDGER_SHARDS] = str(args.ledger_shards)
    result = bench_results.run_repeated(
        lambda: measure(args), args.repeat, lambda line: print(line, file=sys.stderr, flush=True)
    )
    return bench_results.finish("sync", result, args)


if __name__ == "__main__":
    sys.exit(bench_results.exit_code(main))
