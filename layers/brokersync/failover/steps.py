"""The steps of a failover, switchover or failback, each one idempotent.

The state machines call one step per task and carry a small context (``ctx``) from step to
step. Every step looks at where things already are before it acts, so an execution that
failed half way can simply be started again: the *transition record* (an SSM parameter
beside the role parameter) remembers which broker is being promoted until the transition
completes, so a re-run resumes the same transition even after the roles were swapped,
instead of failing back the other way.

Nothing here needs the old primary's region during a FAILOVER: the role parameter, the
configuration bucket, the Amazon MQ API and the ledger replica are all regional.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, fields
from datetime import timedelta
from typing import Any, Literal

from brokersync.broker.statistics import StatisticsClient
from brokersync.capture.departures import Departures, read_departures
from brokersync.exceptions import BrokerSyncError, BrokerUnavailableError
from brokersync.failover.context import Mode, TransitionContext, TransitionRequest
from brokersync.failover.control_plane import RUNNING, BrokerControl
from brokersync.failover.errors import FailoverRequestError, SwitchoverRefusedError
from brokersync.failover.sync_control import SyncControl
from brokersync.ledger.base import LedgerStore
from brokersync.ledger.control import ControlRecords
from brokersync.ledger.exceptions import LedgerError
from brokersync.metrics import MetricsSink, NullMetrics
from brokersync.purge.late_copies import consumed_at_head
from brokersync.purge.remover import SelectorRemover
from brokersync.purge.service import PurgeService, PurgeSettings
from brokersync.render import render_configuration
from brokersync.render.connectors import forwarding_connectors, refusal
from brokersync.render.document import parse_configuration
from brokersync.render.safety import unsafe_settings
from brokersync.roles import RoleAssignment, RoleStore, apply_roles
from brokersync.sides import capture_duties
from brokersync.topology import CONSUMED_QUEUE, Broker, Role, Topology

logger = logging.getLogger(__name__)

#: A failback catches up with the new primary's copy backlog until at most this many copies wait.
CAUGHT_UP_COPIES = 100
#: A drain counts pending keys per queue up to this many, in either replica. It waits while
#: any is pending, so a longer count would only make the figure it reports exact, at a read
#: of every pending key on each poll.
DRAIN_COUNT_LIMIT = 1000


@dataclass(frozen=True)
class Transition:
    mode: Mode
    source: str
    target: str
    execution: str
    started_at_ms: int
    status: Literal["in-progress", "done"] = "in-progress"
    #: A failback's: when the transition it follows (the failover that left the rejoining broker)
    #: started. Its claim replaces that record, so the catch-up's head sweep reads it here, in a
    #: resumed execution too.
    follows_started_at_ms: int | None = None


#: The record's fields this code knows: a record written by a newer version may carry more.
_TRANSITION_FIELDS = frozenset(f.name for f in fields(Transition))


#: The control record's name in the ledger table.
TRANSITION_RECORD = "transition"


class TransitionStore:
    """The transition in progress: a control record both regions see (``R#transition``).

    A new transition is *claimed*: the write states the version it replaces, so two
    executions that both found no transition in progress cannot both start one.
    """

    def __init__(self, records: ControlRecords) -> None:
        self.records = records
        self._version = 0

    def read(self) -> Transition | None:
        record = self.records.get(TRANSITION_RECORD)
        self._version = record.version if record else 0
        if record is None:
            return None
        return Transition(**{k: v for k, v in record.document.items() if k in _TRANSITION_FIELDS})

    def write(self, transition: Transition) -> None:
        """Replace the transition read last (TransitionConflictError if another moved it first)."""
        record = self.records.put(TRANSITION_RECORD, asdict(transition), self._version, transition.execution)
        self._version = record.version


def transition_to_run(
    mode: Mode,
    target: str | None,
    current: Transition | None,
    assignment: RoleAssignment,
    topology: Topology,
    execution: str,
    now_ms: int,
) -> tuple[Transition | None, bool]:
    """The SWITCHOVER or FAILOVER an execution would run, and whether it is new (to be claimed).

    The one in progress is resumed; another mode's half-done transition, or a target the
    topology does not name, is refused (FailoverRequestError); ``None`` when the target is
    already primary. Pure, so ``brokersync switchover --plan`` asks exactly what the state
    machine's Plan step would decide, without writing the record.
    """
    if current and current.status == "in-progress":
        if current.mode != mode:
            raise FailoverRequestError(
                f"a {current.mode} to {current.target} is in progress ({current.execution}): "
                f"re-run it with mode {current.mode} (or finish it) before a {mode}"
            )
        return current, False
    target = target or assignment.dr
    names = {b.name for b in topology.brokers}
    if target not in names:
        raise FailoverRequestError(f"target {target!r} is not a broker of the topology ({sorted(names)})")
    if target == assignment.primary:
        return None, False  # already primary: nothing to do
    return Transition(mode, assignment.primary, target, execution, now_ms), True


def failback_to_run(
    current: Transition | None, assignment: RoleAssignment, topology: Topology, execution: str, now_ms: int
) -> tuple[Transition, bool]:
    """The FAILBACK an execution would run (resumed or new), or FailoverRequestError while another mode is half done."""
    if current and current.status == "in-progress" and current.mode != "FAILBACK":
        raise FailoverRequestError(
            f"a {current.mode} to {current.target} is still in progress ({current.execution}): re-run it first"
        )
    if current and current.status == "in-progress":
        return current, False
    # The rejoining broker is the topology's other broker, not the name the record kept: a
    # pair re-paired with a broker in a third region names the new broker only in the topology.
    rejoining = apply_roles(topology, assignment).dr.name
    follows = current.started_at_ms if current is not None else None
    return Transition("FAILBACK", rejoining, assignment.primary, execution, now_ms, follows_started_at_ms=follows), True


def switchover_refusal(source: str, error: Exception) -> str:
    """Why a switchover cannot start when its old primary does not answer."""
    return (
        f"the old primary {source} is unreachable ({error}); a switchover must drain it first. "
        "Start a FAILOVER instead if its region is lost."
    )


def drain_queues(topology: Topology) -> list[str]:
    """The old primary's queues a switchover's drain reads: each queue, its outflow, the advisories."""
    return [q.name for q in topology.queues] + [topology.dr_name(q) for q in topology.queues] + [CONSUMED_QUEUE]


def relayed_on_new_primary(topology: Topology, assignment: RoleAssignment, target: str) -> list[str]:
    """The queues whose departures a switchover waits to see relayed on its new primary.

    The DR broker runs a relay only for active-active queues (:func:`brokersync.sides.capture_duties`):
    it records those consumed there and drains the purge's removals of the others. The
    switchover reboots it with sync stopped, and its ``BROKERSYNC.CONSUMED`` is not persistent,
    so an advisory still unread then is dropped: a removal would be reported as a lost
    advisory (a false ``AdvisoriesLost``), a consumption would leave its copy on the old
    primary until the reconciliation. Empty for a pair without active-active queues.
    """
    duties = capture_duties(apply_roles(topology, assignment), assignment)
    return sorted(q for d in duties if d.broker.name == target for q in [*d.queues, *d.passive])


def drain_figures(
    topology: Topology,
    stats: dict[str, Any],
    pending: dict[str, int],
    at_source: SourceReplica | None = None,
    at_target: Departures | None = None,
) -> dict[str, Any]:
    """What a switchover still waits for, from the old primary's queue statistics and the pending purge.

    Drained means: no application consumer on a synced queue of the old primary, no copy
    waiting in its ``Q.DR`` outflow, no consumed advisory waiting to be relayed, and no key
    pending purge. Only then can the roles swap with zero loss and zero duplicates. Where the
    new primary runs a relay too (``at_target``, see :func:`relayed_on_new_primary`), every
    departure it counted must also have been relayed before its reboot drops the rest.

    ``pending`` is read in this region's replica of the ledger, where the purge marks keys;
    ``at_source`` in the old primary's region's replica, where the relay wrote them. The
    replicas are asynchronous: a key relayed in the last second may not have reached this
    region yet, and a drain that read only here would swap the roles with that key's copy
    still on the new primary (a duplicate) and the key pending for good (the next drain's
    wait). A key is resolved in the old primary's replica only once this region's mark has
    replicated back, so both at zero means every relayed key was purged.
    """
    synced = topology.captured_queues
    outflow = {topology.dr_name(q): stats[topology.dr_name(q)].size for q in topology.queues}
    consumers = {q.name: stats[q.name].consumer_count for q in synced}
    advisories = stats[CONSUMED_QUEUE].size
    source_pending = at_source.pending if at_source else {}
    unreadable = at_source.unreadable if at_source else None
    drained = not any(outflow.values()) and not any(consumers.values()) and not any(pending.values())
    drained = drained and not any(source_pending.values()) and not unreadable
    drained = drained and (at_target is None or at_target.all_relayed)
    figures = {
        "drained": drained and advisories == 0,
        "outflow": outflow,
        "consumers": consumers,
        "pendingPurge": pending,
        "advisoriesWaiting": advisories,
    }
    if at_source:
        figures["pendingPurgeInSourceRegion"] = source_pending
        figures["sourceRegionLedgerUnreadable"] = unreadable
    if at_target:
        figures["departuresNotRelayedOnNewPrimary"] = at_target.unrelayed
        figures["newPrimaryUnreadable"] = at_target.unreadable or None
    return figures


@dataclass(frozen=True)
class SourceReplica:
    """The pending purge as the old side's region's replica of the ledger has it (see drain_figures)."""

    region: str
    pending: dict[str, int]
    #: Why that replica could not be read; the drain waits (and times out) rather than guess.
    unreadable: str | None = None


#: The ledger replica of another region, read only; None where that replica is the function's own.
ReplicaIn = Callable[[str], LedgerStore | None]


def own_replica_only(region: str) -> LedgerStore | None:
    """Every region is the function's own: one stack playing both roles, or a test."""
    return None


def read_drain(
    topology: Topology,
    stats: dict[str, Any],
    ledger: LedgerStore,
    replicas: ReplicaIn,
    source_region: str | None,
    *,
    read_only: bool = False,
    at_target: Departures | None = None,
) -> dict[str, Any]:
    """``drain_figures`` over the pending purge in this region's replica and in the old primary's.

    The switchover's ``CheckDrained`` and ``switchover --plan`` read the drain here, so that a
    plan waits for what the state machine would. ``read_only``: a plan writes nothing, not
    even the tidying of resolved pointers that the step's read does in its own region.
    """
    synced = [q.name for q in topology.captured_queues]
    pending = {q: len(ledger.pending(q, limit=DRAIN_COUNT_LIMIT, read_only=read_only)) for q in synced}
    at_source = pending_in_region(replicas, source_region, synced)
    return drain_figures(topology, stats, pending, at_source, at_target)


def new_primary_departures(
    topology: Topology,
    assignment: RoleAssignment,
    target: str,
    statistics: Callable[[], StatisticsClient],
    ledger: LedgerStore,
) -> Departures | None:
    """What the switchover's new primary counted leaving its relayed queues that its relay has not read.

    None when it runs no relay (:func:`relayed_on_new_primary`), or when sync is stopped: a
    re-run after ``StopSync`` would wait on a relay that does not run, for departures that no
    drain can bring back. ``statistics`` opens the broker's statistics client only when needed.
    """
    queues = relayed_on_new_primary(topology, assignment, target)
    if not queues or not assignment.sync_running:
        return None
    try:
        client = statistics()  # a connector may need the broker's secret: unreadable, not a crash
    except BrokerSyncError as e:
        return Departures.none(queues, unreadable=str(e))
    return read_departures(client, ledger.backend, queues)  # type: ignore[attr-defined]


def pending_in_region(replicas: ReplicaIn, region: str | None, queues: list[str]) -> SourceReplica | None:
    """Keys pending purge per queue in ``region``'s replica (None: that replica is this one).

    Read only: a write there would race the DR region's purge across replicas.
    """
    replica = replicas(region) if region else None
    if replica is None:
        return None
    try:
        counts = {q: len(replica.pending(q, limit=DRAIN_COUNT_LIMIT, read_only=True)) for q in queues}
        return SourceReplica(region, counts)
    except LedgerError as e:
        return SourceReplica(region, dict.fromkeys(queues, 0), unreadable=str(e))


@dataclass
class FailoverEnvironment:
    """Everything the steps talk to; built once per cold start by the handler."""

    topology: Topology
    roles: RoleStore
    transitions: TransitionStore
    brokers: BrokerControl
    sync: SyncControl
    s3: Any
    bucket: str
    events: Any
    ledger: LedgerStore
    statistics: Callable[[Broker], StatisticsClient]
    remover: Callable[[Broker], SelectorRemover]
    metrics: MetricsSink = NullMetrics()  # noqa: RUF009 (stateless)
    event_bus: str = "default"
    clock: Callable[[], float] = time.time
    #: The ledger as another region's replica has it: a drain checks where the relay wrote.
    ledger_in: ReplicaIn = own_replica_only


class FailoverSteps:
    def __init__(self, env: FailoverEnvironment) -> None:
        self.env = env

    # -- helpers -------------------------------------------------------------------------------
    def _now_ms(self) -> int:
        return int(self.env.clock() * 1000)

    def _assignment(self) -> RoleAssignment:
        return self.env.roles.assignment(self.env.topology)

    def _after(self, ctx: TransitionContext) -> Topology:
        """The topology as it will be once ``ctx.target`` is primary."""
        topology = self.env.topology
        return topology if topology.primary.name == ctx.target else topology.swapped()

    def _broker(self, name: str) -> Broker:
        return next(b for b in self.env.topology.brokers if b.name == name)

    # -- planning --------------------------------------------------------------------------------
    def context(self, raw: object) -> TransitionContext:
        """The ``ctx`` a step received, parsed and checked against the topology's brokers."""
        return TransitionContext.parse(raw, {b.name for b in self.env.topology.brokers})

    def plan(self, raw_request: object, execution: str) -> TransitionContext:
        """Decide source and target (or resume the transition in progress) and check preconditions."""
        request = TransitionRequest.parse(raw_request)
        mode = request.mode.upper()
        if mode not in ("SWITCHOVER", "FAILOVER"):
            raise FailoverRequestError(f"mode must be SWITCHOVER or FAILOVER, got {request.mode!r}")
        transition = self._resume_or_start(mode, request, execution)  # type: ignore[arg-type]
        ctx = self._context(transition, request, mode)  # type: ignore[arg-type]
        if transition is None:
            return ctx
        if mode == "SWITCHOVER":
            self._probe_for_switchover(transition.source)
        return ctx

    def plan_failback(self, raw_request: object, execution: str) -> TransitionContext:
        """The broker now playing DR rejoins as DR: it is reconfigured, cleaned, then synced again."""
        request = TransitionRequest.parse(raw_request)
        assignment = self._assignment()
        current = self.env.transitions.read()
        transition, new = failback_to_run(current, assignment, self.env.topology, execution, self._now_ms())
        if new:
            self.env.transitions.write(transition)
        # The claim replaced the record of the failover; the claim keeps its start for the
        # catch-up's head sweep, so a resumed failback sweeps the same window.
        return self._context(transition, request, "FAILBACK", source_left_at_ms=transition.follows_started_at_ms)

    def _resume_or_start(self, mode: Mode, request: TransitionRequest, execution: str) -> Transition | None:
        current = self.env.transitions.read()
        transition, new = transition_to_run(
            mode, request.target, current, self._assignment(), self.env.topology, execution, self._now_ms()
        )
        if new and transition is not None:
            self.env.transitions.write(transition)
        return transition

    def _context(
        self,
        transition: Transition | None,
        request: TransitionRequest,
        mode: Mode,
        *,
        source_left_at_ms: int | None = None,
    ) -> TransitionContext:
        now = self._now_ms()
        if transition is None:
            primary = self._assignment().primary
            transition = Transition(mode, primary, primary, "", now)
        return TransitionContext(
            nothing_to_do=transition.target == transition.source,
            mode=transition.mode,
            source=transition.source,
            target=transition.target,
            crdr=self.env.topology.is_crdr,
            transition_started_at_ms=transition.started_at_ms,
            drain_deadline_ms=now + request.drain_timeout_seconds * 1000,
            running_deadline_ms=now + request.running_timeout_seconds * 1000,
            source_left_at_ms=source_left_at_ms,
        )

    def _probe_for_switchover(self, source: str) -> None:
        try:
            self.env.statistics(self._broker(source)).queue_stats([CONSUMED_QUEUE])
        except BrokerSyncError as e:
            raise SwitchoverRefusedError(switchover_refusal(source, e)) from e

    # -- switchover drain ------------------------------------------------------------------------
    def drain_status(self, ctx: TransitionContext) -> dict[str, Any]:
        """Is everything accepted by the old primary on DR, and every consumed copy purged? (drain_figures)"""
        topology = self.env.topology
        try:
            stats = self.env.statistics(self._broker(ctx.source)).queue_stats(drain_queues(topology))
        except BrokerUnavailableError as e:
            source = ctx.source
            raise SwitchoverRefusedError(f"the old primary {source} became unreachable while draining: {e}") from e
        at_target = new_primary_departures(
            topology,
            self._assignment(),
            ctx.target,
            lambda: self.env.statistics(self._broker(ctx.target)),
            self.env.ledger,
        )
        source_region = self._broker(ctx.source).region
        figures = read_drain(topology, stats, self.env.ledger, self.env.ledger_in, source_region, at_target=at_target)
        figures["timedOut"] = not figures["drained"] and self._now_ms() > ctx.drain_deadline_ms
        return figures

    # -- sync ----------------------------------------------------------------------------------------
    def stop_sync(self, ctx: TransitionContext, execution: str) -> dict[str, Any]:
        """Stop sync in both regions (the role record) and this region's triggers and loop."""
        epoch = self._set_sync(False, f"{ctx.mode} {execution}: stop sync")
        return self.env.sync.stop(cause=f"{ctx.mode} {execution}") | {"epoch": epoch}

    def start_sync(self, ctx: TransitionContext, execution: str = "manual") -> dict[str, Any]:
        """Start sync again: both regions' loops resume in the roles the record now names."""
        epoch = self._set_sync(True, f"{ctx.mode} {execution}: start sync")
        dr = self.env.roles.current(self.env.topology).dr
        # A failover's DR broker is the one just lost: its region's loop waits for the failback.
        remote_loop = ctx.mode != "FAILOVER"
        return self.env.sync.start(dr_region=dr.region, remote_loop=remote_loop) | {"epoch": epoch}

    def _set_sync(self, running: bool, reason: str) -> int:
        assignment = self._assignment()
        if assignment.sync_running == running:
            return assignment.epoch  # a re-run: already so
        return self.env.roles.write(assignment.next(reason, sync_running=running)).epoch

    # -- configurations -------------------------------------------------------------------------
    def save_configuration(self, ctx: TransitionContext, broker: str, execution: str) -> dict[str, Any]:
        """Keep the revision the broker ran before this transition, where failback and audits find it."""
        configuration_id, revision, document = self.env.brokers.current_document(broker)
        key = f"transitions/{ctx.transition_started_at_ms}-{ctx.mode}/{broker}-revision-{revision:05d}.xml"
        self.env.s3.put_object(
            Bucket=self.env.bucket,
            Key=key,
            Body=document.encode("utf-8"),
            ContentType="application/xml",
            Metadata={"broker": broker, "configuration": configuration_id, "revision": str(revision)},
        )
        return {"broker": broker, "revision": revision, "key": key}

    def apply_configuration(self, ctx: TransitionContext, broker: str, role: Role) -> dict[str, Any]:
        """Render ``role`` for ``broker`` over what it runs now (customer settings stay) and make it pending.

        A network connector of the customer's that may forward a synced queue, and a setting
        under which capture would record what was not consumed (advisories off, a redelivery
        policy over a captured queue), are refused when an operator renders, but a transition goes on with them
        (they were added to the running broker, past the render): each is logged, counted as a
        configuration warning and returned, so the operator can fix it once the transition is done.
        """
        _, _, current = self.env.brokers.current_document(broker)
        after = self._after(ctx)
        document = render_configuration(after, role, base=current, refuse_unsafe_base=False)
        root = parse_configuration(document)
        forwarding = forwarding_connectors(root, after)
        for name, queues in forwarding.items():
            logger.warning("%s: %s", broker, refusal(name, queues))
        unsafe = unsafe_settings(root, after)
        for reason in unsafe:
            logger.warning("%s: %s", broker, reason)
        applied = self.env.brokers.apply(broker, document, f"BrokerSync {ctx.mode}: {role}")
        warnings = len(applied.warnings) + len(forwarding) + len(unsafe)
        if warnings:
            self.env.metrics.add_metric("ConfigurationWarnings", "Count", warnings)
        return {
            "broker": broker,
            "role": role,
            "configurationId": applied.configuration_id,
            "revision": applied.revision,
            "createdRevision": applied.created,
            "sanitizationWarnings": applied.warnings,
            "forwardingConnectors": forwarding,
            "unsafeSettings": unsafe,
        }

    def reboot(self, ctx: TransitionContext, applied: list[dict[str, Any]]) -> dict[str, Any]:
        """Reboot each broker that has not yet started on its applied revision."""
        rebooted = []
        for entry in applied:
            if self.env.brokers.needs_reboot(entry["broker"], int(entry["revision"])):
                self.env.brokers.reboot(entry["broker"])
                rebooted.append(entry["broker"])
        return {"rebooted": rebooted, "at": self._now_ms()}

    def broker_states(self, ctx: TransitionContext, brokers: list[str]) -> dict[str, Any]:
        states = {name: self.env.brokers.state(name) for name in brokers}
        running = all(state == RUNNING for state in states.values())
        return {
            "states": states,
            "allRunning": running,
            "timedOut": not running and self._now_ms() > ctx.running_deadline_ms,
        }

    def promote(self, ctx: TransitionContext) -> dict[str, Any]:
        self.env.brokers.promote(ctx.target, "SWITCHOVER" if ctx.mode == "SWITCHOVER" else "FAILOVER")
        return {"promoted": ctx.target}

    # -- roles and completion -------------------------------------------------------------------------
    def swap_roles(self, ctx: TransitionContext, execution: str) -> dict[str, Any]:
        assignment = self._assignment()
        reason = f"{ctx.mode} {execution}"
        done = assignment.primary == ctx.target if ctx.mode != "FAILBACK" else assignment.reason == reason
        if done:
            return {"primary": assignment.primary, "dr": assignment.dr, "epoch": assignment.epoch, "changed": False}
        # A failback's epoch records that the rejoining broker is synced again, and names it DR (a
        # broker in a third region replaces the lost one in the record too).
        updated = assignment.next(reason, dr=ctx.source) if ctx.mode == "FAILBACK" else assignment.swapped(reason)
        self.env.roles.write(updated)
        return {"primary": updated.primary, "dr": updated.dr, "epoch": updated.epoch, "changed": True}

    def complete(self, ctx: TransitionContext) -> dict[str, Any]:
        transition = self.env.transitions.read()
        started = ctx.transition_started_at_ms
        rto_s = round((self._now_ms() - started) / 1000, 3)
        if transition and transition.status == "in-progress":
            self.env.transitions.write(Transition(**{**asdict(transition), "status": "done"}))
        detail = {"mode": ctx.mode, "primary": ctx.target, "previous": ctx.source, "rtoSeconds": rto_s}
        self.env.metrics.add_metric(f"{ctx.mode.title()}RtoSeconds", "Seconds", rto_s)
        self.env.events.put_events(
            Entries=[
                {
                    "Source": "brokersync",
                    "DetailType": f"BrokerSync {ctx.mode.title()} Completed",
                    "Detail": json.dumps(detail),
                    "EventBusName": self.env.event_bus,
                }
            ]
        )
        return detail

    # -- failback ------------------------------------------------------------------------------------
    def remove_consumed(self, ctx: TransitionContext, max_seconds: float) -> dict[str, Any]:
        """Remove from the rejoining broker every message the ledger says was consumed since it left.

        Its queues still hold what was unconsumed when it went away, and the new primary's copy
        backlog flows in once the bridge connects; a key is therefore not given up on as missing
        until the new primary's outflow has caught up (``done``); after that the purge loop,
        with its usual cutoff, takes over. Its queues may also hold, at their heads, messages
        consumed on it just before it was lost whose removal its store lost (their keys are
        no longer pending): once caught up, after the pending keys' rounds, the heads are
        browsed for those (:func:`~brokersync.purge.late_copies.consumed_at_head`), and the
        catch-up is done only when every queue's head has been looked up.
        """
        after = self._after(ctx)
        try:
            outflow = self.env.statistics(after.primary).queue_stats([after.dr_name(q) for q in after.queues])
        except BrokerSyncError:
            outflow = {}
        caught_up = bool(outflow) and sum(s.size for s in outflow.values()) <= CAUGHT_UP_COPIES
        remover = self.env.remover(after.dr)
        service = PurgeService(
            self.env.ledger,
            remover,
            after,
            settings=PurgeSettings(missing_after=timedelta(days=3650)),
            metrics=self.env.metrics,
        )
        report = service.run(max_seconds=max_seconds, stop_when_stalled=True)
        removed, heads, at_head = report.purged, None, 0
        if caught_up:
            # After the rounds, so that what it removes is what no pending key named.
            heads = consumed_at_head(check_budget_s=max_seconds / 2, lost_at_ms=ctx.source_left_at_ms)
            at_head = heads.sweep(self.env.ledger, remover, after, self.env.metrics)
            if at_head:  # one more round marks any of them that was still pending (``_swept``)
                service.late_copies = heads
                report = service.run(max_seconds=1.0, stop_when_stalled=True)
                removed += report.purged
        return {
            "done": heads is not None and not heads.unchecked,
            "headsNotLookedUp": heads.unchecked if heads is not None else None,
            "removed": removed,
            "removedAtHead": at_head,
            "stillPending": report.pending,
            "copyBacklog": {name: s.size for name, s in outflow.items()},
        }
