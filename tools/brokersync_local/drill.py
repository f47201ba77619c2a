"""``brokersync drill``: a switchover, failover or failback on the local pair, measured.

The drill runs on a world of its own (own ports, own state directory, started fresh),
because it kills brokers and rewrites their configurations. It deploys what ``sam deploy``
would (from template.yaml), starts sync (the relay worker and the real purge loop in moto's
Step Functions), drives a producer and a consumer on the primary, performs the mode by
starting the same state machines an operator starts from the console, moves the
applications to the new primary, and then counts, from what the applications saw and what
the brokers hold:

* ``lost``: confirmed by a broker, never consumed anywhere, and on no live broker;
* ``duplicates``: consumed on both brokers;
* ``in_bridge_at_kill``: copies still in the old primary's ``Q.DR`` outflow at the kill,
  read exactly from the dead broker's store (:mod:`forensics`), and those already on the
  wire (``on_the_wire_at_kill``, :func:`~brokersync_local.drill_traffic.copies_on_the_wire`);
* ``pending_purge_at_kill``: messages consumed on the primary whose copy was still on the
  DR broker at the kill (browsed the moment after it);
* ``duplicates_from_bridge`` (where the old primary comes back): duplicates whose copy was in
  the outflow at the kill; the rest were pending purge then;
* ``duplicates_on_the_wire``: duplicates whose copy reached DR only after the kill's browse;
  where the old primary never comes back, the rest were pending purge then;
* ``rto_s``: from the kill (or the moment applications were stopped, for a switchover) to
  the state machine's success, when applications can use the new primary.

On an active-active queue (``--queue`` naming one) a second producer, the DR region's front
end, writes to the DR broker throughout at the same rate as the first: the queue is produced
to in both regions and consumed on the primary. The counts are then also split by the broker
each message was produced on (``by_origin``).
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import shutil
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any, Literal

import boto3
import stomp
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError
from ulid import ULID

from brokersync.broker.statistics import StatisticsClient
from brokersync.broker.stomp import StompConnector
from brokersync.config import DEFAULT_PURGE_MAX_SECONDS, ENV_PURGE_MAX_SECONDS
from brokersync.exceptions import BrokerSyncError
from brokersync.failover.sync_control import SyncControl, SyncSwitches
from brokersync.ledger import dynamodb_ledger
from brokersync.ledger.base import LedgerStore
from brokersync.topology import CONSUMED_QUEUE, Topology, load_topology
from brokersync_cli.transitions import new_events
from brokersync_local.browsing import browse
from brokersync_local.deploy import LEDGER_TABLE, RELAY_RULE, deploy, register_brokers
from brokersync_local.drill_report import write_report
from brokersync_local.drill_risk import RiskSampler, peaks
from brokersync_local.drill_traffic import Consumer, Producer, TrafficLog, copies_on_the_wire, duplicates_between
from brokersync_local.errors import LocalWorldError
from brokersync_local.forensics import read_dead_store
from brokersync_local.interrupts import interrupts_ignored
from brokersync_local.sync import SyncWorkers
from brokersync_local.sync_worker import aws_environment
from brokersync_local.world import LocalWorld, WorldPorts

DrillMode = Literal[
    "switchover",
    "failover",
    "failback",
    "region-loss",
    "dr-region-loss",
    "round-trips",
    "new-dr-region",
    "move-queue",
    "move-then-region-loss",
    "move-then-switchover",
]
#: Modes that run on regions of their own (brokersync_local.regions).
REGION_MODES = ("region-loss", "dr-region-loss", "round-trips", "new-dr-region", "move-then-region-loss")
#: Modes that move one active-active queue's consumers on their own.
MOVE_MODES = ("move-queue", "move-then-region-loss", "move-then-switchover")
#: A drill never shares ports with `brokersync local up` or the test suite's pair.
DRILL_PORTS = WorldPorts(primary_openwire=61746, primary_stomp=61743, dr_openwire=62746, dr_stomp=62743, aws=5045)


#: Messages carried end to end before a drill's clock starts, and how long they may take.
WARM_UP_MESSAGES = 40
WARM_UP_TIMEOUT_S = 120.0
#: Nothing pending for this long counts as settled: a relay pass (1 s) and replication lag (1 s).
SETTLE_QUIET_S = 3.0
#: No progress for this long (the pending count not falling, the purged queue's dequeues not
#: rising) is all the purge can do now: copies that never arrive wait for the missing cutoff.
SETTLE_STALL_S = 30.0
#: The longest wait for the purge at the end: a rejoined region works through its outage's backlog.
SETTLE_TIMEOUT_S = 240.0
#: While keys stay pending, the purged broker is browsed for consumed messages at most this often
#: (a browse of tens of thousands of messages takes seconds of the broker's time).
SETTLE_BROWSE_EVERY_S = 10.0
#: A drill's browse must read the whole queue: tens of thousands of messages after a region loss.
BROWSE_TIMEOUT_S = 120.0
#: Pending keys counted at most while settling (the ledger bounds one read's pages anyway).
SETTLE_COUNT_LIMIT = 100_000
#: Consumed messages left on the old primary that a count looks up in the ledger, to say why.
LEFT_SAMPLE = 50
#: A tear-down step that takes longer than this says so: a slow exit after Ctrl-C is explained.
SLOW_TEAR_DOWN_S = 5.0
#: The drill's own calls to its AWS endpoint, bounded: botocore's defaults (60 s reads, five
#: attempts) would let a busy or dying endpoint hold a Ctrl-C'd tear-down for minutes.
CONTROL_CLIENT = Config(connect_timeout=5, read_timeout=10, retries={"total_max_attempts": 3, "mode": "standard"})


@dataclass
class DrillSettings:
    mode: DrillMode
    topology: Path
    state_dir: Path
    rate: float = 500.0
    duration: float = 30.0
    kill_at: float | None = None
    report: Path | None = None
    ports: WorldPorts = DRILL_PORTS
    seed: int | None = None
    execution_timeout_s: float = 180.0
    keep: bool = False
    #: Load on the new primary after the switch even when the switch overran ``duration``: a
    #: drill whose applications never used the new primary has not shown that it works.
    min_after_switch_s: float = 5.0
    #: The queue the applications use (default: the first sync queue keyed by correlation id).
    queue: str | None = None
    #: Seconds of traffic at ``rate`` carried end to end before the clock starts (0: only the
    #: few messages that show sync works). A broker just started spends its first seconds of
    #: load compiling its hot paths (measured: the JIT took half a core of the primary's first
    #: 12 s at 1,000 msg/s); the brokers an operator fails over from have run for days.
    warm_up_s: float = 0.0


@dataclass
class Timeline:
    started: float = field(default_factory=time.time)
    events: list[tuple[float, str]] = field(default_factory=list)
    #: Where each event is also told as it happens (a drill streams its phases).
    echo: Callable[[str], None] | None = None

    def mark(self, label: str) -> float:
        now = time.time()
        self.events.append((now - self.started, label))
        if self.echo is not None:
            self.echo(f"{now - self.started:7.1f}s  {label}")
        return now


class Drill:
    def __init__(self, settings: DrillSettings, out: Callable[[str], None] = print) -> None:
        self.settings = settings
        self.out = out
        self.world = LocalWorld(load_topology(settings.topology), settings.state_dir, settings.ports)
        self.topology: Topology = self.world.topology
        self.queue = drill_queue(self.topology, settings.queue, settings.mode)
        #: The DR region's producer on an active-active queue (None for a one-way queue).
        self.front_end: Producer | None = None
        self.connectors = {b.name: StompConnector(b.stomp) for b in self.topology.brokers}
        self.log = TrafficLog()
        self.timeline = Timeline(echo=out)
        self.facts: dict[str, Any] = {}
        #: Set when the run raises: the world's logs are kept beside the report before it is destroyed.
        self.failed = False
        #: For watchers (the demo's live view): what the drill is doing, and which broker the
        #: applications use now. ``ready`` is set once sync runs and ``ledger`` can be read.
        self.phase = "starting a fresh local pair"
        self.primary_now = self.topology.primary.name
        self.ready = threading.Event()
        #: What was at risk over time, sampled once sync runs (None before).
        self.risk: RiskSampler | None = None
        #: Made by the deployment; a Ctrl-C before it finds nothing to stop.
        self.sync: SyncControl | None = None
        self.workers = SyncWorkers(self.world, settings.topology)

    # -- set-up ---------------------------------------------------------------------------------
    def _pair_region(self) -> str | None:
        """The one region both brokers name: a pair in one region (one stack plays both roles)."""
        regions = {b.region for b in self.topology.brokers}
        return regions.pop() if len(regions) == 1 and None not in regions else None

    def _deploy(self) -> None:
        env = self.world.read_env()
        endpoint, region = env["aws"]["endpoint"], env["aws"]["region"]
        # A pair in one region deploys as `sam deploy --config-env single-region` does: into the
        # brokers' region, PeerRegion the same, so the stack's functions play both roles there.
        pair_region = self._pair_region()
        region = pair_region or region
        aws_environment(endpoint, region)
        ids = register_brokers(self.topology, endpoint, region)
        self.machines = deploy(
            self.topology,
            self.world.state_dir,
            endpoint,
            region,
            broker_ids=ids,
            # The purge function's own invocation length, not the local world's 5 s: each
            # invocation's end and the next one's start is a pause in the purge, and the demo's
            # lag and the drills' duplicates are to show the loop as deployed.
            overrides={"PurgeDrFunction": {ENV_PURGE_MAX_SECONDS: f"{DEFAULT_PURGE_MAX_SECONDS:g}"}},
            **({"role_region": pair_region, "peer_region": pair_region} if pair_region else {}),
        )
        self.sfn = boto3.client("stepfunctions", endpoint_url=endpoint, region_name=region, config=CONTROL_CLIENT)
        self.sync = SyncControl(
            SyncSwitches(RELAY_RULE, None, self.machines["PurgeLoopStateMachine"]),
            boto3.client("events", endpoint_url=endpoint, region_name=region, config=CONTROL_CLIENT),
            boto3.client("lambda", endpoint_url=endpoint, region_name=region, config=CONTROL_CLIENT),
            self.sfn,
        )
        self.ledger = dynamodb_ledger(LEDGER_TABLE, region=region, host=endpoint)
        self.workers.start(log=lambda _m: None, only=("relay",), role_region=pair_region)
        self.sync.start()
        self.ready.set()

    def _execute(self, machine: str, payload: dict[str, Any]) -> dict[str, Any]:
        arn = self.sfn.start_execution(
            stateMachineArn=self.machines[machine],
            name=f"drill-{self.settings.mode}-{ULID()}",  # execution names must be unique for 90 days
            input=json.dumps(payload),
        )["executionArn"]
        deadline = time.monotonic() + self.settings.execution_timeout_s
        while time.monotonic() < deadline:
            described = self.sfn.describe_execution(executionArn=arn)
            if described["status"] != "RUNNING":
                if described["status"] != "SUCCEEDED":
                    raise LocalWorldError(
                        f"{machine} {described['status']}: {described.get('error')}: {described.get('cause')}; "
                        + self._caught_error(arn)
                    )
                return json.loads(described.get("output") or "{}")
            time.sleep(0.25)
        raise LocalWorldError(
            f"{machine} did not finish within {self.settings.execution_timeout_s:.0f}s; {self._last_steps(arn)}"
        )

    def _history(self, arn: str) -> list[dict[str, Any]]:
        """The execution's events, every page read (as the CLI reads them), newest first.

        moto ignores ``reverseOrder``: the events are sorted here.
        """
        return sorted(new_events(self.sfn, arn, set()), key=lambda e: e.get("id", 0), reverse=True)

    def _caught_error(self, arn: str) -> str:
        """The error a failed execution's Catch put in ``$.error`` ("See $.error"), its message unwrapped;
        else its last steps. The drill's world, and the execution's history with it, is destroyed with it."""
        try:
            events = self._history(arn)
        except Exception as e:  # a diagnostic must never hide the failure it explains
            return f"history unreadable: {e!r}"
        for event in events:
            details = event.get("stateEnteredEventDetails") or {}
            try:
                state_input = json.loads(details.get("input") or "{}")
            except ValueError:
                continue
            error = state_input.get("error") if isinstance(state_input, dict) else None
            if isinstance(error, dict):
                cause = error.get("Cause") or ""
                with contextlib.suppress(ValueError, AttributeError):
                    cause = json.loads(cause).get("errorMessage", cause)
                return f"{details.get('name')} after {error.get('Error')}: {str(cause)[:1000]}"
        return _newest_steps(events, count=2)

    def _last_steps(self, arn: str) -> str:
        """The execution's last states and task outputs: where a hung transition waits, kept in the error
        because the drill's world (and its history) is destroyed with it."""
        try:
            return _newest_steps(self._history(arn))
        except Exception as e:  # a diagnostic must never hide the timeout it explains
            return f"history unreadable: {e!r}"

    # -- the run -----------------------------------------------------------------------------------
    def run(self) -> dict[str, Any]:
        saved = dict(os.environ)  # the drill points AWS clients at its own moto; the caller's stay as they were
        try:
            return self._run()
        finally:
            os.environ.clear()
            os.environ.update(saved)

    def _run(self) -> dict[str, Any]:
        self.world.destroy()  # a drill starts from empty brokers and an empty ledger
        self.world.up(log=self.out)
        try:
            self.phase = "deploying from template.yaml into moto"
            self._deploy()
            self.phase = "warming up: a few messages through copy, capture and purge"
            self.facts["warm_up_s"] = self._warm_up()
            if self.settings.warm_up_s > 0:
                self.phase = f"warming up: {self.settings.warm_up_s:g}s of traffic at {self.settings.rate:g} msg/s"
                traffic_s = self._warm_up(
                    messages=max(1, round(self.settings.rate * self.settings.warm_up_s)),
                    rate=self.settings.rate,
                    timeout_s=self.settings.warm_up_s + WARM_UP_TIMEOUT_S,
                )
                self.facts["warm_up_s"] = round(self.facts["warm_up_s"] + traffic_s, 3)
            self.risk = RiskSampler(
                self.topology, self.queue, self.connectors, self._risk_ledger, lambda: self.timeline.started
            )
            self.risk.start()
            return self._run_traffic()
        except BaseException:
            self.failed = True
            raise
        finally:
            self.phase = "stopping everything the drill started"
            with interrupts_ignored():
                for what, stop in (
                    ("the risk sampler", self._stop_risk),
                    ("the sync", self._stop_sync),
                    ("the world", self._stop_world),
                ):
                    began = time.monotonic()
                    try:
                        stop()
                    except Exception as e:
                        self.out(f"drill tear-down: {e}")
                    took = time.monotonic() - began
                    if took > SLOW_TEAR_DOWN_S:
                        self.out(f"drill tear-down: stopping {what} took {took:.1f}s")

    def _risk_ledger(self) -> LedgerStore | None:
        """The ledger replica the purge works in (None while it cannot be read)."""
        return self.ledger

    def _stop_risk(self) -> None:
        if self.risk is not None:
            self.risk.stop()

    def _write_report(self, result: dict[str, Any], old: str, new: str) -> str:
        """The HTML report (traffic, what was at risk, the windows); the peaks join the outcome."""
        samples = list(self.risk.samples) if self.risk is not None else []
        result |= peaks(samples)
        assert self.settings.report is not None
        return str(write_report(self.settings.report, result, self.log, self.timeline, old, new, samples))

    def _stop_sync(self) -> None:
        self.workers.stop(log=lambda _m: None)
        if self.sync is not None:
            self.sync.stop("drill finished")

    def _stop_world(self) -> None:
        if not self.settings.keep:
            if self.failed:  # its logs explain it, and its world is about to go
                self._keep_logs()
            self.world.destroy()

    def _keep_logs(self) -> None:
        """Copy the world's logs (functions, sync workers, brokers, moto) beside the report before the world goes."""
        if self.settings.report is None:
            return
        into = self.settings.report / f"logs-{self.settings.mode}"
        for log in self.world.state_dir.rglob("*.log"):
            if log.is_file() and "kahadb" not in log.parts:
                target = into / log.relative_to(self.world.state_dir)
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(log, target)
        self.out(f"drill failed: the world's logs are kept in {into}")

    def _warm_up(
        self, messages: int = WARM_UP_MESSAGES, timeout_s: float = WARM_UP_TIMEOUT_S, rate: float | None = None
    ) -> float:
        """Carry messages end to end (copied, consumed, captured, purged) before the clock starts.

        By default a few messages at their count per second; with ``rate``, ``messages`` at that
        rate (the settings' ``warm_up_s`` of traffic).

        A pair that has just started is not the steady state an operator fails over from: the
        functions' first invocations import and connect, the bridges form. Measured from a cold
        start, a kill in the first seconds counted that transient (keys pending for 10 s) as the
        purge's lag. Returns the seconds it took; raises when sync does not work at all.
        """
        primary, dr = self.topology.primary.name, self.topology.dr.name
        log = TrafficLog()
        producer = Producer(self.queue, log, rate or float(messages))
        consumer = Consumer(self.queue, log)
        started = time.monotonic()
        deadline = started + timeout_s
        for client in (producer, consumer):
            client.move_to(primary, self.connectors[primary])
            client.start()
        try:
            while len(log.confirmed) < messages and time.monotonic() < deadline:
                time.sleep(0.1)
            producer.stop()
            # Every send, not only the confirmed: one still waiting for its receipt is stored all
            # the same, and left on the queue it would reach the drill's own consumer.
            sent = set(log.sent)
            while not sent <= set(log.consumed) and time.monotonic() < deadline:
                time.sleep(0.1)
            keys = set(log.confirmed) | (sent & set(log.consumed))
        finally:
            producer.stop()
            consumer.stop()
        if not keys:
            raise LocalWorldError(f"no warm-up message was confirmed by {primary} within {timeout_s:.0f}s")
        window = timedelta(hours=1)
        # The last consumed stand for the rest: one ledger read per key of a long warm-up would
        # take longer than the warm-up (the DR browse below still covers every key).
        consumed = sorted(keys & set(log.consumed), key=lambda key: log.consumed[key][-1][1])
        latest = consumed[-WARM_UP_MESSAGES:] or sorted(keys)
        while time.monotonic() < deadline:
            captured = all(self.ledger.was_consumed(self.queue, key, window) for key in latest)
            if captured and not self.ledger.pending(self.queue, limit=1) and not keys & self._keys_on(dr):
                return round(time.monotonic() - started, 3)
            time.sleep(0.5)
        raise LocalWorldError(
            f"sync did not carry {messages} warm-up messages end to end within {timeout_s:.0f}s "
            f"(consumed {len(set(log.consumed) & keys)} of {len(keys)} on {primary}): see the drill's logs"
        )

    def _start_applications(self, broker: str) -> tuple[Producer, Consumer]:
        """The drill's producer and consumer, running on ``broker``; the timeline starts with them."""
        producer = Producer(self.queue, self.log, self.settings.rate)
        consumer = Consumer(self.queue, self.log)
        for client in (producer, consumer):
            client.move_to(broker, self.connectors[broker])
            client.start()
        if self.topology.queue(self.queue).copies_both_ways:
            dr = self.topology.dr.name
            self.front_end = Producer(self.queue, self.log, self.settings.rate, name=f"drill-producer-{dr}")
            self.front_end.move_to(dr, self.connectors[dr])
            self.front_end.start()
        self.timeline = Timeline(echo=self.out)
        self.applications = (producer, consumer)
        return producer, consumer

    def _run_traffic(self) -> dict[str, Any]:
        settings = self.settings
        old, new = self.topology.primary.name, self.topology.dr.name
        producer, consumer = self._start_applications(old)
        switch_at = self._switch_at()
        self.phase = f"steady load on {old}, {settings.mode} at {switch_at:.0f}s"
        self.out(
            f"drill {settings.mode}: {settings.rate:.0f} msg/s for {settings.duration:.0f}s, switch at {switch_at:.1f}s"
        )
        self._sleep_until(switch_at)

        self.phase = f"{settings.mode} running"
        if settings.mode == "move-queue":
            # Only the queue's consumers move: the producers keep writing to both brokers, the
            # pair's roles stay, and so does every other queue.
            self._move_queue(consumer)
        else:
            if settings.mode == "switchover":
                self._switchover(producer, consumer)
            else:
                self._failover()
            self._applications_to_new_primary(producer, consumer, new)

        remaining = self.timeline.started + settings.duration - time.time()
        time.sleep(max(settings.min_after_switch_s, remaining))
        self._after_switch()
        return self._wind_down(producer, consumer, old, new)

    def _sleep_until(self, at_s: float) -> None:
        """Until ``at_s`` seconds into the drill (at once when that is past)."""
        time.sleep(max(0.0, self.timeline.started + at_s - time.time()))

    def _applications_to_new_primary(self, producer: Producer, consumer: Consumer, new: str) -> None:
        """The drill's producer and consumer move to ``new`` once it is primary."""
        for client in (producer, consumer):
            client.move_to(new, self.connectors[new])
        self.primary_now = new
        self.timeline.mark("applications on the new primary")
        self.phase = f"load on the new primary {new}"

    def _wind_down(self, producer: Producer, consumer: Consumer, old: str, new: str) -> dict[str, Any]:
        """Every producer stopped, the consumer drains ``new``, and the drill counts."""
        producer.pause()
        if self.front_end is not None:
            self.front_end.pause()
        self.timeline.mark("producer stopped")
        self.phase = f"draining {new}, then counting"
        self._drain(consumer, new)
        self.timeline.mark("consumer drained the new primary")
        producer.stop()
        consumer.stop()
        if self.front_end is not None:
            self.front_end.stop()
        return self._outcome(old, new)

    def _after_switch(self) -> None:
        """What the mode does once the applications run on the new primary (a failback rejoins the old)."""
        if self.settings.mode == "failback":
            self._failback()

    def _failback(self) -> None:
        started = self.timeline.mark("failback started")
        result = self._execute("FailbackStateMachine", {})
        self.facts["failback_s"] = round(self.timeline.mark("failback succeeded") - started, 3)
        self.facts["failback_result"] = result

    def _switch_at(self) -> float:
        settings = self.settings
        if settings.kill_at is not None:
            return settings.kill_at
        if settings.mode in ("switchover", "move-queue"):  # planned
            return settings.duration / 2
        return random.Random(settings.seed).uniform(0.4, 0.7) * settings.duration

    def _switchover(self, producer: Producer, consumer: Consumer) -> None:
        old, new = self.topology.primary.name, self.topology.dr.name
        producer.pause()
        consumer.pause()
        if self.front_end is not None:  # a planned switch stops every producer of the queue
            self.front_end.pause()
        quiesced = self.timeline.mark("applications stopped on the old primary")
        outflow = StatisticsClient(self.connectors[old]).queue_stats([self.topology.dr_name(self.queue)])
        self.facts["in_bridge_at_kill"] = sum(s.size for s in outflow.values())
        on_dr = self._keys_on(new)
        self.facts["pending_purge_at_kill"] = len(self.log.consumed_on(old) & on_dr)
        self.facts["execution"] = self._execute("FailoverStateMachine", {"mode": "SWITCHOVER"})
        self.facts["rto_s"] = round(self.timeline.mark("switchover succeeded") - quiesced, 3)
        if self.front_end is not None:
            self.front_end.move_to(new, self.connectors[new])

    def _move_queue(self, consumer: Consumer) -> None:
        """A planned move of the queue's consumption under load: its consumers stop on the old side, the
        move waits for the drain and flips the queue's active side, and they start on the new side;
        the producers never stop."""
        old, new = self.topology.primary.name, self.topology.dr.name
        consumer.pause()
        quiesced = self.timeline.mark(f"consumers of {self.queue} stopped on {old}")
        self.facts["pending_purge_at_kill"] = len(self.log.consumed_on(old) & self._keys_on(new))
        self.facts["in_bridge_at_kill"] = 0
        request = {"queue": self.queue, "to": new, "timeoutSeconds": int(self.settings.execution_timeout_s)}
        self.facts["execution"] = self._execute("MoveQueueStateMachine", request)
        self.facts["rto_s"] = round(self.timeline.mark("queue move succeeded") - quiesced, 3)
        self.facts["move_drain_s"] = move_drain_s(self.facts["execution"])
        consumer.move_to(new, self.connectors[new])
        self.timeline.mark(f"consumers of {self.queue} on {new}")
        self.phase = f"{self.queue} consumed on {new}, produced on both"

    def _failover(self) -> None:
        old, new = self.topology.primary.name, self.topology.dr.name
        broker = self.world.brokers["primary"]
        broker.pid = self.world.read_env()["primary"]["pid"]
        broker.kill()
        killed = self.timeline.mark("old primary killed (SIGKILL)")
        # Those of these the applications consumed on the old primary are the duplicates a failover
        # may cause (``pending_purge_at_kill``, counted at the end: the consumer may still ack a
        # frame it was handed before the kill).
        self.facts["on_dr_at_kill"] = on_dr = self._keys_on(new)
        self.facts["execution"] = self._execute("FailoverStateMachine", {"mode": "FAILOVER"})
        self.facts["rto_s"] = round(self.timeline.mark("failover succeeded") - killed, 3)
        wire = self._copies_on_the_wire(old, on_dr, self._keys_on(new))
        store = read_dead_store(broker.data_dir, [self.topology.dr_name(self.queue)])
        self._in_the_bridge(set(store[self.topology.dr_name(self.queue)]), wire)

    def _copies_on_the_wire(self, lost: str, at_kill: set[str], after_switch: set[str]) -> set[str]:
        with self.log.lock:
            sent_to = dict(self.log.sent_to)
        return copies_on_the_wire(lost, at_kill, after_switch, sent_to)

    def _in_the_bridge(self, in_outflow: set[str], on_the_wire: set[str]) -> None:
        """Record the copies in the lost broker's bridge at the kill: in its outflow, or already on the wire."""
        self.facts["in_bridge_keys"] = in_outflow | on_the_wire
        self.facts["in_bridge_at_kill"] = len(self.facts["in_bridge_keys"])
        self.facts["on_the_wire_keys"] = on_the_wire

    def _drain(self, consumer: Consumer, broker: str, idle_s: float = 3.0, timeout_s: float = 120.0) -> None:
        deadline = time.monotonic() + timeout_s
        statistics = StatisticsClient(self.connectors[broker])
        while time.monotonic() < deadline:
            idle = time.monotonic() - consumer.last_message_at > idle_s
            if idle and statistics.queue_stats([self.queue])[self.queue].size == 0:
                break
            time.sleep(0.2)
        consumer.pause()

    def _settle_purge(
        self,
        timeout_s: float = SETTLE_TIMEOUT_S,
        quiet_s: float = SETTLE_QUIET_S,
        stall_s: float = SETTLE_STALL_S,
        purged_on: str | None = None,
    ) -> int:
        """Pending keys once the purge has caught up, or at the timeout; how long it took goes in the facts.

        A moment with nothing pending is not the end: the last consumptions may still be on
        their way into the ledger (the relay's next pass, replication to the DR replica), so
        nothing pending must hold for ``quiet_s``. Keys still pending are waited for as long as
        the purge makes progress: after a region loss the rejoined region's purge works
        through the whole outage's consumption, which on two shared cores takes minutes, and
        counting before it finished would report its backlog as consumed messages left on DR.
        Progress is the pending count falling, or the queue's dequeue counter rising on
        ``purged_on`` (the broker the purge removes from): the ledger reads a bounded window of
        pending keys, so under a large backlog the count can stay flat while the purge removes
        thousands. Neither for ``stall_s`` is what the purge cannot find now.

        Nothing pending is not enough either when ``purged_on`` is known: a consumed message
        may still be there although its entry is marked (a redelivered late copy, which the
        late-copy sweep removes on its own interval), or not yet pending (its capture still on
        its way to this replica). So quiet also needs no consumed message on ``purged_on``,
        and such messages disappearing counts as progress.

        Keys can stay pending with nothing left to remove: a region loss leaves entries for
        messages consumed on both sides (the duplicates), and those wait for the missing
        cutoff. When a browse of ``purged_on`` finds no pending key and no consumed message
        there, and no copy waits in the peer's outflow to arrive, nothing the purge could
        still do changes the counts: that too ends the wait once it holds for ``quiet_s``,
        rather than after ``stall_s`` of no progress.
        """
        started = time.monotonic()
        deadline = started + timeout_s
        quiet_since: float | None = None
        lowest: int | None = None
        lowest_left: int | None = None
        left: int | None = 0
        left_checked_at = -SETTLE_BROWSE_EVERY_S
        #: The pending count at a browse that found nothing the purge could still remove (None: not so).
        idle_at_pending: int | None = None
        dequeued: int | None = None
        progressed_at = started
        while True:
            entries = self.ledger.pending(self.queue, limit=SETTLE_COUNT_LIMIT)
            pending = len(entries)
            idle = pending > 0 and idle_at_pending == pending
            every_s = SETTLE_BROWSE_EVERY_S if pending and not idle else quiet_s / 2
            if purged_on and time.monotonic() - left_checked_at >= every_s:
                seen = self._left_on(purged_on, {entry.key for entry in entries})
                left, findable = seen if seen is not None else (None, None)
                left_checked_at = time.monotonic()
                nothing_to_find = pending > 0 and (left, findable) == (0, 0) and self._copies_to(purged_on) == 0
                idle_at_pending = pending if nothing_to_find else None
                idle = nothing_to_find
            removed = self._dequeued(purged_on) if (pending or left) and purged_on else None
            now = time.monotonic()
            # A browse cut short (left None) has not shown that nothing consumed is left.
            quiet_since = (quiet_since or now) if (pending == 0 and left == 0) or idle else None
            if lowest is None or pending < lowest:
                lowest, progressed_at = pending, now
            if left and (lowest_left is None or left < lowest_left):
                lowest_left, progressed_at = left, now
            if removed is not None and (dequeued is None or removed > dequeued):
                dequeued, progressed_at = removed, now
            quiet = quiet_since is not None and now - quiet_since >= quiet_s
            stalled = (pending > 0 or bool(left)) and now - progressed_at >= stall_s
            if quiet or stalled or now >= deadline:
                self.facts["purge_settle_s"] = round(now - started, 1)
                self.facts["purge_settle_end"] = (
                    ("nothing left to remove" if idle else "caught up")
                    if quiet
                    else ("stalled" if stalled else "timed out")
                )
                return pending
            time.sleep(1.0 if pending and not idle else 0.5)

    def _why_left(self, keys: set[str], redelivered: set[str] | None) -> dict[str, Any]:
        """For a count that found consumed messages left: what the ledger says of a sample of them.

        Held in the ledger but not pending: marked purged, so a copy arrived after its removal
        (the late-copy sweep's to remove). Pending: the purge had not reached it. Neither: the
        consumption was never captured (or not yet replicated here). A failing drill test
        prints this, so one failure names which of the three it was. ``redelivered``: the keys whose
        copy the count's browse found redelivered (None: not browsed).
        """
        sample = sorted(keys)[:LEFT_SAMPLE]
        traffic = self._traffic_of(sample, redelivered)
        try:
            pending = {p.key for p in self.ledger.pending(self.queue, limit=SETTLE_COUNT_LIMIT, read_only=True)}
            in_ledger = [k for k in sample if self.ledger.was_consumed(self.queue, k)]
        except BrokerSyncError as e:
            return {"sample": sample[:5], "ledger_unreadable": str(e), **traffic}
        return {
            "sampled": len(sample),
            "in_ledger": len(in_ledger),
            "pending": len(set(sample) & pending),
            "sample": sample[:5],
            "purge_loop_running": self._purge_loop_running(),
            **traffic,
            "relay": self._relay_totals(),
        }

    def _why_pending(self, on_old: set[str], on_new: set[str]) -> dict[str, Any]:
        """For a settle that ended with keys pending: what a sample of them were.

        Pending with nothing of theirs left to remove is a ledger entry the purge will only
        resolve at the missing cutoff. Whether the drill sent them, where they were produced and
        consumed and when, when the ledger says they were consumed (seconds into the drill) and
        where a copy is now name which path left them, so one failure explains itself.
        """
        try:
            entries = self.ledger.pending(self.queue, limit=SETTLE_COUNT_LIMIT, read_only=True)
        except BrokerSyncError as e:
            return {"ledger_unreadable": str(e)}
        sample = entries[:LEFT_SAMPLE]
        keys = [entry.key for entry in sample]
        started_ms = self.timeline.started * 1000
        ledger_times = [(entry.consumed_at_ms - started_ms) / 1000 for entry in sample]
        with self.log.lock:
            sent = sum(1 for key in keys if key in self.log.sent)
        return {
            "pending": len(entries),
            "sampled": len(sample),
            "sent_by_drill": sent,
            "on_old_primary": len(on_old.intersection(keys)),
            "on_new_primary": len(on_new.intersection(keys)),
            "ledger_consumed_at_s": [round(min(ledger_times), 1), round(max(ledger_times), 1)] if sample else None,
            "sample": keys[:5],
            **self._traffic_of(keys, None),
        }

    def _relay_totals(self) -> dict[str, int] | None:
        """The relay workers' running totals (every region's): what they captured of the drill
        queue, parked, drained as the purge's own removals, and the audit's lost advisories (None: no workers)."""
        workers: SyncWorkers | None = getattr(self, "workers", None)
        if workers is None:
            return None
        statuses = workers.region_statuses("relay")
        totals = {
            name: sum(int(status.get(name, 0)) for status in statuses)
            for name in ("parked", "passive", "passive_deferred", "lost", "failed_passes", "unexpected_errors")
        }
        updated = [float(s["updated"]) for s in statuses if "updated" in s]
        return {
            "captured": sum(int(s.get("by_queue", {}).get(self.queue, 0)) for s in statuses),
            **totals,
            # A worker that died or hangs stops writing its status: how long since the stalest wrote
            # (None: none has written one).
            "workers_alive": sum(1 for s in statuses if workers.alive(s.get("pid"))),
            "stalest_status_s": round(time.time() - min(updated), 1) if updated else None,
            "last_errors": [s["last_error"] for s in statuses if s.get("last_error")],
        }

    def _traffic_of(self, sample: list[str], redelivered: set[str] | None) -> dict[str, Any]:
        """What the drill's own log says of ``sample``: where each was produced and consumed, and
        when (seconds into the drill); and how many of their copies are redelivered.

        Redelivered copies are the late-copy sweep's; first deliveries consumed after the move
        point at capture (the relay) or at a key given up on too early.
        """
        with self.log.lock:
            consumed = {k: list(self.log.consumed.get(k, [])) for k in sample}
            origin = {k: self.log.sent_to.get(k, "?") for k in sample}
        times = [at - self.timeline.started for entries in consumed.values() for _, at in entries]
        return {
            "consumed_on": dict(Counter("+".join(sorted({b for b, _ in e})) for e in consumed.values())),
            "produced_on": dict(Counter(origin.values())),
            "consumed_at_s": [round(min(times), 1), round(max(times), 1)] if times else None,
            "redelivered_here": len(redelivered.intersection(sample)) if redelivered is not None else None,
        }

    def _purge_loop_running(self) -> bool | None:
        """Whether this region's purge loop runs now (None: it could not be asked)."""
        control: SyncControl | None = getattr(self, "sync", None)
        if control is None:
            return None
        try:
            return control.purge_loop_running()
        except (BrokerSyncError, BotoCoreError, ClientError):
            return None

    def _left_on(self, broker: str, pending: set[str]) -> tuple[int, int] | None:
        """Of the messages on ``broker``: how many the drill's consumers took, and how many have a
        pending key (None: it cannot be browsed now)."""
        with self.log.lock:
            consumed = set(self.log.consumed)
        try:
            on_broker = self._keys_on(broker)
        except (BrokerSyncError, LocalWorldError):  # a browse cut short proves nothing either way
            return None
        return len(on_broker & consumed), len(on_broker & pending)

    def _copies_to(self, broker: str) -> int | None:
        """Copies of the drill queue waiting in the peer's outflow to ``broker`` (None: not readable now)."""
        target = next((b for b in self.topology.brokers if b.name == broker), None)
        if target is None:
            return None
        peer, outflow = self.topology.peer(target).name, self.topology.copy_name(self.queue, target)
        if peer not in self.connectors:
            return None
        try:
            stats = StatisticsClient(self.connectors[peer]).queue_stats([outflow]).get(outflow)
        except BrokerSyncError:
            return None
        return stats.size if stats is not None else 0

    def _advisories_on(self, broker: str) -> dict[str, int] | None:
        """``broker``'s advisory queue: what reached it, what the relay took, who reads it (None: unreadable).

        A count that finds consumed messages left with nothing pending asks this of the broker
        they were consumed on: advisories never enqueued point at the broker's configuration,
        enqueued and waiting with no consumer at the relay.
        """
        try:
            stats = StatisticsClient(self.connectors[broker]).queue_stats([CONSUMED_QUEUE]).get(CONSUMED_QUEUE)
        except BrokerSyncError:
            return None
        if stats is None:
            return {"enqueued": 0, "dequeued": 0, "waiting": 0, "consumers": 0}
        return {
            "enqueued": stats.enqueue_count,
            "dequeued": stats.dequeue_count,
            "waiting": stats.size,
            "consumers": stats.consumer_count,
        }

    def _dequeued(self, broker: str) -> int | None:
        """The drill queue's dequeue counter on ``broker`` (None when it cannot be read now)."""
        try:
            stats = StatisticsClient(self.connectors[broker]).queue_stats([self.queue]).get(self.queue)
        except BrokerSyncError:
            return None
        return stats.dequeue_count if stats is not None else None

    def _keys_on(self, broker: str) -> set[str]:
        """Correlation ids of the messages on the drill's queue on ``broker`` (browsed, not consumed)."""
        return _keys_of(self._frames_on(broker))

    def _frames_on(self, broker: str) -> list[stomp.utils.Frame]:
        """The messages on the drill's queue on ``broker``, browsed (nothing consumed)."""
        return browse(self.connectors[broker], self.queue, timeout_s=BROWSE_TIMEOUT_S)

    # -- counting ---------------------------------------------------------------------------------
    def _outcome(self, old: str, new: str) -> dict[str, Any]:
        """The counts, and the report over all of them (a subclass's included)."""
        result = self._counts(old, new)
        if self.settings.report:
            result["report"] = self._write_report(result, old, new)
        return result

    def _purged_broker(self, old: str, new: str) -> str:
        """The broker the drill queue's purge removes from at the end: the old primary, now DR."""
        return old

    def _old_primary_alive(self) -> bool:
        """Whether the old primary can be read at the end (a failover killed it)."""
        return self.settings.mode != "failover"

    def _counts(self, old: str, new: str) -> dict[str, Any]:
        settings = self.settings
        if "on_dr_at_kill" in self.facts:
            self.facts["pending_purge_at_kill"] = len(self.log.consumed_on(old) & self.facts["on_dr_at_kill"])
        old_alive = self._old_primary_alive()
        pending_after = self._settle_purge(purged_on=self._purged_broker(old, new)) if old_alive else None
        with self.log.lock:
            produced = set(self.log.confirmed)
            consumed = self.log.brokers_consumed_on()
        on_new = self._keys_on(new)
        # One browse of the old primary: its keys count, and which are redelivered explains what is left.
        old_frames = self._frames_on(old) if old_alive else []
        on_old = _keys_of(old_frames)
        consumed_any = set(consumed)
        duplicates = duplicates_between(consumed, old, new)
        lost = produced - consumed_any - on_new - on_old
        result: dict[str, Any] = {
            "mode": settings.mode,
            "produced": len(produced),
            "consumed_primary": sum(1 for b in consumed.values() if old in b),
            "consumed_dr": sum(1 for b in consumed.values() if new in b),
            "lost": len(lost),
            "duplicates": len(duplicates),
            "rto_s": self.facts.get("rto_s"),
            "in_bridge_at_kill": self.facts.get("in_bridge_at_kill"),
            "pending_purge_at_kill": self.facts.get("pending_purge_at_kill"),
            "rate": settings.rate,
            "duration_s": settings.duration,
            "unconfirmed_sends": len(set(self.log.sent) - produced),
            "left_on_new_primary": len(on_new),
            "pair_region": self._pair_region(),  # None: two regions
            "warm_up_s": self.facts.get("warm_up_s"),
        }
        if "in_bridge_keys" in self.facts:
            wire = self.facts.get("on_the_wire_keys", set())
            result["on_the_wire_at_kill"] = len(wire)
            # Not on the survivor at the kill, so not pending purge then: the only duplicates a
            # lost broker that never returns causes beyond that bound. An outflow copy the
            # survivor already held at the kill (its ACK not yet back) is pending purge.
            result["duplicates_on_the_wire"] = len(duplicates & wire)
            result["lost_not_in_bridge"] = len(lost - self.facts["in_bridge_keys"])
            # A consumed message's copy still in the bridge reaches the new primary when the old
            # one comes back, too late for any purge: a duplicate no purge could have prevented.
            result["duplicates_from_bridge"] = len(duplicates & self.facts["in_bridge_keys"])
        result["queue"] = self.queue
        relay = self._relay_totals()
        # The audit's AdvisoriesLost over the drill: dequeues a broker counted that its relay never
        # read. A switchover drains every relay before its reboots, so it must leave none.
        result["advisories_lost"] = relay["lost"] if relay is not None else None
        # What the relay function would have raised in AWS (its Errors alarm); the worker retried.
        result["relay_unexpected_errors"] = relay["unexpected_errors"] if relay is not None else None
        if "move_drain_s" in self.facts:
            result["move_drain_s"] = self.facts["move_drain_s"]
        if self.front_end is not None:
            with self.log.lock:
                origin = dict(self.log.sent_to)
            result["by_origin"] = {
                broker: {
                    "produced": sum(1 for k in produced if origin.get(k) == broker),
                    "lost": sum(1 for k in lost if origin.get(k) == broker),
                    "duplicates": sum(1 for k in duplicates if origin.get(k) == broker),
                    "consumed_primary": sum(1 for k, b in consumed.items() if old in b and origin.get(k) == broker),
                }
                for broker in (old, new)
            }
        if old_alive:  # the old primary is the DR broker now: what was consumed must be gone from it
            left = on_old & consumed_any
            result["already_consumed_on_old_primary"] = len(left)
            if left:
                redelivered = _keys_of(f for f in old_frames if f.headers.get("redelivered") == "true")
                result["left_on_old_primary"] = self._why_left(left, redelivered) | {
                    "advisories_on_new_primary": self._advisories_on(new)
                }
            result["pending_purge_after"] = pending_after
            if pending_after:
                result["pending_after_why"] = self._why_pending(on_old, on_new)
            result["purge_settle_s"] = self.facts.get("purge_settle_s")
            result["purge_settle_end"] = self.facts.get("purge_settle_end")
        if settings.mode in ("failback", "region-loss"):
            result["recoverable_on_old_primary"] = len(on_old - consumed_any)
            result["failback_s"] = self.facts.get("failback_s")
            # Consumed on the old primary just before it died, held again after its restart.
            catch_up = (self.facts.get("failback_result") or {}).get("lastCatchUp") or {}
            result["removed_at_failback_heads"] = catch_up.get("removedAtHead")
        return result


