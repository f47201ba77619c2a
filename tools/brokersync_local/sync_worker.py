"""Background relay and purge loops for the local pair (``brokersync sync start``).

Each worker runs the same library code the Lambda functions run (relay, audit, purge), in
a loop, against the local brokers and moto's DynamoDB, and writes its running totals to
``sync-<worker>.json`` in the state directory so ``brokersync sync status`` can show them.
SIGTERM stops a worker after its current pass; nothing unwritten is acked on the way out.

Stand-in for the relay's EventBridge schedule: like the scheduled function, each pass reads
the role parameter first (after a failover the primary is the other broker), and the relay
worker idles while the relay rule is DISABLED (a failover's StopSync disables it).
"""

from __future__ import annotations

import argparse
import contextlib
import faulthandler
import functools
import json
import logging
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import boto3
from botocore.exceptions import BotoCoreError, ClientError

from brokersync.broker.statistics import StatisticsClient
from brokersync.broker.stomp import StompConnector
from brokersync.capture.audit import CaptureAudit
from brokersync.capture.relay import AdvisoryRelay, RelayReport
from brokersync.capture.writer import LedgerWriter
from brokersync.exceptions import BrokerSyncError
from brokersync.ledger import Ledger, dynamodb_ledger
from brokersync.ledger.control import ControlRecords, control_model
from brokersync.metrics import RecordingMetrics
from brokersync.purge.late_copies import LateCopySweep
from brokersync.purge.remover import SelectorRemover
from brokersync.purge.service import PurgeReport, PurgeService
from brokersync.role_gate import RoleGate, Standing
from brokersync.roles import RoleStore, apply_roles
from brokersync.sides import Duty, capture_duties, in_region, purge_duties, run_each
from brokersync.topology import Topology, load_topology
from brokersync_local.deploy import LEDGER_TABLE, RELAY_RULE
from brokersync_local.world import localise, ports_from_env

logger = logging.getLogger("brokersync.sync")
#: How often a working pass re-reads the role record (the functions' gate polls every 2 s).
GATE_POLL_S = 1.0


def aws_environment(endpoint: str, region: str) -> None:
    """Point every AWS client of this process at moto."""
    os.environ.update(
        {
            "AWS_ENDPOINT_URL": endpoint,
            "AWS_DEFAULT_REGION": region,
            "AWS_ACCESS_KEY_ID": "local",
            "AWS_SECRET_ACCESS_KEY": "local",
        }
    )


def local_ledger(env: dict[str, Any]) -> Ledger:
    aws_environment(env["aws"]["endpoint"], env["aws"]["region"])
    return dynamodb_ledger(LEDGER_TABLE, region=env["aws"]["region"], host=env["aws"]["endpoint"])


def _publish(status_file: Path, totals: dict[str, Any], **now: Any) -> None:
    """The worker's running totals, when they were written and by which process, for ``sync status``."""
    _write_status(status_file, {**totals, **now, "updated": time.time(), "pid": os.getpid()})


def _write_status(path: Path, status: dict[str, Any]) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(status), encoding="utf-8")
    tmp.replace(path)


class Switches:
    """The role record and the relay rule in moto, read once per pass as the functions do.

    ``role_region`` is the region this worker stands in for (the two-region world runs a relay
    worker per region, as each stack has its scheduled relay): it reads the role record in its
    own region's replica and in the peer's, and acts only while the primary is in its region.
    None plays every role (the one-endpoint world).
    """

    def __init__(self, base: Topology, env: dict[str, Any], role_region: str | None = None) -> None:
        self.base = base
        self.role_region = role_region
        region, endpoint = role_region or env["aws"]["region"], env["aws"]["endpoint"]
        peers = [
            ControlRecords(control_model(LEDGER_TABLE, other, endpoint, peer=True))
            for other in env.get("regions", {})
            if role_region and other != role_region
        ]
        self.roles = RoleStore(ControlRecords(control_model(LEDGER_TABLE, region, endpoint)), peers)
        self.events = boto3.client("events", region_name=region)

    def topology(self) -> Topology:
        return self.roles.current(self.base)

    def sync_running(self) -> bool:
        """False between a transition's StopSync and StartSync (the role record), in every region."""
        return self.roles.assignment(self.base).sync_running

    def relay_enabled(self) -> bool:
        try:
            rule_enabled = self.events.describe_rule(Name=RELAY_RULE)["State"] == "ENABLED"
        except self.events.exceptions.ResourceNotFoundException:
            rule_enabled = True  # not deployed (plain `sync start`): always on
        return rule_enabled and self.sync_running()


