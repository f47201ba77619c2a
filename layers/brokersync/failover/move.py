"""Moving one active-active queue's consumption to the other broker while every other queue keeps running.

A planned move loses nothing and duplicates nothing when, at the moment the role record
flips:

1. no application consumer is left on the queue on the old side (the operator stops them;
   BrokerSync cannot take a connection away from a broker without a reboot);
2. every departure the old side counted for the queue has been relayed into the ledger
   (the audit's captured count has reached the broker's dequeue counter);
3. every key recorded for the queue has been removed on the new side (nothing pending);
4. every removal the new side counted for the queue has been drained by its relay (the
   audit's captured count there has reached that broker's dequeue counter too). The relay
   judges an advisory by the role record it reads when it drains it: a purge removal still
   unread at the flip would be judged under the new roles, as the new side's consumption, and
   recorded, and its key would wait on the old side for a copy that is not there (the
   application consumed it there) until the missing cutoff, as a pending purge no purge can end.

The old side purges the queue afterwards, so the flip also makes sure a purge loop runs in
the old side's region (a pair's primary region runs none while it purges nothing).

The move waits for all four, up to its timeout (after which it fails and changes nothing,
unless the old side is lost: see ``MoveContext.old_side_lost``), and then writes the record
with the queue's new active side. From the loops' next poll the new side's relay records the queue's
consumption and the old side's purge removes it there. Until a loop has polled, it works
under the record it read last: a relay on the new side would still drain the queue's
advisories as the purge's own and record none of them. So the move succeeds only
``settle_s`` after the write (two polls of the role record and the end of a relay batch), and
the application's consumers start on the new side once the execution has succeeded; a
consumer started earlier risks duplicates, never loss. Nothing is reconfigured and no broker
restarts: both roles already render capture for active-active queues (:mod:`brokersync.sides`).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Annotated, Any

from pydantic import ConfigDict, Field, Strict, StrictBool, StrictStr, TypeAdapter, ValidationError

from brokersync.broker.stomp import StompConnector
from brokersync.capture.departures import Departures, read_departures
from brokersync.exceptions import BrokerUnavailableError
from brokersync.failover.errors import FailoverRequestError, MoveNotReadyError, TransitionConflictError
from brokersync.failover.steps import DRAIN_COUNT_LIMIT, FailoverEnvironment, pending_in_region
from brokersync.ledger.base import PendingKey
from brokersync.purge.selectors import selector_batches
from brokersync.role_gate import DEFAULT_POLL_S
from brokersync.roles import RoleAssignment, apply_roles
from brokersync.snapshot.browser import QueueBrowser
from brokersync.topology import Broker, Queue, Topology

logger = logging.getLogger(__name__)

#: How long a move waits for the old side to drain unless the request says otherwise.
DEFAULT_TIMEOUT_S = 600
MIN_TIMEOUT_S = 10
MAX_TIMEOUT_S = 3600
#: Pending keys a move from a lost side reads per status and looks for on the new side. The keys
#: whose copies stayed in the lost region's outflow stay pending, oldest first, until it returns
#: (the new side's purge cannot find them, and no copy path says they can no longer arrive): read
#: only :data:`DRAIN_COUNT_LIMIT` of them, a move saw none on the new side and went ahead while
#: newer keys' copies were still there to remove. A read this full still does not conclude.
LOST_SIDE_LOOKUP = 10 * DRAIN_COUNT_LIMIT
#: Seconds a status spends looking past the first :data:`DRAIN_COUNT_LIMIT` of them (the failover
#: steps function has 120 s); what it had no time for keeps the move waiting.
LOST_SIDE_LOOKUP_S = 30.0
#: After a role record write, every loop has polled it (twice) and ended the batch it was in.
LOOPS_FOLLOW_S = int(2 * DEFAULT_POLL_S + 2)


#: A count or a time on the wire: an int as JSON carries it (no ``true``, no ``"5"``), never negative.
_Count = Annotated[int, Strict(), Field(ge=0)]


@dataclass(frozen=True)
class MoveContext:
    """What the state machine carries between the move's steps.

    The plan step writes it and every later step reads it back from the execution's JSON, which
    anyone allowed to invoke the function can also write: :meth:`QueueMove.context` parses it
    strictly and checks it against the topology before a step acts on it.
    """

    __pydantic_config__ = ConfigDict(extra="forbid")

    #: The queues moved together, all consumed on ``source`` when the move was planned.
    queues: list[StrictStr]
    source: StrictStr
    target: StrictStr
    #: The role record's epoch the move was planned on: a flip over any other epoch is refused.
    epoch: _Count
    started_at_ms: _Count
    timeout_s: _Count
    done: StrictBool = False
    #: How long after the flip every loop of both regions works under the new record.
    settle_s: _Count = 0
    #: The old side's region is lost: its consumers and advisories cannot be read, so the move
    #: waits only for the new side's purge, and at its timeout moves anyway (nothing consumes the
    #: queue until it does). What the lost side consumed and had not relayed, and what the purge
    #: had not removed by then, may be delivered again; nothing is lost (every copy on the new
    #: side stays until consumed).
    old_side_lost: StrictBool = False

    def to_wire(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_wire(cls, raw: object) -> MoveContext:
        """``raw`` as a context, every field of its type; a :class:`FailoverRequestError` naming the fields if not."""
        if not isinstance(raw, dict):
            raise FailoverRequestError(f"a move context is a JSON object, got {type(raw).__name__}")
        try:
            return _MOVE_CONTEXT.validate_python(raw)
        except ValidationError as e:
            problems = "; ".join(f"{'.'.join(str(p) for p in err['loc']) or 'ctx'}: {err['msg']}" for err in e.errors())
            raise FailoverRequestError(f"not a move context: {problems}") from e

    def check(self, topology: Topology) -> MoveContext:
        """This context, once what it names is the topology's and it could have come from :func:`plan_move`."""
        brokers = sorted(b.name for b in topology.brokers)
        for field, name in (("source", self.source), ("target", self.target)):
            if name not in brokers:
                raise FailoverRequestError(f"not a move context: {field} must be one of {brokers}, got {name!r}")
        if not self.queues or len(set(self.queues)) != len(self.queues):
            raise FailoverRequestError("not a move context: queues must name at least one queue, each once")
        known = {q.name: q for q in topology.queues}
        for name in self.queues:
            if name not in known or not known[name].copies_both_ways:
                raise FailoverRequestError(
                    f"not a move context: {name!r} is not one of the topology's active-active queues"
                )
        if not self.done and self.source == self.target:
            raise FailoverRequestError("not a move context: a move still to make has different source and target")
        if not MIN_TIMEOUT_S <= self.timeout_s <= MAX_TIMEOUT_S:
            raise FailoverRequestError(
                f"not a move context: timeout_s must be from {MIN_TIMEOUT_S} to {MAX_TIMEOUT_S}, got {self.timeout_s}"
            )
        return self


