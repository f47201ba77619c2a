"""What one purge subscription costs the DR broker per message of backlog, by the form of its selector.

Every purge subscription's first dispatch pass evaluates its selector against every paged-in
message the queue has not dispatched, that is, against the DR queue's whole backlog of
messages not consumed on the primary (decision 0009). This bench isolates that cost: a DR
broker holding ``--depths`` persistent 1 KB messages, and subscriptions that match none of
them, each one SUBSCRIBE (with a receipt) and UNSUBSCRIBE (with a receipt) on one connection,
measured from the kernel's accounting of the broker process. Side by side, in one run, per
depth:

* ``message_id``: ``JMSMessageID IN (...)`` over a full batch of ids: the purge's selector;
* ``timestamp_guarded``: the same list behind ``JMSTimestamp >= T AND``, with ``T`` later than
  every message: what a pre-filter on a field the broker stores as a number would cost;
* ``correlation_id``: ``JMSCorrelationID IN (...)``, a string the broker stores as such;
* ``floor``: ``JMSPriority = 10`` (JMS priorities are 0-9): the dispatch loop with the
  cheapest test, the least any selector can cost;
* ``message_id_regex``: ActiveMQ's built-in ``REGEX`` function over ``JMSMessageID``, exact
  (anchored, digits only) for ten runs of 100 consecutive sequence numbers of one producer:
  1,000 ids in under 300 bytes, where the list holds about 210. Its producer id is the
  backlog's own but for the connection number, so every backlog message is matched up to
  there before it is turned down: the regex's worst case, the list's usual one;
* ``removes_one_apart``: a purge subscription as the purge ran it until decision 0015, on a
  message at the tail, behind the backlog: the ``correlation_id`` list plus that message's
  correlation id, a prefetch of 1, its frame received, one ACK, then the UNSUBSCRIBE with a
  receipt, each frame in a write of its own;
* ``removes_one``: the same, with the ACK and the UNSUBSCRIBE in one write, as the purge
  sends them now (``send_in_one_write``). Against ``correlation_id`` (the same selector,
  nothing found), a removing subscription's extra cost per 1,000 deep is what the ACK's
  wake-up passes add: ActiveMQ scans the backlog again for the subscription the ACK has just
  left room in, for as long as it has not read the UNSUBSCRIBE.

The figure that matters is the broker's CPU per subscription per 1,000 messages of depth,
(cost at depth - cost at 0) / depth: what each purge round pays for the backlog.

``--busy-neighbour`` runs a process that streams memory on the machine's other core (``dd``
from ``/dev/zero``) for the whole measurement. In the sync bench the DR broker shares two
cores with six busy processes, so the thread that would read a removing subscription's
UNSUBSCRIBE often waits for a core while the ACK's dispatch passes scan the backlog; with a
neighbour, this bench shows what that does to each form (decision 0058).

Run: ``.venv/bin/python bench/selector_scan.py [--depths 0,10000,30000] [--subscriptions 200] [--repeat 2]
[--busy-neighbour]``
(writes bench/results/selector_scan.json; ``--no-record`` to only print)
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import stomp

from brokersync.broker.stomp import StompConnector, send_in_one_write
from brokersync.purge.selectors import MAX_HEADER_LINE_BYTES, selector_batches
from brokersync.topology import Queue, Topology, load_topology
from brokersync_ci import bench_results
from brokersync_ci.process_cpu import cpu_seconds
from brokersync_local.backlog import fill_queue, queue_depth, wait_until
from brokersync_local.world import LocalWorld, WorldPorts

ROOT = Path(__file__).resolve().parents[1]
PORTS = WorldPorts(primary_openwire=63516, primary_stomp=63513, dr_openwire=64516, dr_stomp=64513, aws=5094)
QUEUE = "BENCH.SCAN"
FILL_TIMEOUT_S = 600.0
RECEIPT_TIMEOUT_S = 30.0
#: The broker counts as quiet after a second in which it spent no more CPU than this.
QUIET_CPU_S = 0.05
QUIET_TIMEOUT_S = 120.0
BODY = "x" * 1024
#: Subscriptions opened (and closed) per form before measuring: the broker's JIT warms up.
WARM_UP = 10


def bench_topology() -> Topology:
    base = load_topology(ROOT / "topology.yaml")
    return base.model_copy(update={"queues": [Queue(name=QUEUE, mode="sync")]})


def _regex_escaped(text: str) -> str:
    """``text`` as a Java regex matching it literally: every character that is not a letter or digit escaped."""
    return "".join(ch if ch.isalnum() else "\\" + ch for ch in text)


def regex_selector(producer: str) -> str:
    """Ten runs of 100 consecutive sequence numbers of ``producer`` (``ID:...:<session>:<n>:``), exactly."""
    runs = "|".join(f"9{run}0[0-9]{{2}}" for run in range(10))
    return f"REGEX('\\A{_regex_escaped(producer)}(?:{runs})\\z', JMSMessageID)"


def absent_producer(message_id: str) -> str:
    """The producer id of ``message_id`` with a connection number no client of the bench has."""
    connection_stem = message_id.split(":")[1]
    return f"ID:{connection_stem}:999999:-1:1:"


def selectors() -> dict[str, str]:
    """The forms compared, each over a full batch of message ids that no message carries."""
    absent = [f"ID:absent-host-40000-1700000000000-1:1:1:1:{n}" for n in range(1000)]
    _, by_id = selector_batches(absent, "message-id", max_line_bytes=MAX_HEADER_LINE_BYTES - 64)[0]
    later_than_all = int(time.time() * 1000) + 365 * 86_400_000
    return {
        "message_id": by_id,
        "timestamp_guarded": f"JMSTimestamp >= {later_than_all} AND {by_id}",
        "correlation_id": by_id.replace("JMSMessageID", "JMSCorrelationID"),
        "floor": "JMSPriority = 10",
    }


def _tail_id(n: int) -> str:
    return f"bench-tail-{n}"


class _Listener(stomp.ConnectionListener):
    """Receipts and frames, handed to the bench's thread."""

    def __init__(self) -> None:
        self.seen: set[str] = set()
        self.delivered = 0
        self.frames: list[stomp.utils.Frame] = []
        self.arrived = threading.Condition()

    def on_receipt(self, frame: stomp.utils.Frame) -> None:
        with self.arrived:
            self.seen.add(frame.headers["receipt-id"])
            self.arrived.notify_all()

    def on_message(self, frame: stomp.utils.Frame) -> None:
        with self.arrived:
            self.delivered += 1
            self.frames.append(frame)
            self.arrived.notify_all()

    def wait(self, receipt: str) -> None:
        with self.arrived:
            if not self.arrived.wait_for(lambda: receipt in self.seen, RECEIPT_TIMEOUT_S):
                raise TimeoutError(f"no receipt {receipt} from the DR broker within {RECEIPT_TIMEOUT_S} s")

    def wait_frame(self) -> stomp.utils.Frame:
        with self.arrived:
            if not self.arrived.wait_for(lambda: self.frames, RECEIPT_TIMEOUT_S):
                raise TimeoutError(f"the tail message did not arrive within {RECEIPT_TIMEOUT_S} s")
            return self.frames.pop(0)