def _count_failure(totals: dict[str, Any], error: BaseException, *, expected: bool = True) -> None:
    """Count a failed pass in the worker's status (``brokersync sync status``, a drill's diagnosis).

    ``expected``: a failure the library names (a broker rebooting, the ledger throttled), which
    transitions cause on purpose. Any other is a bug the function would raise in AWS too (its
    Errors alarm), so it is counted apart, and a drill reports it.

    A pass that fails is a failed invocation of the scheduled function it stands in for: the
    schedule invokes it again, and so does the worker. A worker that exited on the first
    unexpected error would leave every later advisory unread for the rest of a drill, a world
    harsher than AWS in a way that says nothing about BrokerSync.
    """
    totals["failed_passes"] = int(totals.get("failed_passes", 0)) + 1
    if not expected:
        totals["unexpected_errors"] = int(totals.get("unexpected_errors", 0)) + 1
    totals["last_error"] = f"{type(error).__name__}: {error}"[:300]


def _run_passes(
    worker: str, one_pass: Callable[[], None], stop: threading.Event, totals: dict[str, Any], status_file: Path
) -> None:
    """``one_pass`` until ``stop``; a pass that raises what nothing expected is logged, counted and retried.

    Expected failures (a broker rebooting, the ledger throttled) are each pass's own to count.
    """
    while not stop.is_set():
        try:
            one_pass()
        except Exception as e:  # a failed invocation, not the end of the schedule
            logger.exception("%s pass failed unexpectedly, retrying", worker)
            _count_failure(totals, e, expected=False)
            _publish(status_file, totals)
            stop.wait(1.0)


def _record_pass(passes: Path | None, start: float, epoch: int) -> None:
    """One line per pass that acted: when, and under which role epoch (a drill checks no two regions overlap)."""
    if passes is not None:
        with passes.open("a", encoding="utf-8") as out:
            out.write(json.dumps({"start": start, "end": time.time(), "epoch": epoch}) + "\n")


def run_relay(
    base: Topology,
    ledger: Ledger,
    env: dict[str, Any],
    status_file: Path,
    stop: threading.Event,
    role_region: str | None = None,
    passes: Path | None = None,
) -> None:
    switches = Switches(base, env, role_region)
    metrics = RecordingMetrics()
    totals: dict[str, Any] = {"captured": 0, "parked": 0, "lost": 0, "by_queue": {}, "enabled": True}
    audits: dict[tuple[str, tuple[str, ...]], CaptureAudit] = {}

    def one_pass() -> None:
        try:
            assignment = switches.roles.assignment(base)
            topology = apply_roles(base, assignment)
            duties = in_region(capture_duties(topology, assignment), role_region)
            totals["enabled"] = switches.relay_enabled() and bool(duties)
        except (BotoCoreError, ClientError, BrokerSyncError) as e:
            logger.warning("cannot read the relay switches, retrying: %s", e)
            stop.wait(1.0)
            return
        if not totals["enabled"]:
            _publish(status_file, totals)
            stop.wait(0.5)
            return
        started = time.time()
        failed = False
        # As the relay function does: a new epoch anywhere ends the pass within the gate's poll,
        # also for a pass thawed after its region was partitioned.
        gate = RoleGate(switches.roles, base, "primary", role_region, poll_s=GATE_POLL_S)
        standing = Standing(True, topology, assignment.epoch)
        roles_hold = functools.partial(gate.still_holds, standing)
        with gate.watch(standing) as moved, _either(stop, moved) as pass_stop:
            # run_each calls it within this pass; the default binds this pass's gate reading.
            def relay_on(duty: Duty, roles_hold: Callable[[], bool] = roles_hold) -> RelayReport:
                broker = StompConnector(duty.broker.stomp)
                statistics = StatisticsClient(broker)
                key = (duty.broker.name, tuple(duty.queues))
                if key not in audits:  # one audit per broker and queues, kept across passes
                    audits[key] = CaptureAudit(ledger.backend, statistics, duty.view, metrics=metrics)  # type: ignore[arg-type]
                relay = AdvisoryRelay(
                    broker,
                    LedgerWriter(ledger, queue_workers=duty.whole.tuning.queues_at_once),
                    duty.whole,
                    statistics=statistics,
                    audit=audits[key],
                    metrics=metrics,
                    passive=duty.passive,
                    roles_hold=roles_hold,
                )
                report = relay.run(max_seconds=2, stop=pass_stop)
                audits[key].check()
                return report

            try:
                for report in run_each(duties, relay_on):
                    totals["captured"] += report.captured
                    totals["parked"] += report.parked_total
                    totals["passive"] = totals.get("passive", 0) + report.passive
                    totals["passive_deferred"] = totals.get("passive_deferred", 0) + report.passive_deferred
                    for queue, count in report.captured_by_queue.items():
                        totals["by_queue"][queue] = totals["by_queue"].get(queue, 0) + count
                totals["lost"] = int(metrics.total("AdvisoriesLost"))
            except BrokerSyncError as e:
                logger.warning("relay pass failed, retrying: %s", e)
                _count_failure(totals, e)
                failed = True
        _record_pass(passes, started, assignment.epoch)
        if failed:
            stop.wait(1.0)
        _publish(status_file, totals)

    _run_passes("relay", one_pass, stop, totals, status_file)