_MOVE_CONTEXT = TypeAdapter(MoveContext)


def check_move_request(topology: Topology, raw: object) -> dict[str, Any]:
    """``raw``, once what it names and asks is checked against the topology alone.

    All of it is the caller's to fix whatever the role record says, so the CLI runs this before
    it asks AWS anything and reports a failure as a usage error; ``plan_move`` runs it first
    too, so the state machine refuses the same requests in the same words.
    """
    if not isinstance(raw, dict):
        raise FailoverRequestError(f"a move request is an object with queue and to, got {json.dumps(raw)[:200]}")
    given = [k for k in ("queue", "queues", "from") if k in raw]
    if len(given) != 1:
        raise FailoverRequestError("a move names exactly one of queue, queues or from")
    brokers = sorted(b.name for b in topology.brokers)
    if "from" in raw:
        if raw["from"] not in brokers:
            raise FailoverRequestError(f"from must be one of {brokers}, got {raw['from']!r}")
    else:
        queues = [raw["queue"]] if "queue" in raw else raw["queues"]
        if not isinstance(queues, list) or not queues:
            raise FailoverRequestError("queues must be a non-empty list of queue names")
        known = {q.name for q in topology.queues}
        for queue in queues:
            if not isinstance(queue, str) or queue not in known:
                raise FailoverRequestError(f"queue must be one of the topology's queues, got {queue!r}")
            if topology.queue(queue).mode != "active-active":
                raise FailoverRequestError(
                    f"{queue} is a {topology.queue(queue).mode} queue: only active-active queues can move on their own"
                )
    target, timeout, lost = raw.get("to"), raw.get("timeoutSeconds", DEFAULT_TIMEOUT_S), raw.get("oldSideLost", False)
    if target not in brokers:
        raise FailoverRequestError(f"to must be one of {brokers}, got {target!r}")
    if isinstance(timeout, bool) or not isinstance(timeout, int) or not MIN_TIMEOUT_S <= timeout <= MAX_TIMEOUT_S:
        raise FailoverRequestError(f"timeoutSeconds must be a whole number from {MIN_TIMEOUT_S} to {MAX_TIMEOUT_S}")
    if not isinstance(lost, bool):
        raise FailoverRequestError(f"oldSideLost must be true or false, got {lost!r}")
    return raw


