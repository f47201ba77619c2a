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

A sweep is bounded in time, not only in copies: a DR broker back from an outage can hold
thousands of redelivered messages that nobody consumed (the bridge raised their counters
too). An unbounded sweep of 500 lookups held the first purge invocation after a failback for
over a minute, so that the Lambda timed out before any consumed message was removed (the
region-loss drill, decision 0013). So a sweep starts no lookup after ``check_budget_s`` (nor
past the invocation's deadline), and looks up a queue's copies together, in one read of
the ledger per stretch of time their windows cover (``consumed_entries_of``, decision 0030):
one by one, every message-id key re-read the same last 15 minutes of the queue's ledger.

The same sweep, browsing without a selector from the head of each queue
(:func:`consumed_at_head`), is how a failback finds messages consumed on the rejoining broker
while it was primary whose removal its store lost when it died: the consumer had them, the
advisory reached the ledger and the DR copy was purged, but the broker came back holding them
again, neither pending in the ledger nor marked redelivered (measured: 1 in 5,880 in the
failback drill, consumed 60 ms before a SIGKILL). They were dispatched, so they are the oldest
messages of their queue, at its head. The ledger is asked the same way, and only a message whose
exact message id the ledger holds as consumed is removed. A failback may come hours after the
loss, far outside a message-id key's window back from now, so a head whose message-id key is
not found there is looked up again from its message's production time and over the window
before the failover started (``from_production``, ``lost_at_ms``).

A copy found unconsumed is looked up again after ``recheck_after_s``, then after twice as
long each time, up to ``max_recheck_s``: those copies are a backlog's, they stay for hours,
and looking each up every minute kept the sweep, and with it the purge, busy for as long.
Skipping them is safe: a message consumed after a lookup has a pending ledger entry, and the
purge's own selector removes every copy of it that is on DR then. The rechecks are for a
lookup that ran before its consume reached this region's ledger, which the first ones cover.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import timedelta

from brokersync.broker.stomp import StompConnector
from brokersync.exceptions import BrokerSyncError
from brokersync.keys import key_kind
from brokersync.ledger.base import LedgerEntry, LedgerStore
from brokersync.ledger.ledger import DEFAULT_CONSUME_LAG
from brokersync.metrics import MetricsSink
from brokersync.purge.remover import SelectorRemover
from brokersync.snapshot.browser import QueueBrowser, SnapshotLine
from brokersync.topology import Queue, Topology

logger = logging.getLogger(__name__)

#: What selects the bridge's redelivered copies on a DR queue.
REDELIVERED = "JMSRedelivered = TRUE"
#: Messages browsed from the head of each queue of a rejoining broker (:func:`consumed_at_head`):
#: more than the prefetch windows of the consumers it had when it died.
HEAD_BROWSE = 10_000
#: Production times a head sweep's lookup from production spans at most, from the oldest head's:
#: the read then covers about one window and this of the queue's ledger, not a backlog's hours.
PRODUCED_SPAN = timedelta(minutes=10)
#: The slack a window from a time read off another clock gets: a producer's JMSTimestamp may run
#: ahead of the clock that timed its consume, and a lost broker's last consumes may be timed a
#: little after the failover that replaced it started.
CLOCK_SLACK = timedelta(minutes=1)


def _holds_exactly(answers: dict[str, list[LedgerEntry]], line: SnapshotLine) -> bool:
    """Whether the ledger's entries under ``line``'s key name its exact message id as consumed."""
    return any(entry.message_id == line.message_id for entry in answers.get(line.key, ()))


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
    #: Seconds into a sweep after which it starts no ledger lookup; the rest wait for the next sweep.
    check_budget_s: float = 2.0
    #: A copy the ledger did not hold as consumed is looked up again after this long, then after
    #: twice as long each time it is found unconsumed again, up to ``max_recheck_s``.
    recheck_after_s: float = 60.0
    max_recheck_s: float = 3600.0
    clock: Callable[[], float] = time.monotonic
    #: What is browsed: the bridge's redelivered copies, or (None) every message from the head.
    selector: str | None = REDELIVERED
    #: Message-id keys not found consumed in the last ``DEFAULT_CONSUME_LAG`` are looked up again
    #: from their production time, and before ``lost_at_ms`` when it is known
    #: (:func:`consumed_at_head`: consumed before the broker was lost).
    from_production: bool = False
    #: When the broker whose heads are swept stopped being primary (epoch milliseconds), if known.
    lost_at_ms: int | None = None
    #: What the removed messages are, in the log.
    removed_as: str = "late copies of consumed messages (bridge redeliveries)"
    _last: float | None = field(default=None, init=False)
    #: Queues the last sweep did not look up (out of time, or the ledger unavailable).
    unchecked: list[str] = field(default_factory=list, init=False)
    #: How long a removed copy's message id is remembered for the purge to mark (see :meth:`removed`).
    remember_removed_s: float = 3600.0
    #: Message id -> (when it is looked up again, the wait that set it), for copies found unconsumed.
    _unconsumed: dict[str, tuple[float, float]] = field(default_factory=dict, init=False)
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
        self.unchecked = []
        for queue in topology.captured_queues:
            consumed = self._consumed_copies(ledger, remover.connector, queue, stop_at, deadline)
            if consumed is None:
                self.unchecked.append(queue.name)
            if not consumed:
                continue
            result = remover.remove(queue.name, consumed, deadline=deadline)
            removed += len(result.removed)
            now = self.clock()
            self._removed.setdefault(queue.name, {}).update(dict.fromkeys(result.removed, now))
            if result.removed:
                logger.warning("%d %s removed from %s", len(result.removed), self.removed_as, queue.name)
            if result.error is not None:
                metrics.add_metric("LateCopiesRemoved", "Count", removed)
                raise result.error
        metrics.add_metric("LateCopiesRemoved", "Count", removed)
        return removed

    def _forget_old_answers(self) -> None:
        """Drop "not consumed" answers whose copy has not been seen for a whole ``max_recheck_s`` past its recheck
        (it left the queue): bounds the memory they take. A copy still on the queue keeps its wait."""
        now = self.clock()
        self._unconsumed = {
            mid: (due, wait) for mid, (due, wait) in self._unconsumed.items() if due + self.max_recheck_s > now
        }

    def _found_unconsumed(self, message_id: str) -> None:
        """Look ``message_id`` up again later: ``recheck_after_s`` the first time, then twice the last wait."""
        _due, wait = self._unconsumed.get(message_id, (0.0, 0.0))
        wait = min(self.max_recheck_s, wait * 2) if wait else self.recheck_after_s
        self._unconsumed[message_id] = (self.clock() + wait, wait)

    def _waiting(self, message_id: str | None) -> bool:
        """Found unconsumed, and not yet due for its recheck."""
        answer = self._unconsumed.get(message_id) if message_id else None
        return answer is not None and answer[0] > self.clock()

    def _browse(self, connector: StompConnector, queue: Queue) -> Iterator[SnapshotLine]:
        """Every message on ``queue`` that ``selector`` selects, browsed: nothing delivered, nothing counted."""
        browser = QueueBrowser(connector, idle_timeout_s=self.browse_timeout_s, prefetch=self.max_copies)
        return browser.lines(queue, selector=self.selector)

    def _browsed(self, connector: StompConnector, queue: Queue) -> Iterator[SnapshotLine]:
        """Browsed messages on ``queue`` not recently found unconsumed, from the first ``max_browse``."""
        lines = self._browse(connector, queue)
        try:
            for browsed, line in enumerate(lines, start=1):
                if not self._waiting(line.message_id):
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
    ) -> list[str] | None:
        """Message ids of browsed messages on ``queue`` that the ledger holds as consumed; None if not looked up.

        Looks up at most ``max_copies`` copies, together, and none once ``stop_at`` (this
        sweep's clock) or ``deadline`` (``time.monotonic()``) has passed.
        """
        if self.clock() >= stop_at or (deadline is not None and time.monotonic() >= deadline):
            return None
        copies = []
        for line in self._browsed(connector, queue):
            if line.key and line.message_id:
                copies.append(line)
            if len(copies) >= self.max_copies:
                break
        if not copies:
            return []
        try:
            answers = self._look_up(ledger, queue, copies)
        except BrokerSyncError as e:  # the ledger is unavailable: these wait for the next sweep
            logger.warning("%s of %s not checked: %s", self.removed_as, queue.name, e)
            return None
        consumed, unknown = [], 0
        for line in copies:
            if line.key not in answers:  # a key the ledger cannot hold was never recorded
                unknown += 1
            if _holds_exactly(answers, line):
                consumed.append(line.message_id)
                self._unconsumed.pop(line.message_id, None)
            else:
                self._found_unconsumed(line.message_id)
        if unknown:
            logger.info("%d browsed messages of %s not checked: not keys the ledger holds", unknown, queue.name)
        return consumed

    def _look_up(self, ledger: LedgerStore, queue: Queue, copies: list[SnapshotLine]) -> dict[str, list[LedgerEntry]]:
        """The ledger's consumed entries under each copy's key, read together.

        A failback's heads (``from_production``) whose message-id key is not found back from now
        are looked for in two more reads, each of those still not found: from their production
        times (less :data:`CLOCK_SLACK`), for those produced within :data:`PRODUCED_SPAN` of the
        oldest of them, so that their windows merge into one read; and over the
        ``DEFAULT_CONSUME_LAG`` before ``lost_at_ms`` (and :data:`CLOCK_SLACK` after), when the
        failback knows it. Each read spans about one window of the queue's ledger.
        """
        answers = ledger.consumed_entries_of(queue.name, [line.key for line in copies], DEFAULT_CONSUME_LAG)
        if not self.from_production:
            return answers
        window = DEFAULT_CONSUME_LAG + CLOCK_SLACK
        for starts in (self._from_production_times, self._from_loss):
            unanswered = [
                line for line in copies if key_kind(line.key) == "message-id" and not _holds_exactly(answers, line)
            ]
            from_ms = starts(unanswered) if unanswered else {}
            if not from_ms:
                continue
            for key, entries in ledger.consumed_entries_of(queue.name, list(from_ms), window, from_ms=from_ms).items():
                answers[key] = answers.get(key, []) + entries
        return answers

    @staticmethod
    def _from_production_times(heads: list[SnapshotLine]) -> dict[str, int]:
        produced = [line for line in heads if line.timestamp > 0]
        if not produced:
            return {}
        oldest = min(line.timestamp for line in produced)
        span_ms, slack_ms = int(PRODUCED_SPAN.total_seconds() * 1000), int(CLOCK_SLACK.total_seconds() * 1000)
        return {line.key: line.timestamp - slack_ms for line in produced if line.timestamp - oldest <= span_ms}

    def _from_loss(self, heads: list[SnapshotLine]) -> dict[str, int]:
        if not self.lost_at_ms:
            return {}
        lag_ms = int(DEFAULT_CONSUME_LAG.total_seconds() * 1000)
        return dict.fromkeys((line.key for line in heads), self.lost_at_ms - lag_ms)


def consumed_at_head(check_budget_s: float = 20.0, lost_at_ms: int | None = None) -> LateCopySweep:
    """A sweep of the first ``HEAD_BROWSE`` messages of each queue of a rejoining broker (module doc).

    A failback runs it once the new primary's copy backlog has caught up: looking each browsed
    key up is what costs, so ``check_budget_s`` bounds it, and while a queue is left
    :attr:`~LateCopySweep.unchecked` the catch-up is not done and sweeps again. ``lost_at_ms``:
    when the rejoining broker stopped being primary (the failover's start), if known.
    """
    return LateCopySweep(
        selector=None,
        from_production=True,
        lost_at_ms=lost_at_ms,
        max_copies=HEAD_BROWSE,
        max_browse=HEAD_BROWSE,
        check_budget_s=check_budget_s,
        removed_as="messages consumed before the broker was lost",
    )
