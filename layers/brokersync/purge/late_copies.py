"""Copies that reach DR after their message was purged: the bridge's redeliveries after a reconnect.

When the bridge's connection breaks with copies in flight (a network blip between regions, a
region partitioned and back), the DR broker may have stored some of them while their acks never
reached the primary. The primary then redelivers those over the new connection, with their
redelivery counter raised. If the purge removed the first copy in between, ActiveMQ stores the
second one (its store rejects only a duplicate it still holds), while the ledger already says
purged, so no round would ever look for it again: a consumed message stays on DR, a duplicate
after the next failover. Measured in the local world: a DR region partitioned for 12 s left 4
to 23 such copies.

Such a copy is always marked redelivered (the primary raised its counter before resending), and
on a DR queue little else is: DR queues have no consumers, and the purge never redelivers what
it does not remove. So every ``interval_s`` the sweep browses each synced DR queue with the
selector ``JMSRedelivered = TRUE`` (a browse: nothing delivered, nothing counted), keeps the
copies whose message id the ledger holds as consumed, and removes those by message id as the
purge removes any message. A redelivered copy the ledger does not hold as consumed stays: the
only copy of a message still on the primary is one of those, and the invariant holds for it.
The ledger is asked as the consumer-side dedupe asks it (``DEFAULT_CONSUME_LAG``): a late copy
of a message consumed later than that after it was produced is left to the reconciliation.

A sweep is bounded in time, not only in copies: each copy costs one ledger query, and a DR
broker back from an outage can hold thousands of redelivered messages that nobody consumed
(the bridge raised their counters too). An unbounded sweep of 500 lookups held the first
purge invocation after a failback for over a minute, so that the Lambda timed out before
any consumed message was removed (the region-loss drill, decision 0013). So a sweep stops
looking up after ``check_budget_s`` (and before the invocation's deadline), and a copy
found unconsumed is not looked up again for ``recheck_after_s``: the next sweeps reach the
copies behind it. Skipping it is safe: a message consumed after that lookup has a pending
ledger entry, and the purge's own selector removes every copy of it that is on DR then.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field

from brokersync.broker.stomp import StompConnector
from brokersync.exceptions import BrokerSyncError
from brokersync.keys import InvalidKeyError
from brokersync.ledger.base import LedgerStore
from brokersync.ledger.ledger import DEFAULT_CONSUME_LAG
from brokersync.metrics import MetricsSink
from brokersync.purge.remover import SelectorRemover
from brokersync.snapshot.browser import QueueBrowser, SnapshotLine
from brokersync.topology import Queue, Topology

logger = logging.getLogger(__name__)

#: What selects the bridge's redelivered copies on a DR queue.
REDELIVERED = "JMSRedelivered = TRUE"


@dataclass
class LateCopySweep:
    """Removes redelivered copies of consumed messages; one instance per warm process (it keeps the pace)."""

    #: Seconds between sweeps (a browse of each DR queue with a selector).
    interval_s: float = 10.0
    #: Redelivered copies looked up in the ledger per queue per sweep; more wait for the next sweep.
    max_copies: int = 500
    #: Redelivered messages browsed per queue per sweep, to reach past those recently found unconsumed.
    max_browse: int = 5000
    #: Browse idle timeout: a DR broker that sends nothing for this long fails the sweep.
    browse_timeout_s: float = 10.0
    #: Seconds of ledger lookups per sweep (one query each); the rest wait for the next sweep.
    check_budget_s: float = 2.0
    #: A copy the ledger did not hold as consumed is looked up again only after this long.
    recheck_after_s: float = 60.0
    clock: Callable[[], float] = time.monotonic
    _last: float | None = field(default=None, init=False)
    #: How long a removed copy's message id is remembered for the purge to mark (see :meth:`removed`).
    remember_removed_s: float = 3600.0
    #: Message id -> when the ledger last answered "not consumed" for it.
    _unconsumed: dict[str, float] = field(default_factory=dict, init=False)
    #: Queue -> message ids this sweep removed -> when.
    _removed: dict[str, dict[str, float]] = field(default_factory=dict, init=False)

    def removed(self, queue: str) -> set[str]:
        """Message ids of ``queue`` removed by recent sweeps: the purge marks their pending entries purged."""
        oldest = self.clock() - self.remember_removed_s
        recent = {mid: at for mid, at in self._removed.get(queue, {}).items() if at > oldest}
        self._removed[queue] = recent
        return set(recent)

    def forget(self, queue: str, message_ids: Iterable[str]) -> None:
        """The purge has marked these: no need to remember them."""
        held = self._removed.get(queue, {})
        for message_id in message_ids:
            held.pop(message_id, None)

    def due(self) -> bool:
        return self._last is None or self.clock() - self._last >= self.interval_s

    def sweep(
        self,
        ledger: LedgerStore,
        remover: SelectorRemover,
        topology: Topology,
        metrics: MetricsSink,
        *,
        deadline: float | None = None,
    ) -> int:
        """One sweep over every queue whose consumption is captured; the number of late copies removed."""
        self._last = self.clock()
        self._forget_old_answers()
        removed = 0
        stop_at = self._last + self.check_budget_s
        for queue in topology.captured_queues:
            consumed = self._consumed_copies(ledger, remover.connector, queue, stop_at, deadline)
            if not consumed:
                continue
            result = remover.remove(queue.name, consumed, deadline=deadline)
            removed += len(result.removed)
            now = self.clock()
            self._removed.setdefault(queue.name, {}).update(dict.fromkeys(result.removed, now))
            if result.removed:
                logger.warning(
                    "%d late copies of consumed messages removed from %s (bridge redeliveries)",
                    len(result.removed),
                    queue.name,
                )
            if result.error is not None:
                metrics.add_metric("LateCopiesRemoved", "Count", removed)
                raise result.error
        metrics.add_metric("LateCopiesRemoved", "Count", removed)
        return removed

    def _forget_old_answers(self) -> None:
        """Drop "not consumed" answers older than ``recheck_after_s`` (bounds the memory they take)."""
        oldest = self.clock() - self.recheck_after_s
        self._unconsumed = {mid: at for mid, at in self._unconsumed.items() if at > oldest}

    def _browse(self, connector: StompConnector, queue: Queue) -> Iterator[SnapshotLine]:
        """Every redelivered message on ``queue``, browsed: nothing delivered, nothing counted."""
        browser = QueueBrowser(connector, idle_timeout_s=self.browse_timeout_s, prefetch=self.max_copies)
        return browser.lines(queue, selector=REDELIVERED)

    def _redelivered(self, connector: StompConnector, queue: Queue) -> Iterator[SnapshotLine]:
        """Redelivered messages on ``queue`` not recently found unconsumed, from the first ``max_browse``."""
        lines = self._browse(connector, queue)
        try:
            for browsed, line in enumerate(lines, start=1):
                if line.message_id not in self._unconsumed:
                    yield line
                if browsed >= self.max_browse:
                    return
        finally:
            lines.close()  # a generator: closing it ends the browse subscription

    def _consumed_copies(
        self,
        ledger: LedgerStore,
        connector: StompConnector,
        queue: Queue,
        stop_at: float,
        deadline: float | None = None,
    ) -> list[str]:
        """Message ids of redelivered copies on ``queue`` that the ledger holds as consumed.

        Looks up at most ``max_copies`` copies, and none once ``stop_at`` (this sweep's clock)
        or ``deadline`` (``time.monotonic()``) has passed.
        """
        copies = []
        for line in self._redelivered(connector, queue):
            copies.append(line)
            if len(copies) >= self.max_copies:
                break
        consumed = []
        for line in copies:
            if self.clock() >= stop_at or (deadline is not None and time.monotonic() >= deadline):
                break
            if not line.key or not line.message_id:
                continue
            try:
                entries = ledger.consumed_entries(queue.name, line.key, DEFAULT_CONSUME_LAG)
            except (InvalidKeyError, ValueError) as e:  # a key the ledger cannot hold was never recorded
                logger.info("late copy %s of %s not checked: %s", line.message_id, queue.name, e)
                self._unconsumed[line.message_id] = self.clock()
                continue
            except BrokerSyncError as e:  # the ledger is unavailable: the rest wait for the next sweep
                logger.warning("late copies of %s not checked: %s", queue.name, e)
                break
            if any(entry.message_id == line.message_id for entry in entries):
                consumed.append(line.message_id)
            else:
                self._unconsumed[line.message_id] = self.clock()
        return consumed
