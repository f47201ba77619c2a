"""``brokersync status``: both regions of a deployed pair at once, for people and for machines.

What an operator asks before and during a transition, answered from the same records and
measurements the functions use: who is primary and at which epoch (read in each region's
replica, so replication lag shows), whether a transition is half done, where the purge loop
runs, per queue the copy backlog with its age (the loss window) and the pending purge with
its age (the duplicate window), the DR depth, and the alarms in ALARM. Nothing is written.

The verdict is the exit code: 0 healthy; 1 broken (BrokerSync or the pair cannot do its
job and will not recover by itself: a transition half done, the primary or the roles
unreadable, the bridge down while the DR broker answers, no purge loop in the DR region, the
relay not draining); 3 degraded (protection impaired by something that BrokerSync catches up
with once it is back: the DR broker unreachable, so copies wait in the primary's outflow; a
window above its target; an alarm firing; a region's replica behind or unreachable).

Each broker's current configuration is read through Amazon MQ, as the health probe reads
it: a broker the role record calls DR that runs the primary's (an old primary back), a
network connector of the customer's that may forward what BrokerSync counts on, or a
setting under which capture records what was not consumed is broken; a configuration
behind the topology for the broker's role (``apply-config`` not run, or not rebooted onto)
is degraded, with the first lines that differ.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

import boto3
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

from brokersync.broker.statistics import CURSOR_HIGH_WATER_PERCENT, StatisticsClient
from brokersync.broker.stomp import BrokerCredentials, StompConnector
from brokersync.config import ENV_BROKER_IDS
from brokersync.exceptions import BrokerSyncError
from brokersync.failover.control_plane import BrokerControl
from brokersync.failover.steps import TransitionStore
from brokersync.health import (
    DR_BROKER_MEMORY_ALARM_PERCENT,
    DR_QUEUE_MEMORY_ALARM_PERCENT,
    HealthProbe,
    HealthReport,
)
from brokersync.ledger import dynamodb_ledger
from brokersync.ledger.control import ControlRecords, control_model
from brokersync.roles import RoleStore, apply_roles
from brokersync.sides import relays_on_dr
from brokersync.snapshot.browser import oldest_timestamp_ms
from brokersync.topology import CONSUMED_QUEUE, Broker, Queue, Topology
from brokersync_cli.names import alarm_names, pair_of_table, state_machine_names

HEALTHY, BROKEN, DEGRADED = 0, 1, 3
#: The relay drains BROKERSYNC.CONSUMED every minute (for up to 50 s); an advisory older than
#: three of its schedules means it is not draining: the relay-stalled alarm's three periods.
RELAY_STALLED_S = 180.0
VERDICTS = {HEALTHY: "healthy", BROKEN: "broken", DEGRADED: "degraded"}
#: The probe's figures read from the brokers' configurations: unread, they are one warning.
CONFIGURATION_FIGURES = ("stalePrimary", "forwardingConnectors")
#: Lines of a drifted configuration shown per broker (the probe's log has them all).
DRIFT_LINES_SHOWN = 3
#: A region that does not answer within this is reported unreachable (it may be the one lost).
REGION_CLIENT = Config(connect_timeout=3, read_timeout=5, retries={"total_max_attempts": 2, "mode": "standard"})


@dataclass
class RegionView:
    region: str
    epoch: int | None = None
    primary: str | None = None
    dr: str | None = None
    sync_running: bool | None = None
    transition: dict[str, Any] | None = None
    purge_loops_running: int | None = None
    alarms_in_alarm: list[str] = field(default_factory=list)
    unreachable: str | None = None
    #: Active-active queues consumed on the DR broker (queue -> broker), the role record's overrides.
    active: dict[str, str] = field(default_factory=dict)


@dataclass
class PairStatus:
    primary: str | None
    dr: str | None
    epoch: int | None
    sync_running: bool | None
    regions: dict[str, RegionView]
    health: dict[str, Any] | None
    problems: list[str]
    warnings: list[str]
    verdict: str = "healthy"
    code: int = HEALTHY
    #: Queues consumed elsewhere than on the primary (queue -> broker).
    active: dict[str, str] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def pair_regions(topology: Topology) -> list[str]:
    """The regions the pair's brokers name, in topology order (one for a pair in one region)."""
    regions = [b.region for b in topology.brokers if b.region]
    return list(dict.fromkeys(regions))