def _keys_of(frames: Iterable[stomp.utils.Frame]) -> set[str]:
    """The correlation ids (the drill's keys) of browsed messages."""
    return {f.headers.get("correlation-id", "") for f in frames}


def _newest_steps(events: list[dict[str, Any]], count: int = 6) -> str:
    """The last ``count`` states entered or exited in ``events`` (newest first), with their output or input."""
    steps = []
    for event in events:
        details = event.get("stateEnteredEventDetails") or event.get("stateExitedEventDetails")
        if details:
            output = str(details.get("output") or details.get("input") or "")[-400:]  # the newest result last
            steps.append(f"{event['type']} {details.get('name')}: {output}")
        if len(steps) >= count:
            break
    return "last steps, newest first: " + " | ".join(steps) if steps else "no state entered"


def move_figures(output: dict[str, Any]) -> dict[str, Any]:
    """A queue move's last drain status (``$.status.Payload``), from its output."""
    return ((output.get("status") or {}).get("Payload")) or {}


def move_drain_s(output: dict[str, Any]) -> float | None:
    """How long a queue move waited for the old side to drain (its last DrainStatus), from its output."""
    return move_figures(output).get("waitedSeconds")


def drill_queue(topology: Topology, name: str | None, mode: str = "switchover") -> str:
    """The queue a drill's applications use: ``name``, or the first sync queue keyed by correlation id (the
    first active-active one when there is no such sync queue).

    The drill counts messages by the ULID correlation ids its producers stamp, and loss and
    duplicates only mean something on a queue whose consumption is removed from the other broker.
    """
    if name is None and mode in MOVE_MODES:
        name = next((q.name for q in topology.queues if q.copies_both_ways), None)
        if name is None:
            raise LocalWorldError(f"a {mode} drill needs an active-active queue (examples/active-active.yaml)")
    if name is None:
        usable = [q for q in topology.queues if q.captures_consumed and q.sync_key == "correlation-id"]
        if not usable:
            raise LocalWorldError(
                "a drill needs a sync or active-active queue keyed by correlation-id, and the topology has none"
            )
        return next((q for q in usable if q.mode == "sync"), usable[0]).name
    try:
        queue = topology.queue(name)
    except KeyError:
        raise LocalWorldError(f"--queue {name}: not a queue of the topology") from None
    if not queue.captures_consumed or queue.sync_key != "correlation-id":
        raise LocalWorldError(
            f"--queue {name}: a drill needs a sync or active-active queue keyed by correlation-id "
            f"(this one is {queue.mode}, keyed by {queue.sync_key})"
        )
    if mode in MOVE_MODES and not queue.copies_both_ways:
        raise LocalWorldError(
            f"--queue {name}: only an active-active queue moves on its own (this one is {queue.mode})"
        )
    return name


def run_drill(settings: DrillSettings, out: Callable[[str], None] = print) -> dict[str, Any]:
    if settings.mode in REGION_MODES:  # they subclass Drill, so they are imported here
        from brokersync_local.dr_region_drill import DrRegionLossDrill  # noqa: PLC0415
        from brokersync_local.new_dr_region_drill import NewDrRegionDrill  # noqa: PLC0415
        from brokersync_local.queue_region_drill import MoveThenRegionLossDrill  # noqa: PLC0415
        from brokersync_local.region_drill import RegionLossDrill  # noqa: PLC0415
        from brokersync_local.round_trip_drill import RoundTripDrill  # noqa: PLC0415

        drills = {
            "region-loss": RegionLossDrill,
            "dr-region-loss": DrRegionLossDrill,
            "round-trips": RoundTripDrill,
            "new-dr-region": NewDrRegionDrill,
            "move-then-region-loss": MoveThenRegionLossDrill,
        }
        return drills[settings.mode](settings, out).run()
    if settings.mode == "move-then-switchover":
        from brokersync_local.move_switchover_drill import MoveThenSwitchoverDrill  # noqa: PLC0415

        return MoveThenSwitchoverDrill(settings, out).run()
    return Drill(settings, out).run()
