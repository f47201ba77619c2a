"""Whether this region acts in a role right now, read from the role record both regions share.

Every loop of a regional stack (the relay and the receipts trigger for the primary, the
purge for the DR broker) asks the gate before it touches a broker, and keeps asking while it
works: a role change or a stopped sync anywhere reaches every loop within ``poll_s``
seconds, so the old region's loops fall idle after a failover and no two regions ever run a
relay or a purge against the same broker for longer than that.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass

from brokersync.exceptions import BrokerSyncError
from brokersync.failover.control_plane import broker_id
from brokersync.roles import RoleStore, apply_roles, roles_here
from brokersync.sides import Duty, capture_duties, in_region, purge_duties
from brokersync.topology import Role, Topology

logger = logging.getLogger(__name__)


#: How often a working loop re-reads the role record (one strongly consistent GetItem).
DEFAULT_POLL_S = 2.0
#: A pulse's wait that overran by this much means the process was frozen (a region partitioned
#: and back, a VM paused): the roles it works under may have moved meanwhile.
FROZEN_AFTER_S = 3.0
#: How often a working loop checks that it was not frozen.
FREEZE_PULSE_S = 0.25


@dataclass(frozen=True)
class Standing:
    """What the role record says this region should do now."""

    acting: bool
    #: The topology with the record's roles applied.
    topology: Topology
    epoch: int
    #: Why not, for the log and the function's result ("" when acting).
    reason: str = ""
    sync_running: bool = True
    #: The brokers this region works on and what for (a gate made with ``per_queue``; else empty).
    duties: tuple[Duty, ...] = ()


class RoleGate:
    def __init__(
        self,
        store: RoleStore,
        topology: Topology,
        role: Role,
        region: str | None,
        *,
        poll_s: float = DEFAULT_POLL_S,
        sleep: Callable[[float], None] = time.sleep,
        per_queue: bool = False,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """``per_queue`` (the relay and the purge): act wherever this region has a broker that
        captures or purges some queue (:mod:`brokersync.sides`), not only in the pair-level role."""
        self.store = store
        self.topology = topology
        self.role = role
        self.region = region
        self.poll_s = poll_s
        self.sleep = sleep
        self.per_queue = per_queue
        self.clock = clock

    def standing(self) -> Standing:
        assignment = self.store.assignment(self.topology)
        now = apply_roles(self.topology, assignment)
        if not assignment.sync_running:
            return Standing(False, now, assignment.epoch, f"sync is stopped ({assignment.reason})", sync_running=False)
        if self.per_queue:
            every = capture_duties(now, assignment) if self.role == "primary" else purge_duties(now, assignment)
            duties = in_region(every, self.region)
            if duties:
                return Standing(True, now, assignment.epoch, duties=duties)
        if self.role not in roles_here(now, self.region):
            broker = now.primary if self.role == "primary" else now.dr
            return Standing(False, now, assignment.epoch, f"the {self.role} broker {broker.name} is in {broker.region}")
        return Standing(True, now, assignment.epoch)

    def standing_of(self, broker_arn: str | None, broker_ids: Mapping[str, str] | None = None) -> Standing:
        """Whether to act for the broker an event came from (an event source mapping's ``eventSourceArn``).

        A pair in one region has a mapping on each broker in one stack, so the region alone
        cannot say which broker plays primary; the event's broker can. ``broker_ids``
        overrides the topology's ids (locally, the emulator's). A broker the topology does
        not name falls back to the region's standing.
        """
        standing = self.standing()
        wanted = standing.topology.primary if self.role == "primary" else standing.topology.dr
        ids = {b.name: broker_id((broker_ids or {}).get(b.name) or b.broker_id) for b in self.topology.brokers}
        source = next((name for name, i in ids.items() if broker_arn and i == broker_id(broker_arn)), None)
        if source is None or not standing.sync_running:
            return standing
        if source != wanted.name:
            return Standing(False, standing.topology, standing.epoch, f"{source} does not play {self.role} now")
        return Standing(True, standing.topology, standing.epoch)

    def wait_to_act(self, seconds: float, *, while_stopped_only: bool = False) -> Standing:
        """Poll until this region acts in the role or ``seconds`` pass; the last standing read.

        ``while_stopped_only`` waits only while sync is stopped (a transition that will end
        soon) and returns at once when the role is another region's.
        """
        deadline = time.monotonic() + seconds
        standing = self.standing()
        while (
            not standing.acting
            and not (while_stopped_only and standing.sync_running)
            and time.monotonic() + self.poll_s < deadline
        ):
            self.sleep(self.poll_s)
            standing = self.standing()
        return standing

    def still_holds(self, standing: Standing) -> bool:
        """Whether the role record, read now, is still at ``standing``'s epoch; False when it cannot be read.

        :meth:`watch` notices a new epoch within ``poll_s``; work that acts on the roles in a way
        a later read could contradict (the relay draining a queue's advisories as the purge's
        own) asks this instead, after the input it acts on arrived, so no poll interval and no
        slow read can leave it acting under roles that already moved.
        """
        try:
            return self.store.assignment(self.topology).epoch == standing.epoch
        except BrokerSyncError as e:
            logger.warning("role record unreadable, not acting on the roles read last: %s", e)
            return False

    @contextmanager
    def watch(self, standing: Standing) -> Iterator[threading.Event]:
        """An event set once the record moves past ``standing``'s epoch; the work stops on it.

        Any new epoch stops the work, not only one that takes the role away: the roles the
        work was started with are the ones it must not outlive. A record that cannot be read
        (throttled, the table's region impaired) leaves the work running, as the roles last
        read still hold.

        A process that was frozen for longer than :data:`FROZEN_AFTER_S` stops its work within
        :data:`FREEZE_PULSE_S` of running again, before any read: its own region's replica is the one that was cut off
        with it, so the first read after a thaw can be slow or stale, and the work would go on
        meanwhile beside the region that took its role. The loop asks the gate again before
        its next pass, so a pause with the roles unchanged costs one pass cut short.
        """
        moved = threading.Event()
        done = threading.Event()

        def poll() -> None:
            while not done.wait(self.poll_s):
                try:
                    epoch = self.store.assignment(self.topology).epoch
                except BrokerSyncError as e:
                    logger.warning("role record unreadable, keeping the roles read last: %s", e)
                    continue
                if epoch != standing.epoch:
                    logger.info("role record moved from epoch %s to %s: stopping", standing.epoch, epoch)
                    moved.set()
                    return

        def pulse() -> None:
            """Notices a freeze whatever the poll is doing (a read in flight when it began, too)."""
            while True:
                waited_from = self.clock()
                if done.wait(FREEZE_PULSE_S):
                    return
                frozen_s = self.clock() - waited_from - FREEZE_PULSE_S
                if frozen_s > FROZEN_AFTER_S:
                    logger.warning("process frozen for about %.0f s: stopping until the role record is read", frozen_s)
                    moved.set()
                    return

        threads = [threading.Thread(target=t, name=f"role-{t.__name__}", daemon=True) for t in (poll, pulse)]
        for thread in threads:
            thread.start()
        try:
            yield moved
        finally:
            done.set()
            for thread in threads:  # a read in flight after a stop is left to finish on its own
                thread.join(timeout=0.1 if moved.is_set() else self.poll_s + 1)