def secret_credentials(broker: Broker) -> BrokerCredentials:
    """The BrokerSync user from the broker's secret, read in the broker's own region."""
    client = boto3.client("secretsmanager", region_name=broker.region, config=REGION_CLIENT)
    value = json.loads(client.get_secret_value(SecretId=broker.credentials_secret)["SecretString"])
    return BrokerCredentials(str(value["username"]), str(value["password"]))


class StatusReader:
    """Reads one pair's status; each AWS and broker access is a small function a test can replace."""

    def __init__(
        self,
        topology: Topology,
        table: str,
        *,
        rpo_s: float = 60.0,
        credentials: Callable[[Broker], BrokerCredentials] = secret_credentials,
        client: Callable[[str, str], Any] | None = None,
    ) -> None:
        self.topology = topology
        self.table = table
        #: The PairName the table was deployed for (None: a table the template would not name).
        self.pair = pair_of_table(table)
        self.rpo_s = rpo_s
        self.credentials = credentials
        self.client = client or _regional_client

    def connector(self, broker: Broker) -> StompConnector:
        return StompConnector(broker.stomp, self.credentials(broker))

    def read(self) -> PairStatus:
        regions = pair_regions(self.topology) or [boto3.session.Session().region_name or "us-east-1"]
        views = {region: self._region(region) for region in regions}
        readable = [v for v in views.values() if v.unreachable is None and v.epoch is not None]
        problems: list[str] = []
        warnings: list[str] = []
        if not readable:
            problems.append("the role record could not be read in any region")
            status = PairStatus(None, None, None, None, views, None, problems, warnings)
            return _judge(status)
        newest = max(readable, key=lambda v: v.epoch or 0)
        for view in views.values():
            if view.unreachable:
                warnings.append(f"{view.region} unreachable: {view.unreachable}")
            elif view.epoch != newest.epoch:
                warnings.append(
                    f"{view.region}'s replica is at epoch {view.epoch}, {newest.region}'s at {newest.epoch}"
                )
            if view.transition and view.transition.get("status") == "in-progress":
                problems.append(
                    f"a {view.transition['mode']} to {view.transition['target']} is half done "
                    f"({view.transition['execution']}): re-run it to finish"
                )
            warnings.extend(f"alarm {name} in ALARM ({view.region})" for name in view.alarms_in_alarm)
        problems = list(dict.fromkeys(problems))
        health = self._health(newest.region, [v.region for v in readable])
        status = PairStatus(
            newest.primary,
            newest.dr,
            newest.epoch,
            newest.sync_running,
            views,
            health,
            problems,
            warnings,
            active=newest.active,
        )
        self._judge_health(status)
        return _judge(status)

    def records(self, region: str) -> ControlRecords:
        # Every read on the short leash the functions use for a peer: a lost region answers nothing.
        return ControlRecords(control_model(self.table, region, _endpoint("dynamodb"), peer=True))

    def _region(self, region: str) -> RegionView:
        view = RegionView(region)
        try:
            assignment = RoleStore(self.records(region)).assignment(self.topology)
            view.epoch, view.sync_running = assignment.epoch, assignment.sync_running
            view.active = dict(assignment.active)
            now = apply_roles(self.topology, assignment)
            view.primary, view.dr = now.primary.name, now.dr.name
            transition = TransitionStore(self.records(region)).read()
            view.transition = asdict(transition) if transition else None
        except (BrokerSyncError, BotoCoreError, ClientError) as e:
            view.unreachable = str(e).splitlines()[0][:200]
            return view
        view.purge_loops_running = self._purge_loops(region)
        view.alarms_in_alarm = self._alarms(region)
        return view

    def _purge_loops(self, region: str) -> int | None:
        """Running executions of this pair's purge loop in ``region`` (None: no such machine there)."""
        names = state_machine_names("purge-loop", self.pair)
        try:
            sfn = self.client("stepfunctions", region)
            machines = [m for m in state_machines(sfn) if m["name"] in names]
            if not machines:
                return None
            running = sfn.get_paginator("list_executions")
            return sum(
                len(page["executions"])
                for m in machines
                for page in running.paginate(stateMachineArn=m["stateMachineArn"], statusFilter="RUNNING")
            )
        except (BotoCoreError, ClientError):
            return None

    def _alarms(self, region: str) -> list[str]:
        """This pair's alarms in ALARM in ``region``, by their exact names (another pair's are not this pair's)."""
        request: dict[str, Any] = (
            {"AlarmNames": alarm_names(self.pair)} if self.pair else {"AlarmNamePrefix": "brokersync-"}
        )
        try:
            cloudwatch = self.client("cloudwatch", region)
            pages = cloudwatch.get_paginator("describe_alarms").paginate(StateValue="ALARM", **request)
            # The state again here: moto answers a request by names with every state.
            alarms = [a for page in pages for a in page.get("MetricAlarms", []) if a.get("StateValue") == "ALARM"]
            return sorted(a["AlarmName"] for a in alarms)
        except (BotoCoreError, ClientError):
            return []

    def _health(self, region: str, readable: list[str]) -> dict[str, Any] | None:
        peers = [self.records(r) for r in readable if r != region]
        ledger = dynamodb_ledger(self.table, region=region, host=_endpoint("dynamodb"))
        control = self._broker_control(region)
        probe = HealthProbe(
            RoleStore(self.records(region), peers),
            self.topology,
            ledger,
            statistics=lambda broker: StatisticsClient(self.connector(broker)),
            oldest_timestamp_ms=lambda broker, queue: oldest_timestamp_ms(self.connector(broker), queue),
            region=None,  # read-only: the CLI plays no role
            configuration=lambda name: control.current_document(name)[2],
        )
        try:
            report = probe.probe()
        except (BrokerSyncError, BotoCoreError, ClientError) as e:
            return {"unmeasured": {"probe": str(e)}}
        depths = self._dr_depths(report)  # each may add to report.unmeasured
        relays = {"relay": self._relay(report, report.primary, "relay")}
        if relays_on_dr(self.topology):
            relays["dr_relay"] = self._relay(report, report.dr, "drRelay")
        pending = self._pending_revisions(control, sorted(report.configuration_drift or {}))
        return {**report.as_dict(), "dr_depth": depths, **relays, "pending_revisions": pending}

    def _broker_control(self, region: str) -> BrokerControl:
        """Amazon MQ for the pair's brokers, each in its own region, on status's short-leash clients."""
        return BrokerControl.for_topology(
            self.client("mq", region),
            self.topology,
            json.loads(os.environ.get(ENV_BROKER_IDS) or "{}"),
            regional=lambda broker_region: self.client("mq", broker_region),
        )

    def _pending_revisions(self, control: BrokerControl, brokers: list[str]) -> dict[str, int]:
        """The revision each of ``brokers`` has applied and not yet rebooted onto, where it has one."""
        pending: dict[str, int] = {}
        for name in brokers:
            try:
                revision = (control.describe(name)["Configurations"].get("Pending") or {}).get("Revision")
            except (BotoCoreError, ClientError, KeyError):
                continue
            if revision is not None:
                pending[name] = int(revision)
        return pending

    def _relay(self, report: HealthReport, broker_name: str, figure: str) -> dict[str, Any] | None:
        """A relay's liveness: advisories waiting on ``broker_name``'s BROKERSYNC.CONSUMED and the oldest one's age.

        The primary's relay always runs; the DR broker's when queues are active-active.
        """
        broker = next(b for b in self.topology.brokers if b.name == broker_name)
        try:
            connector = self.connector(broker)
            counted = StatisticsClient(connector).queue_stats([CONSUMED_QUEUE]).get(CONSUMED_QUEUE)
            waiting = 0 if counted is None else counted.size  # absent until a first advisory or relay creates it
            oldest_ms = oldest_timestamp_ms(connector, Queue.model_construct(name=CONSUMED_QUEUE)) if waiting else None
        except (BrokerSyncError, BotoCoreError, ClientError) as e:
            report.unmeasured[figure] = str(e)
            return None
        oldest_s = None if oldest_ms is None else max(0.0, round(time.time() - oldest_ms / 1000, 1))
        return {"advisories_waiting": waiting, "oldest_s": oldest_s}

    def _dr_depths(self, report: HealthReport) -> dict[str, int] | None:
        dr = next(b for b in self.topology.brokers if b.name == report.dr)
        try:
            stats = StatisticsClient(self.connector(dr)).queue_stats([q.name for q in self.topology.queues])
        except (BrokerSyncError, BotoCoreError, ClientError) as e:
            report.unmeasured["drDepth"] = str(e)
            return None
        return {name: s.size for name, s in stats.items()}

    def _judge_purge_loops(self, status: PairStatus) -> None:
        """A purge loop wherever something is purged: the DR region, and the primary's while it purges moved queues."""
        if not status.sync_running:
            return
        regions = {b.name: b.region for b in self.topology.brokers}
        dr_region, primary_region = regions.get(status.dr or ""), regions.get(status.primary or "")
        if status.regions.get(dr_region or "", RegionView("")).purge_loops_running == 0:
            status.problems.append(f"no purge loop runs in the DR region {dr_region}: consumed messages stay on DR")
        on_dr = sorted(q for q, broker in status.active.items() if broker == status.dr)
        primary_loops = status.regions.get(primary_region or "", RegionView("")).purge_loops_running
        if on_dr and primary_region != dr_region and primary_loops == 0:
            status.problems.append(
                f"no purge loop runs in the primary's region {primary_region}, yet {', '.join(on_dr)} "
                f"{'is' if len(on_dr) == 1 else 'are'} consumed on DR: what DR consumes stays on the primary "
                "(run the move again: it starts the loop)"
            )

    def _judge_health(self, status: PairStatus) -> None:
        health = status.health or {}
        _judge_unmeasured(status, health.get("unmeasured") or {})
        self._judge_configurations(status, health)
        dr_down = (health.get("unmeasured") or {}).get("drDepth")
        if dr_down:
            status.warnings.append(
                f"the DR broker {status.dr} cannot be read ({dr_down}): copies wait in the primary's outflow "
                "until it is back (the loss window grows)"
            )
        elif status.sync_running and health.get("missing_outflows"):
            missing = health["missing_outflows"]
            status.problems.append(
                f"{', '.join(missing)} {'is' if len(missing) == 1 else 'are'} not copied: the primary "
                f"{status.primary} has no outflow for {'it' if len(missing) == 1 else 'them'}, so its configuration "
                "is behind the topology (brokersync apply-config --role dr --reboot, then --role primary --reboot)"
            )
        elif status.sync_running and health.get("bridge_connected") is False:
            status.problems.append(
                f"the bridge to the DR broker is not connected though {status.dr} answers: "
                "copies wait in the primary's outflow (see the network connector in the primary's log)"
            )
        if status.sync_running is False:
            status.warnings.append("sync is stopped (a transition's StopSync, or an operator)")
        relay = health.get("relay") or {}
        if status.sync_running and (relay.get("oldest_s") or 0) > RELAY_STALLED_S:
            status.problems.append(
                f"the relay is not draining {CONSUMED_QUEUE} on {status.primary}: {relay['advisories_waiting']:,} "
                f"advisories, the oldest {relay['oldest_s']:.0f}s old; consumed messages are not recorded, "
                "so they stay on DR (see the relay's logs and errors alarm)"
            )
        dr_relay = health.get("dr_relay") or {}
        if status.sync_running and (dr_relay.get("oldest_s") or 0) > RELAY_STALLED_S:
            status.problems.append(
                f"the relay on the DR broker {status.dr} is not draining its {CONSUMED_QUEUE}: "
                f"{dr_relay['advisories_waiting']:,} advisories, the oldest {dr_relay['oldest_s']:.0f}s old; what is "
                f"consumed on {status.dr} is not recorded, so it stays on {status.primary}, and a switchover waits "
                "for it (see the relay's logs and errors alarm in the DR region)"
            )
        self._judge_purge_loops(status)
        for name, queue in (health.get("queues") or {}).items():
            for key, label in (("loss_window_s", "loss window"), ("duplicate_window_s", "duplicate window")):
                value = queue.get(key)
                if value is not None and value > self.rpo_s:
                    status.warnings.append(f"{name}: {label} {value:.0f}s above {self.rpo_s:.0f}s")
            memory = queue.get("dr_memory_percent")
            if memory is not None and memory >= DR_QUEUE_MEMORY_ALARM_PERCENT:
                status.warnings.append(
                    f"{name}: {memory}% of its memory limit in use on DR; at {CURSOR_HIGH_WATER_PERCENT}% "
                    "ActiveMQ stops paging it in and the purge stalls behind the backlog "
                    "(raise tuning.dr.memory_limit_mb)"
                )
        broker_memory = health.get("dr_broker_memory_percent")
        if broker_memory is not None and broker_memory >= DR_BROKER_MEMORY_ALARM_PERCENT:
            status.warnings.append(
                f"the DR broker uses {broker_memory}% of its own memory; when it is full every queue on it stops "
                "paging in and the purge stalls (a larger DR broker, or smaller tuning.dr.memory_limit_mb)"
            )

    def _judge_configurations(self, status: PairStatus, health: dict[str, Any]) -> None:
        """What the brokers' current configurations say, as the health probe's alarms say it."""
        for broker in health.get("stale_primaries") or []:
            status.problems.append(
                f"{broker} runs the primary configuration though the role record calls it DR (an old primary "
                "back): it copies to its peer; run the failback, which rejoins it as DR"
            )
        for broker, connectors in (health.get("forwarding_connectors") or {}).items():
            for connector, queues in connectors.items():
                status.problems.append(
                    f"{broker}: your network connector {connector} may forward {', '.join(queues)}: what it "
                    "forwards counts as consumed (exclude them, then apply-config; see the forwarding-connector alarm)"
                )
        for broker, reasons in (health.get("unsafe_settings") or {}).items():
            status.problems.extend(f"{broker}: {reason}" for reason in reasons)
        roles = {status.primary: "primary", status.dr: "dr"}
        pending = health.get("pending_revisions") or {}
        for broker, lines in (health.get("configuration_drift") or {}).items():
            shown = "; ".join(line.strip() for line in lines[:DRIFT_LINES_SHOWN])
            waiting = f"; revision {pending[broker]} is applied and waits for a reboot" if broker in pending else ""
            command = f"brokersync apply-config --role {roles.get(broker, '<role>')} --reboot"
            status.warnings.append(
                f"{broker} runs a configuration behind the topology "
                f"({len(lines)} lines differ, first: {shown}{waiting}): {command}"
            )