def _requested_queues(topology: Topology, assignment: RoleAssignment, raw: dict[str, Any]) -> list[str]:
    """The queues a checked request names: ``queue``, ``queues``, or ``from`` (every active-active queue consumed
    there now, by the role record)."""
    if "from" in raw:
        return [q.name for q in topology.queues if q.copies_both_ways and assignment.active_side(q.name) == raw["from"]]
    return list(dict.fromkeys([raw["queue"]] if "queue" in raw else raw["queues"]))


def plan_move(topology: Topology, assignment: RoleAssignment, raw: object, now_ms: int) -> MoveContext:
    """The move ``raw`` asks for, checked against the topology and the role record (the CLI's ``--plan`` too)."""
    raw = check_move_request(topology, raw)
    target, timeout, lost = raw.get("to"), raw.get("timeoutSeconds", DEFAULT_TIMEOUT_S), raw.get("oldSideLost", False)
    queues = _requested_queues(topology, assignment, raw)
    if not assignment.sync_running:
        raise FailoverRequestError(f"sync is stopped ({assignment.reason}): move the queue once it runs again")
    moving = [q for q in queues if assignment.active_side(q) != target]
    sources = sorted({assignment.active_side(q) for q in moving})
    if len(sources) > 1:
        raise FailoverRequestError(f"the queues are consumed on {sources}: move those of one broker at a time")
    source = sources[0] if sources else str(target)
    return MoveContext(
        moving or queues,
        source,
        str(target),
        assignment.epoch,
        now_ms,
        timeout,
        not moving,
        settle_s=LOOPS_FOLLOW_S,
        old_side_lost=lost,
    )


def messages_on(connector: StompConnector, queue: Queue, message_ids: list[str]) -> set[str]:
    """Which of ``message_ids`` are on ``queue`` now: a selector browse, so nothing is delivered or counted."""
    browser = QueueBrowser(connector, idle_timeout_s=10.0)
    found: set[str] = set()
    for _batch, selector in selector_batches(message_ids, "message-id"):
        found.update(line.message_id for line in browser.lines(queue, selector=selector) if line.message_id)
    return found


#: Which of the given message ids are on a broker's queue (``messages_on`` through the broker's connector).
MessagesOn = Callable[[Broker, Queue, list[str]], set[str]]


def _still_waiting(
    ctx: MoveContext,
    unreadable: str,
    source: Departures,
    pending: dict[str, int],
    source_pending: dict[str, int],
    beyond_read: list[str],
    at_target: Departures,
) -> list[str]:
    """What a move that timed out still waits for, in words an operator can act on."""
    waits = []
    if unreadable:
        waits.append(
            f"{ctx.source} cannot be read ({unreadable}); if its region is lost, start the move again "
            "with oldSideLost (brokersync move-queue --old-side-lost)"
        )
    if at_target.unreadable:
        waits.append(f"{ctx.target} cannot be read ({at_target.unreadable})")
    for name in ctx.queues:
        if source.consumers[name]:
            waits.append(f"{source.consumers[name]} application consumer(s) still on {name} at {ctx.source}")
        if source.unrelayed[name]:
            waits.append(f"{source.unrelayed[name]} departures of {name} from {ctx.source} not yet relayed")
        if pending[name]:
            more = "at least " if name in beyond_read else ""
            waits.append(f"{more}{pending[name]} consumed keys of {name} not yet removed from {ctx.target}")
        elif source_pending.get(name):
            waits.append(
                f"{source_pending[name]} consumed keys of {name} still pending in the ledger replica "
                f"of {ctx.source}'s region (replication between the regions is behind)"
            )
        if at_target.unrelayed[name]:
            waits.append(
                f"{at_target.unrelayed[name]} removals of {name} from {ctx.target} not yet drained by its relay "
                f"(is the relay of {ctx.target}'s region running?)"
            )
    return waits