def _wait_until_quiet(pid: int, timeout_s: float = QUIET_TIMEOUT_S) -> None:
    """Wait until the broker has finished storing what it was sent (its index, its GC): that
    work would otherwise land in the first form's figure."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        before = cpu_seconds(pid)
        time.sleep(1.0)
        if cpu_seconds(pid) - before <= QUIET_CPU_S:
            return
    raise TimeoutError(f"the DR broker did not go quiet within {timeout_s} s")


class _Scan:
    """One DR broker, one connection, the backlog and the tail the forms are measured on."""

    def __init__(self, dr: StompConnector, pid: int) -> None:
        self.dr, self.pid = dr, pid
        self.listener = _Listener()
        self.connection = dr.connect(self.listener, name="bench-selector-scan")
        self.forms = selectors()
        self.subscription_ids = itertools.count(1)
        self.tails_sent = 0
        self.tails_taken = 0
        self.backlog = 0

    def grow(self, depth: int, tail: int) -> None:
        """Backlog up to ``depth``, then ``tail`` messages behind it for ``removes_one``; then quiet."""
        if depth > self.backlog:
            fill_queue(self.dr, QUEUE, depth - self.backlog, BODY)
            self.backlog = depth
        first = self.tails_sent + 1
        numbers = iter(range(first, first + tail))
        fill_queue(
            self.dr, QUEUE, tail, BODY, connections=1, headers=lambda: {"correlation-id": _tail_id(next(numbers))}
        )
        self.tails_sent += tail
        stored = self.backlog + self.tails_sent - self.tails_taken
        wait_until(lambda: queue_depth(self.dr, QUEUE) >= stored, FILL_TIMEOUT_S, f"{stored} stored")
        _wait_until_quiet(self.pid)

    def open_and_close(self, selector: str, count: int) -> None:
        for _ in range(count):
            n = next(self.subscription_ids)
            self.connection.subscribe(
                f"/queue/{QUEUE}", id=f"s{n}", ack="client", headers={"selector": selector, "receipt": f"a{n}"}
            )
            self.listener.wait(f"a{n}")
            self.connection.unsubscribe(f"s{n}", headers={"receipt": f"b{n}"})
            self.listener.wait(f"b{n}")

    def remove_tail(self, count: int, *, one_write: bool) -> None:
        """As the purge does: a subscription per tail message, its frame, one ACK, the UNSUBSCRIBE."""
        for _ in range(count):
            n = next(self.subscription_ids)
            self.tails_taken += 1
            wanted = _tail_id(self.tails_taken)
            selector = self.forms["correlation_id"][:-1] + f",'{wanted}')"
            headers = {"selector": selector, "activemq.prefetchSize": "1"}
            self.connection.subscribe(f"/queue/{QUEUE}", id=f"s{n}", ack="client", headers=headers)
            frame = self.listener.wait_frame()
            if frame.headers.get("correlation-id") != wanted:
                raise AssertionError(f"subscription s{n} was given {frame.headers.get('correlation-id')!r}")
            if one_write:
                unsubscribe = {"id": f"s{n}", "receipt": f"b{n}"}
                send_in_one_write(
                    self.connection, [("ACK", {"id": frame.headers["ack"]}), ("UNSUBSCRIBE", unsubscribe)]
                )
            else:
                self.connection.ack(frame.headers["ack"])
                self.connection.unsubscribe(f"s{n}", headers={"receipt": f"b{n}"})
            self.listener.wait(f"b{n}")

    def cost_ms(self, run: Callable[[], None], count: int) -> float:
        before = cpu_seconds(self.pid)
        run()
        return round(1000 * (cpu_seconds(self.pid) - before) / count, 2)

    def a_message_id(self) -> str:
        """The id of the queue's first message, browsed on a connection of its own (nothing delivered)."""
        listener = _Listener()
        connection = self.dr.connect(listener, name="bench-selector-scan-peek")
        try:
            connection.subscribe(f"/queue/{QUEUE}", id="peek", ack="auto", headers={"browser": "true"})
            return listener.wait_frame().headers["message-id"]
        finally:
            connection.disconnect()

    def at_depth(self, depth: int, subscriptions: int) -> dict[str, float]:
        self.grow(depth, 2 * (WARM_UP + subscriptions))
        if "message_id_regex" not in self.forms:  # the same selector at every depth: built once, from the queue
            forms = list(self.forms.items())
            forms.insert(1, ("message_id_regex", regex_selector(absent_producer(self.a_message_id()))))
            self.forms = dict(forms)
        for selector in self.forms.values():
            self.open_and_close(selector, WARM_UP)
        self.remove_tail(WARM_UP, one_write=False)
        self.remove_tail(WARM_UP, one_write=True)
        costs = {
            name: self.cost_ms(lambda s=selector: self.open_and_close(s, subscriptions), subscriptions)
            for name, selector in self.forms.items()
        }
        for name, one_write in (("removes_one_apart", False), ("removes_one", True)):
            costs[name] = self.cost_ms(lambda w=one_write: self.remove_tail(subscriptions, one_write=w), subscriptions)
        if (left := queue_depth(self.dr, QUEUE)) != self.backlog:
            raise AssertionError(f"the backlog of {self.backlog} was touched: {left} left")
        if self.listener.delivered != self.tails_taken:
            raise AssertionError(f"{self.listener.delivered} frames delivered for {self.tails_taken} tail messages")
        return costs