def _judge_unmeasured(status: PairStatus, unmeasured: dict[str, str]) -> None:
    """What the probe could not measure; the DR broker unread is said apart, with what it means."""
    for what, why in unmeasured.items():
        if what == "lossWindow":
            status.problems.append(f"the primary cannot be read: {why}")
        elif what in CONFIGURATION_FIGURES:
            status.warnings.append(f"broker configurations not read: {why}")
        elif what == "configurationDrift":  # read, but the topology's role could not be rendered over it
            status.warnings.append(f"configuration drift not checked: {why}")
        elif what == "drRelay" and "drDepth" in unmeasured:
            continue  # the DR broker unread is said once, with what it means
        elif what not in ("drDepth", "drMemory"):
            status.warnings.append(f"{what} not measured: {why}")
    status.warnings = list(dict.fromkeys(status.warnings))


def _judge(status: PairStatus) -> PairStatus:
    status.code = BROKEN if status.problems else DEGRADED if status.warnings else HEALTHY
    status.verdict = VERDICTS[status.code]
    return status


def _regional_client(service: str, region: str) -> Any:
    return boto3.client(service, region_name=region, config=REGION_CLIENT)


def state_machines(sfn: Any) -> list[dict[str, Any]]:
    """Every state machine in the client's region: ListStateMachines answers a page at a time."""
    return [m for page in sfn.get_paginator("list_state_machines").paginate() for m in page["stateMachines"]]