@contextlib.contextmanager
def _either(*events: threading.Event) -> Iterator[threading.Event]:
    """An event set as soon as any of ``events`` is."""
    either, done = threading.Event(), threading.Event()

    def follow() -> None:
        while not done.is_set() and not any(e.is_set() for e in events):
            done.wait(0.1)
        either.set()

    follower = threading.Thread(target=follow, name="either", daemon=True)
    follower.start()
    try:
        yield either
    finally:
        done.set()
        follower.join(timeout=1)


def _purge_service(duty: Duty, ledger: Ledger) -> PurgeService:
    broker = StompConnector(duty.broker.stomp)
    return PurgeService(
        ledger,
        SelectorRemover(broker),
        duty.view,
        dr_statistics=StatisticsClient(broker),
        primary_statistics=StatisticsClient(StompConnector(duty.view.primary.stomp)),
        late_copies=LateCopySweep(),
    )


def run_purge(base: Topology, ledger: Ledger, env: dict[str, Any], status_file: Path, stop: threading.Event) -> None:
    switches = Switches(base, env)
    services: dict[tuple[str, tuple[str, ...]], PurgeService] = {}
    totals: dict[str, Any] = {"purged": {}, "missing": {}, "pending": {}, "oldest_pending_age_ms": {}}

    def one_pass() -> None:
        try:
            assignment = switches.roles.assignment(base)
            topology = apply_roles(base, assignment)
        except (BotoCoreError, ClientError, BrokerSyncError) as e:
            logger.warning("cannot read the role record, retrying: %s", e)
            stop.wait(1.0)
            return
        if not assignment.sync_running:
            _publish(status_file, totals, enabled=False)
            stop.wait(0.5)
            return

        def purge_on(duty: Duty) -> PurgeReport:
            key = (duty.broker.name, tuple(duty.queues))
            if key not in services:  # built once per broker and queues, not on every pass
                services[key] = _purge_service(duty, ledger)
            return services[key].run(max_seconds=2)

        try:
            for report in run_each(purge_duties(topology, assignment), purge_on):
                for queue, result in report.queues.items():
                    totals["purged"][queue] = totals["purged"].get(queue, 0) + result.purged
                    totals["missing"][queue] = totals["missing"].get(queue, 0) + result.missing
                    totals["pending"][queue] = result.pending
                    totals["oldest_pending_age_ms"][queue] = result.oldest_pending_age_ms
        except BrokerSyncError as e:
            logger.warning("purge pass failed, retrying: %s", e)
            _count_failure(totals, e)
            stop.wait(1.0)
        _publish(status_file, totals)

    _run_passes("purge", one_pass, stop, totals, status_file)


def main() -> int:
    parser = argparse.ArgumentParser(description="a BrokerSync sync worker for the local pair")
    parser.add_argument("worker", choices=["relay", "purge"])
    parser.add_argument("--topology", required=True)
    parser.add_argument("--state-dir", required=True)
    parser.add_argument("--role-region", help="act only in the roles whose brokers are in this region")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    faulthandler.register(signal.SIGUSR1)  # `kill -USR1 PID`: every thread's stack into the worker's log
    state_dir = Path(args.state_dir)
    env = json.loads((state_dir / "env.json").read_text())
    topology = localise(load_topology(args.topology), ports_from_env(env))
    if args.role_region:
        env = {**env, "aws": {**env["aws"], "region": args.role_region}}
    ledger = local_ledger(env)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    suffix = f"-{args.role_region}" if args.role_region else ""
    status = state_dir / f"sync-{args.worker}{suffix}.json"
    if args.worker == "relay":
        run_relay(topology, ledger, env, status, stop, args.role_region, state_dir / f"passes-relay{suffix}.jsonl")
    else:
        run_purge(topology, ledger, env, status, stop)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