def measure(depths: list[int], subscriptions: int) -> dict[str, Any]:
    """One fresh broker pair; the backlog grows from depth to depth, every form measured at each."""
    by_depth: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory(prefix="bench-selector-scan-") as state:
        world = LocalWorld(bench_topology(), Path(state), PORTS)
        world.up(timeout_s=90, log=lambda _m: None)
        try:
            pid = world.brokers["dr"].pid
            assert pid is not None
            scan = _Scan(StompConnector(world.topology.dr.stomp), pid)
            for depth in sorted(depths):
                by_depth[str(depth)] = scan.at_depth(depth, subscriptions)
            scan.connection.disconnect()
            forms = scan.forms
        finally:
            world.destroy()
    names = [*forms, "removes_one_apart", "removes_one"]
    deepest = max(depths)
    per_thousand: dict[str, float] | None = None
    if deepest > 0 and "0" in by_depth:
        per_thousand = {
            name: round((by_depth[str(deepest)][name] - by_depth["0"][name]) * 1000 / deepest, 3) for name in names
        }
    return {
        "broker_cpu_ms_per_subscription": by_depth,
        "broker_cpu_ms_per_subscription_per_1000_deep": per_thousand,
        "selector_bytes": {name: len(selector) for name, selector in forms.items()},
    }