def _endpoint(service: str) -> str | None:
    """An endpoint override for pynamodb (boto3 reads AWS_ENDPOINT_URL itself); None in AWS."""
    return os.environ.get(f"AWS_ENDPOINT_URL_{service.upper()}") or os.environ.get("AWS_ENDPOINT_URL") or None


def format_status(status: PairStatus) -> str:
    """The status as a person reads it: the verdict first, then why, then the figures."""
    lines = [f"pair: {status.verdict}   primary {status.primary}   DR {status.dr}   epoch {status.epoch}"]
    if status.active:
        moved = ", ".join(f"{queue} on {broker}" for queue, broker in sorted(status.active.items()))
        lines.append(f"consumed off the primary: {moved}")
    lines += [f"  ! {p}" for p in status.problems] + [f"  ~ {w}" for w in status.warnings]
    lines.append("regions:")
    for view in status.regions.values():
        if view.unreachable:
            lines.append(f"  {view.region:<12} unreachable")
            continue
        transition = view.transition or {}
        half_done = f"{transition.get('mode')} in progress" if transition.get("status") == "in-progress" else "none"
        loops = "-" if view.purge_loops_running is None else str(view.purge_loops_running)
        lines.append(
            f"  {view.region:<12} epoch {view.epoch}  sync {'on' if view.sync_running else 'off'}  "
            f"transition {half_done}  purge loops {loops}  alarms {len(view.alarms_in_alarm)}"
        )
    health = status.health or {}
    queues = health.get("queues") or {}
    if health:
        relay = health.get("relay")
        lines.append(f"relay: {_relay_text(relay)}")
        if "dr_relay" in health:
            lines.append(f"DR relay: {_relay_text(health['dr_relay'])}")
    if queues:
        depths = health.get("dr_depth") or {}
        lines.append(f"queues (bridge {'up' if health.get('bridge_connected') else 'DOWN or unknown'}):")
        header = ("queue", "copy backlog", "loss window", "pending purge", "dup window", "DR depth")
        lines.append("  {:<16}{:>14}{:>13}{:>15}{:>12}{:>10}".format(*header))
        for name, q in queues.items():
            row = (
                name,
                _num(q.get("copy_backlog")),
                _secs(q.get("loss_window_s")),
                _num(q.get("pending_purge")),
                _secs(q.get("duplicate_window_s")),
                _num(depths.get(name)),
            )
            lines.append("  {:<16}{:>14}{:>13}{:>15}{:>12}{:>10}".format(*row))
        returning = {n: q["return_backlog"] for n, q in queues.items() if q.get("return_backlog") is not None}
        if returning:
            counts = ", ".join(f"{name} {_num(count)}" for name, count in returning.items())
            lines.append(f"produced on DR, not yet copied to the primary (active-active): {counts}")
    return "\n".join(lines)


def _relay_text(relay: dict[str, Any] | None) -> str:
    if relay is None:
        return "unknown"
    return f"{relay['advisories_waiting']:,} advisories waiting, oldest {_secs(relay['oldest_s'])}"


def _num(value: int | None) -> str:
    return "-" if value is None else f"{value:,}"


def _secs(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}s"
