"""Which broker plays primary right now, whether sync runs, and what that means for a region.

The topology file says which broker was primary when the pair was set up; a failover must
not rewrite it (it is the customer's file, and the old primary's region may be gone). The
current assignment is the *role record*, a control record in the ledger global table
(:mod:`brokersync.ledger.control`), so both regions read the same one. Its epoch increases
by one with every change and every write states the epoch it replaces, so two transitions
can never both win. Everything that acts on "the primary" or "the DR broker" (the relay,
the receipts trigger, the purge, the failover steps) reads the record first and acts only
in the role its region holds: after a failover the old region's loops fall idle by
themselves, and stopping sync is one write both regions follow.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from brokersync.exceptions import BrokerSyncError
from brokersync.ledger.control import ControlRecords
from brokersync.topology import Broker, Role, Topology

logger = logging.getLogger(__name__)

#: The control record's name in the ledger table.
ROLES_RECORD = "roles"


class RoleAssignmentError(BrokerSyncError):
    """The role record names brokers the topology does not have, or is not a role assignment."""


def _flag(value: object) -> bool:
    if not isinstance(value, bool):
        raise TypeError(f"sync_running must be true or false, got {value!r}")
    return value


def _overrides(value: object) -> dict[str, str]:
    if not isinstance(value, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        raise TypeError(f"active must map queue names to broker names, got {value!r}")
    return dict(value)


@dataclass(frozen=True)
class RoleAssignment:
    primary: str
    dr: str
    #: Increases by one with every change of the record, so two regions can tell which is newer;
    #: 0 means never written (roles as in the topology, sync running).
    epoch: int = 0
    changed_at: str = ""
    reason: str = ""
    #: False between a transition's StopSync and StartSync: every loop in both regions idles.
    sync_running: bool = True
    #: Active-active queues consumed on a broker other than ``primary`` (queue -> broker): the
    #: per-queue active side. Empty is the common case, every queue consumed on the primary.
    active: dict[str, str] = field(default_factory=dict)
    #: The ``reason`` of the epoch this one was made from (not stored): a write replaces only that
    #: version, so a transition that lost a cross-region race cannot write over the winner.
    based_on: str | None = field(default=None, compare=False)

    @classmethod
    def initial(cls, topology: Topology) -> RoleAssignment:
        return cls(primary=topology.primary.name, dr=topology.dr.name)

    def swapped(self, reason: str, now: datetime | None = None) -> RoleAssignment:
        """The pair's roles exchanged; every queue is consumed on the new primary (a failover or
        switchover moves all consumption, so no per-queue override outlives it)."""
        return replace(self.next(reason, now), primary=self.dr, dr=self.primary, active={})

    def active_side(self, queue: str) -> str:
        """The broker that consumes ``queue`` now (its override, else the pair's primary)."""
        return self.active.get(queue, self.primary)

    def moved(self, queues: str | Sequence[str], to: str, reason: str, now: datetime | None = None) -> RoleAssignment:
        """The next epoch with ``queues`` consumed on ``to`` (an override only where it differs from the primary)."""
        names = {queues} if isinstance(queues, str) else set(queues)
        active = {q: b for q, b in self.active.items() if q not in names}
        if to != self.primary:
            active |= dict.fromkeys(sorted(names), to)
        return self.next(reason, now, active=active)

    def next(self, reason: str, now: datetime | None = None, **changes: Any) -> RoleAssignment:
        """The next epoch of this record, with ``changes`` applied."""
        moment = (now or datetime.now(UTC)).isoformat(timespec="milliseconds")
        based_on = self.reason if self.epoch else None
        return replace(self, epoch=self.epoch + 1, changed_at=moment, reason=reason, based_on=based_on, **changes)

    def changed_at_ms(self) -> int | None:
        if not self.changed_at:
            return None
        return int(datetime.fromisoformat(self.changed_at).timestamp() * 1000)

    def to_json(self) -> str:
        return json.dumps({k: v for k, v in asdict(self).items() if k != "based_on"}, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> RoleAssignment:
        try:
            data = json.loads(text)
            return cls(
                primary=str(data["primary"]),
                dr=str(data["dr"]),
                epoch=int(data.get("epoch", 0)),
                changed_at=str(data.get("changed_at", "")),
                reason=str(data.get("reason", "")),
                sync_running=_flag(data.get("sync_running", True)),
                active=_overrides(data.get("active", {})),
            )
        except (ValueError, KeyError, TypeError, AttributeError, RecursionError) as e:
            raise RoleAssignmentError(f"role record is not a role assignment: {e}") from e


def apply_roles(topology: Topology, assignment: RoleAssignment | None) -> Topology:
    """The topology with roles as ``assignment`` says (as written when there is none).

    The record's primary decides; the DR broker is whichever other broker the topology names.
    So a pair re-paired with a broker in a third region (the lost broker's entry replaced in
    the topology) keeps its roles until the next transition writes the new name.
    """
    if assignment is None:
        return topology
    names = {b.name for b in topology.brokers}
    if assignment.primary not in names:
        raise RoleAssignmentError(f"role record names {assignment.primary!r} primary, topology has {sorted(names)}")
    check_active(topology, assignment)
    return topology if topology.primary.name == assignment.primary else topology.swapped()


def check_active(topology: Topology, assignment: RoleAssignment) -> None:
    """Refuse per-queue overrides the topology cannot honour: only active-active queues have a
    copy path back to the primary and capture on both brokers, so only they can be consumed on
    the DR broker without losing the consumption record."""
    names = {b.name for b in topology.brokers}
    for queue, broker in assignment.active.items():
        if broker not in names:
            raise RoleAssignmentError(
                f"role record makes {broker!r} active for {queue!r}, topology has {sorted(names)}"
            )
        try:
            mode = topology.queue(queue).mode
        except KeyError as e:
            raise RoleAssignmentError(f"role record names queue {queue!r}, which the topology does not sync") from e
        if mode != "active-active":
            raise RoleAssignmentError(f"queue {queue!r} is {mode}: only active-active queues can be consumed on DR")


def serves_region(broker: Broker, region: str | None) -> bool:
    """Whether a stack in ``region`` works on ``broker``: a broker that names no region is
    reachable from every stack (the local world, or a pair in one region), and so is every
    broker from a stack that names none; otherwise only its own region's."""
    return not broker.region or not region or broker.region == region


def roles_here(topology: Topology, region: str | None) -> set[Role]:
    """The roles this region's functions play under ``topology`` (roles already applied).

    A broker that names no region is reachable from every stack (the local world, or a pair
    in one region); otherwise a role belongs to the region its broker is in. A pair in one
    region therefore plays both roles in its one stack.
    """
    brokers: tuple[tuple[Role, Broker], ...] = (("primary", topology.primary), ("dr", topology.dr))
    return {role for role, broker in brokers if serves_region(broker, region)}


#: After a peer replica could not be read, it is not asked again for this long (it is likely lost).
PEER_BACKOFF_S = 30.0


class RoleStore:
    """The role record in the ledger table, shared by both regions.

    ``peers`` are the other regions' replicas. Replication is asynchronous and stalls while a
    region is cut off, so a region coming back reads its own replica's old epoch for a while;
    reading the peers too and taking the highest epoch keeps it from acting in a role it
    lost meanwhile. A peer that does not answer is skipped (for ``PEER_BACKOFF_S``): while a
    region is lost the survivor goes by its own replica, as it must.
    """

    def __init__(
        self, records: ControlRecords, peers: Sequence[ControlRecords] = (), clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.records = records
        self.peers = list(peers)
        self.clock = clock
        self._skip_until: dict[int, float] = {}

    def read(self) -> RoleAssignment | None:
        record = self.records.get(ROLES_RECORD)
        for index, peer in enumerate(self.peers):
            if self.clock() < self._skip_until.get(index, 0.0):
                continue
            try:
                theirs = peer.get(ROLES_RECORD)
            except BrokerSyncError as e:
                logger.warning("role record: peer replica unreadable, going by this region's: %s", e)
                self._skip_until[index] = self.clock() + PEER_BACKOFF_S
                continue
            if theirs is not None and (record is None or theirs.version > record.version):
                record = theirs
        if record is None:
            return None
        assignment = RoleAssignment.from_json(json.dumps(record.document))
        return replace(assignment, epoch=record.version)

    def assignment(self, topology: Topology) -> RoleAssignment:
        """The record, or the topology's roles with sync running when it was never written."""
        return self.read() or RoleAssignment.initial(topology)

    def write(self, assignment: RoleAssignment) -> RoleAssignment:
        """Store ``assignment`` as the epoch after the one it was made from, or refuse.

        :class:`~brokersync.failover.errors.TransitionConflictError` when the record is no
        longer at ``assignment.epoch - 1``: another transition wrote first.
        """
        document = {k: v for k, v in asdict(assignment).items() if k not in ("epoch", "based_on")}
        self.records.put(
            ROLES_RECORD,
            document,
            replaces=assignment.epoch - 1,
            writer=assignment.reason,
            replaces_writer=assignment.based_on,
        )
        return replace(assignment, based_on=None)

    def current(self, topology: Topology) -> Topology:
        return apply_roles(topology, self.read())