@contextlib.contextmanager
def busy_neighbour(on: bool) -> Iterator[subprocess.Popen[bytes] | None]:
    """With ``on``, a process streaming 64 MB writes into memory for as long as the block runs (yielded; else None)."""
    if not on:
        yield None
        return
    streamer = subprocess.Popen(
        ["dd", "if=/dev/zero", "of=/dev/null", "bs=64M"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        yield streamer
    finally:
        streamer.terminate()
        try:
            streamer.wait(timeout=5)
        except subprocess.TimeoutExpired:
            streamer.kill()
            streamer.wait(timeout=5)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--depths", default="0,10000,30000", help="DR backlogs measured, ascending (0,10000,30000)")
    parser.add_argument("--subscriptions", type=int, default=200, help="subscriptions per form and depth (200)")
    parser.add_argument(
        "--busy-neighbour",
        action="store_true",
        help="stream memory on the other core throughout (dd from /dev/zero), as the sync bench's other processes do",
    )
    bench_results.add_arguments(parser, "selector_scan", repeat=2)
    args = parser.parse_args()
    depths = [int(d) for d in args.depths.split(",") if d.strip()]
    if not depths or any(d < 0 for d in depths):
        parser.error("--depths needs one or more non-negative counts")
    with busy_neighbour(args.busy_neighbour):
        result = bench_results.run_repeated(
            lambda: measure(depths, args.subscriptions),
            args.repeat,
            lambda line: print(line, file=sys.stderr, flush=True),
        )
    result["busy_neighbour"] = args.busy_neighbour
    return bench_results.finish("selector_scan", result, args)


if __name__ == "__main__":
    sys.exit(bench_results.exit_code(main))
