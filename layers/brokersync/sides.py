"""Which broker captures and which purges each queue, now that a queue may be consumed on either.

The pair-level roles are the common case: every queue is consumed on the primary, captured
there and purged on the DR broker. An active-active queue can be consumed on the DR broker
instead (the role record's per-queue ``active`` overrides); then the DR broker captures it
and the primary purges it. Every loop works on one broker at a time with the library it
always had (the relay, the audit, the purge service), given a *view*: the topology with that
broker in the role the loop plays and only the queues it plays it for. With no active-active
queues the views are the topology itself, so pairs without them run exactly as before.

Both roles render capture for active-active queues (so moving a queue needs no reboot), which
means the passive broker also raises an advisory for each message the purge removes there.
The relay on that broker drains those (``passive``) without recording them: they are removals
of messages already recorded as consumed on the other broker.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from brokersync.roles import RoleAssignment, serves_region
from brokersync.side_by_side import each
from brokersync.topology import Broker, Topology

T = TypeVar("T")


@dataclass(frozen=True)
class Duty:
    """One loop's work on one broker."""

    broker: Broker
    #: ``broker`` as primary (capture) or DR (purge), with only the queues this duty is for.
    view: Topology
    #: The whole topology with ``broker`` in that role: what advisories are parsed against.
    whole: Topology
    #: Capture only: active-active queues consumed elsewhere whose advisories here are the
    #: purge's own removals; drained and counted, never recorded.
    passive: frozenset[str] = frozenset()

    @property
    def queues(self) -> list[str]:
        return [q.name for q in self.view.captured_queues]


def _as(topology: Topology, broker: Broker, role: str) -> Topology:
    """``topology`` (roles applied) with ``broker`` in ``role``."""
    plays = topology.primary if role == "primary" else topology.dr
    return topology if plays.name == broker.name else topology.swapped()


def _duty(topology: Topology, broker: Broker, role: str, queues: list[str], passive: set[str] | None = None) -> Duty:
    whole = _as(topology, broker, role)
    # model_copy skips validation: a view may hold no queues (a broker that only drains).
    view = whole.model_copy(update={"queues": [q for q in whole.queues if q.name in queues]})
    return Duty(broker, view, whole, frozenset(passive or ()))


def relays_on_dr(topology: Topology) -> bool:
    """Does the DR broker run a relay too? Yes when queues are active-active (copied both ways)."""
    return any(q.copies_both_ways for q in topology.queues) and not topology.is_crdr


def _elsewhere(topology: Topology, assignment: RoleAssignment, broker: Broker) -> set[str]:
    """Active-active queues consumed on a broker other than ``broker``."""
    return {q.name for q in topology.queues if q.copies_both_ways and assignment.active_side(q.name) != broker.name}


def capture_duties(topology: Topology, assignment: RoleAssignment) -> list[Duty]:
    """The relays to run: always on the primary; on the DR broker when active-active queues exist.

    ``topology`` has the pair's roles applied by :func:`brokersync.roles.apply_roles`, which
    also refuses overrides the topology cannot honour. The
    primary's view keeps every queue but the active-active ones consumed on DR, so a pair
    without overrides captures exactly as it always did.
    """
    primary, dr = topology.primary, topology.dr
    passive = _elsewhere(topology, assignment, primary)
    duties = [_duty(topology, primary, "primary", [q.name for q in topology.queues if q.name not in passive], passive)]
    if relays_on_dr(topology):
        passive = _elsewhere(topology, assignment, dr)
        here = [q.name for q in topology.queues if q.copies_both_ways and q.name not in passive]
        duties.append(_duty(topology, dr, "primary", here, passive))
    return duties


def purge_duties(topology: Topology, assignment: RoleAssignment) -> list[Duty]:
    """The purges to run: on the DR broker for what the primary consumes, and on the primary
    for active-active queues consumed on the DR broker (only while some are)."""
    primary, dr = topology.primary, topology.dr
    on_dr = {q for q, b in assignment.active.items() if b == dr.name}
    duties = [_duty(topology, dr, "dr", [q.name for q in topology.queues if q.name not in on_dr])]
    if on_dr:
        duties.append(_duty(topology, primary, "dr", sorted(on_dr)))
    return duties


def in_region(duties: Sequence[Duty], region: str | None) -> tuple[Duty, ...]:
    """The duties a stack in ``region`` runs (a broker without a region, or no region: every one)."""
    return tuple(d for d in duties if serves_region(d.broker, region))


def run_each(duties: Sequence[Duty], work: Callable[[Duty], T]) -> list[T]:
    """``work`` for every duty, side by side (a pair in one region relays from both brokers in
    one invocation); the first failure is raised once all have ended, so none is cut short."""
    return each(duties, work, workers=len(duties), name="duty")