class QueueMove:
    def __init__(self, env: FailoverEnvironment, messages_on_broker: MessagesOn | None = None) -> None:
        self.env = env
        self.messages_on = messages_on_broker or (
            lambda broker, queue, ids: messages_on(env.remover(broker).connector, queue, ids)
        )

    def _now_ms(self) -> int:
        return int(self.env.clock() * 1000)

    def _broker(self, name: str) -> Broker:
        return next(b for b in self.env.topology.brokers if b.name == name)

    def plan(self, raw: object) -> MoveContext:
        """Check the request against the topology and the role record; say where the queue is consumed now."""
        return plan_move(self.env.topology, self.env.roles.assignment(self.env.topology), raw, self._now_ms())

    def context(self, raw: object) -> MoveContext:
        """The ``ctx`` a step received, parsed strictly and checked against the topology."""
        return MoveContext.from_wire(raw).check(self.env.topology)

    def status(self, ctx: MoveContext) -> dict[str, Any]:
        """What the move still waits for; raises once the timeout has passed with anything left."""
        self._same_epoch(ctx)
        limit = LOST_SIDE_LOOKUP if ctx.old_side_lost else DRAIN_COUNT_LIMIT
        keys = {q: self.env.ledger.pending(q, limit=limit, read_only=True) for q in ctx.queues}
        pending = {q: len(keys[q]) for q in ctx.queues}
        # A full read says "at least this many": what lies beyond it was not looked at.
        beyond_read = [q for q in ctx.queues if pending[q] >= limit]
        with_lost_side, target_unreadable, not_looked_up = 0, "", {}
        if ctx.old_side_lost:
            with_lost_side, target_unreadable, not_looked_up = self._pending_on_new_side(ctx, keys, pending)
        # A lost side is not read: nothing more leaves it, and nothing of it can be relayed now.
        source = Departures.none(ctx.queues) if ctx.old_side_lost else self._departures(ctx.source, ctx.queues)
        unreadable = source.unreadable
        at_target = self._departures(ctx.target, ctx.queues)
        target_unreadable = target_unreadable or at_target.unreadable
        # Where the old side's relay wrote the keys: this region's replica may not have them yet
        # (asynchronous replication, no order across items: the audit's captured count can
        # arrive before the keys it counts). A lost side's replica is not read.
        at_source = None
        if not ctx.old_side_lost:
            at_source = pending_in_region(self.env.ledger_in, self._broker(ctx.source).region, ctx.queues)
        source_pending = at_source.pending if at_source else {}
        if at_source and at_source.unreadable and not unreadable:
            unreadable = f"its region's ledger replica: {at_source.unreadable}"
        left = (
            sum(source.consumers.values())
            + sum(source.unrelayed.values())
            + sum(pending.values())
            + sum(source_pending.values())
            + sum(at_target.unrelayed.values())
        )
        # Beyond a full read there may be keys whose copies are on the new side (a lost side's
        # stuck keys fill the oldest places): the move waits, up to its timeout, rather than
        # leave them to be delivered again.
        ready = left == 0 and not unreadable and not target_unreadable and not beyond_read and not not_looked_up
        figures = {
            "ready": ready,
            "consumersOnOldSide": sum(source.consumers.values()),
            "departuresNotRelayed": sum(source.unrelayed.values()),
            "removalsNotRelayedOnNewSide": sum(at_target.unrelayed.values()),
            "advisoriesWaiting": source.advisories,
            "pendingPurge": sum(pending.values()),
            "pendingPurgeInSourceRegion": sum(source_pending.values()),
            "pendingWithLostSide": with_lost_side,
            "pendingReadFull": beyond_read,
            "pendingNotLookedUp": not_looked_up,
            "waitedSeconds": round((self._now_ms() - ctx.started_at_ms) / 1000, 1),
            "oldSideLost": ctx.old_side_lost,
            "oldSideUnreadable": unreadable or None,
        }
        if target_unreadable:
            figures["newSideUnreadable"] = target_unreadable
        if not ready and figures["waitedSeconds"] > ctx.timeout_s and ctx.old_side_lost:
            # The lost side consumes nothing, so the queue has no consumer until the move: at
            # its timeout it moves anyway, with what the new side's purge has not removed yet
            # at risk of a second delivery there (as a failover moves with its pending purge).
            figures |= {"ready": True, "movedWithPendingPurge": figures["pendingPurge"]}
            logger.warning(
                "%s moved to %s at its %ss timeout with %s consumed messages still on %s (possible duplicates)",
                ", ".join(ctx.queues),
                ctx.target,
                ctx.timeout_s,
                figures["pendingPurge"],
                ctx.target,
            )
            return figures
        if not ready and figures["waitedSeconds"] > ctx.timeout_s:
            waits = _still_waiting(ctx, unreadable, source, pending, source_pending, beyond_read, at_target)
            raise MoveNotReadyError(
                f"{', '.join(ctx.queues)} still consumed on {ctx.source} after {ctx.timeout_s}s: " + "; ".join(waits)
            )
        return figures

    def _departures(self, broker: str, queues: list[str]) -> Departures:
        """What ``broker`` counted leaving ``queues`` that its relay has not read yet."""
        statistics = self.env.statistics(self._broker(broker))
        return read_departures(statistics, self.env.ledger.backend, queues)  # type: ignore[attr-defined]

    def _pending_on_new_side(
        self, ctx: MoveContext, keys: dict[str, list[PendingKey]], pending: dict[str, int]
    ) -> tuple[int, str, dict[str, int]]:
        """Count in ``pending`` only the keys whose copies are on the new side; say how many are not.

        A key consumed on the lost side whose copy was still in that broker's outflow has no
        message on the new side to remove until the region returns; waiting for it would hold
        the move to its timeout. Only what the new side's purge can remove is waited for.
        Returns the keys found only with the lost side, why the new side could not be read, and
        per queue the keys not looked up (the lookup stopped at a key it found, or ran out of time).
        """
        target = self._broker(ctx.target)
        started = time.monotonic()
        with_lost_side, unreadable, not_looked_up = 0, "", {}
        for name in ctx.queues:
            ids = [k.message_id for k in keys[name] if k.message_id]
            try:
                present, looked = self._on_new_side(target, name, ids, started)
            except BrokerUnavailableError as e:  # not known this time: all of them waited for
                unreadable, present, looked = str(e), set(ids), len(ids)
            if looked < len(ids):
                not_looked_up[name] = len(ids) - looked
            with_lost_side += looked - len(present)
            pending[name] = len(present)
        return with_lost_side, unreadable, not_looked_up

    def _on_new_side(self, target: Broker, name: str, ids: list[str], started: float) -> tuple[set[str], int]:
        """Which of ``ids`` (oldest first) are on the new side, and how many were looked up.

        The first :data:`DRAIN_COUNT_LIMIT` always are. Further ones only while none was found
        (one found already keeps the move waiting) and within :data:`LOST_SIDE_LOOKUP_S`: a
        selector browse of a deep queue is not free, and the step has a Lambda's time.
        """
        queue = self.env.topology.queue(name)
        present: set[str] = set()
        looked = 0
        while looked < len(ids) and not present:
            if looked and time.monotonic() - started > LOST_SIDE_LOOKUP_S:
                break
            chunk = ids[looked : looked + DRAIN_COUNT_LIMIT]
            present = self.messages_on(target, queue, chunk)
            looked += len(chunk)
        return present, looked

    def flip(self, ctx: MoveContext, execution: str) -> dict[str, Any]:
        """Write the queue's new active side, if the old side is still drained and no one else wrote first."""
        assignment = self.env.roles.assignment(self.env.topology)
        if all(assignment.active_side(q) == ctx.target for q in ctx.queues):
            loop = {} if ctx.old_side_lost else self.env.sync.ensure_purge_loop(self._broker(ctx.source).region)
            return {"epoch": assignment.epoch, "changed": False, **loop}
        self._same_epoch(ctx, assignment)
        status = self.status(ctx)  # raises at the timeout, as the drain status does
        if not status["ready"]:
            # Drained a moment ago, not now: a consumer came back on the old side, or the keys
            # read moved on (the oldest pending ones were removed and newer ones are on the new
            # side). Nothing is written; the state machine waits for the drain again.
            return {"epoch": assignment.epoch, "changed": False, "notDrained": True, "status": status}
        updated = assignment.moved(ctx.queues, ctx.target, f"MOVE {','.join(ctx.queues)} {execution}")
        apply_roles(self.env.topology, updated)  # refuses an override the topology cannot honour
        written = self.env.roles.write(updated)
        loop: dict[str, Any] = {}
        if not ctx.old_side_lost:  # the old side purges the queue from now on, by its region's loop
            loop = self.env.sync.ensure_purge_loop(self._broker(ctx.source).region)
        return {"epoch": written.epoch, "changed": True, "active": written.active, **loop}

    def complete(self, ctx: MoveContext) -> dict[str, Any]:
        seconds = round((self._now_ms() - ctx.started_at_ms) / 1000, 3)
        detail = {"queues": ctx.queues, "from": ctx.source, "to": ctx.target, "seconds": seconds}
        self.env.metrics.add_metric("QueueMoveSeconds", "Seconds", seconds)
        self.env.events.put_events(
            Entries=[
                {
                    "Source": "brokersync",
                    "DetailType": "BrokerSync Queue Moved",
                    "Detail": json.dumps(detail),
                    "EventBusName": self.env.event_bus,
                }
            ]
        )
        return detail

    def _same_epoch(self, ctx: MoveContext, assignment: RoleAssignment | None = None) -> None:
        assignment = assignment or self.env.roles.assignment(self.env.topology)
        if assignment.epoch != ctx.epoch:
            raise TransitionConflictError(
                f"the role record moved from epoch {ctx.epoch} to {assignment.epoch} ({assignment.reason}) "
                "while the move waited: nothing was changed, start the move again"
            )
