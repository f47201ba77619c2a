"""One purge pass per synced queue: pending keys from the ledger, removed from DR, then marked.

Order matters for the invariant: only message ids the ledger holds as consumed are ever put
in a selector, and an entry is marked purged only after the broker confirmed the acks of its
removal (:class:`SelectorRemover`); confirmed removals are marked even when the round then
stops on an error, and the error is raised after that. An entry the ledger cannot name by
message id is never removed: it is marked missing at once and counted (``Unnameable``).
A key not found stays pending (the copy may still be on the
bridge, in the primary's outflow, or beyond what the DR broker pages into memory). It is
marked missing and counted only when both hold: its consume time is older than
``missing_after``, the copy path says its copy can no longer arrive (the primary's
outflow drained past its consume time over a connected bridge, :mod:`copy_path`), and a
browse of the DR queue finds no copy of it (:mod:`absence`: a removal that found nothing
may only have met a broker slow to dispatch). That
stops the purge from looking for it forever and tells the operator DR never received it (or
lost it), without giving up on copies still queued behind an outage: a DR region that
returns after an hour receives its backlog and ends with 0 consumed messages on it.

A pass may loop for up to ``max_seconds`` so that a Step Functions state transition (and
its cost) buys many removals; it returns early when nothing is pending. A round works on its
queues side by side (``PurgeSettings.queue_workers``): each queue's round is one thread's, so
its keys, holds and retries are never shared, and a queue whose removal fails lets the
others finish and mark before its error is raised.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Protocol

from brokersync.broker.statistics import StatisticsClient
from brokersync.broker.stomp import StompConnector
from brokersync.exceptions import BrokerSyncError
from brokersync.keys import InvalidKeyError
from brokersync.ledger.base import LedgerStore, PendingKey
from brokersync.metrics import MetricsSink, NullMetrics
from brokersync.purge.absence import AbsenceCheck
from brokersync.purge.copy_path import CopyPathWatch, can_no_longer_arrive
from brokersync.purge.late_copies import LateCopySweep
from brokersync.purge.remover import SelectorRemover
from brokersync.purge.selectors import MAX_HEADER_LINE_BYTES, selector_line_bytes, split_off_partial
from brokersync.side_by_side import SerialMetrics, each
from brokersync.topology import Queue, Topology

logger = logging.getLogger(__name__)

#: A run with less time than this left sends every key: a key held now would wait for the next
#: invocation, a Step Functions transition later, and that invocation's service could hold it again.
HOLD_NEEDS_S = 1.0


@dataclass(frozen=True)
class PurgeSettings:
    #: Keys read from the ledger per queue per round. A round with keys still on the bridge ends
    #: with the remover's settle wait, so under a backlog the batch, not the broker, sets the
    #: pace: about one remover group of selectors (16 x ~340 ULIDs) per round kept 1,500 msg/s
    #: for 5 minutes on 2 cores, where 2,000 fell behind (docs, "Copy, capture and purge").
    batch_keys: int = 5000
    #: A pending key younger than this (by consume time) is never given up on; an older one
    #: is, once the copy path shows its copy can no longer arrive and a browse of DR finds none.
    missing_after: timedelta = timedelta(minutes=10)
    #: Pause between rounds when a round found nothing to do. In the loop, also the least time
    #: from the start of a caught-up round (one that removed, gave up on or held every key it
    #: read, and read less than a batch) to the start of the next: the next keys come with the
    #: relay's next write (every 0.25 s), so a round at once would read the ledger only to find
    #: nothing new (decision 0037).
    idle_sleep_s: float = 0.2
    #: A key not found on DR is tried again after this long; meanwhile newer keys get its place,
    #: so keys still on the bridge (or deep in a queue) never block the ones behind them.
    retry_not_found_s: float = 2.0
    #: A round of the purge loop leaves out its last selector when that selector is filled to
    #: less than ``hold_partial_below`` of ActiveMQ's header line and every key in it was consumed
    #: less than ``hold_partial_s`` ago; a later round sends those keys first, with newer ones, in
    #: a fuller selector. Each subscription costs the DR broker a pass over its whole backlog
    #: however few ids it names (decision 0024). No key is held for longer than
    #: ``hold_partial_s``. ``hold_partial_s`` 0 sends every round's keys at once.
    hold_partial_s: float = 0.6
    hold_partial_below: float = 0.5
    #: Only a queue at least this deep on DR, by the loop's last depth read, holds a partly
    #: filled selector. At low rates every round's keys fit in one partial selector, so the hold
    #: added up to ``hold_partial_s`` to most keys' lag; on a shallow queue what it saved was
    #: about 8 ms of broker CPU per subscription, about 1 % of a core at 200 msg/s (decision
    #: 0041). 5,000 keeps the hold at the depths issue 21's depth goal is measured at (10,000
    #: and 50,000). A queue whose depth was not read (no statistics, a failed read) holds.
    hold_partial_from_depth: int = 5000
    #: A key whose removal the broker refused (its ACK answered with an ERROR) is tried again only
    #: after this long: each try hands the message back with its redelivery counter raised.
    retry_refused_s: float = 600.0
    #: The loop reads the DR depth and the primary's copy backlog (``DrDepth``, ``CopyBacklog``)
    #: at most this often. Each read is a STOMP connection to a broker, the primary's across
    #: regions, and they were read after every caught-up round, about five times a second; they
    #: are dashboard figures (the alarms on both come from the health probe, once a minute).
    depths_every_s: float = 10.0
    #: Synced queues a round works on at once. A queue's round is mostly waiting (some 16 ledger
    #: requests and the DR broker's receipts), and one queue after another, ten queues were each
    #: reached only every 2.7 s at 1,000 msg/s (decision 0048). Each queue at work holds one
    #: STOMP connection to the DR broker for its removal. 1 works through them in turn; None:
    #: the topology's ``tuning.queues_at_once``.
    queue_workers: int | None = None


@dataclass
class QueueReport:
    purged: int = 0
    missing: int = 0
    pending: int = 0
    oldest_pending_age_ms: int | None = None
    #: Pending keys this round left for a later one, to fill a selector (``hold_partial_s``).
    held: int = 0
    #: The round read as many keys as it may take: more may wait in the ledger behind them.
    filled_batch: bool = False

    @property
    def caught_up(self) -> bool:
        """Nothing this round read is left to try now: pending keys are all held, and it read less than a batch.

        Held keys wait for newer ones (``hold_partial_s``), which only the relay's next write brings.
        """
        return self.pending == self.held and not self.filled_batch


@dataclass
class PurgeReport:
    """What a run did, per queue, and whether it ended early for want of work.

    ``returned_idle`` is set only by a run told to stop when idle (``stop_when_idle``) that did:
    a run that used its whole time did not return idle, whatever its last round found.
    """

    queues: dict[str, QueueReport] = field(default_factory=dict)
    rounds: int = 0
    returned_idle: bool = False

    @property
    def purged(self) -> int:
        return sum(q.purged for q in self.queues.values())

    @property
    def missing(self) -> int:
        return sum(q.missing for q in self.queues.values())

    @property
    def pending(self) -> int:
        return sum(q.pending for q in self.queues.values())


def _forget_resolved(waiting: dict[str, float], pending: list[PendingKey]) -> None:
    """Drop not-found entries no longer pending: resolved elsewhere (marked missing, or by another round)."""
    still_pending = {p.message_id for p in pending}
    for message_id in [m for m in waiting if m not in still_pending]:
        del waiting[message_id]


def _candidates(pending: list[PendingKey], waiting: dict[str, float], now: float, batch: int) -> list[str]:
    """The message ids one round asks the broker for: keys never tried first, then due retries.

    Retries of keys not found earlier get at most a quarter of the batch while untried keys
    wait: keys that can never be found here (consumed on this very broker before a queue moved
    back with its side lost, copies lost with a region) sit at the head of the consume order
    until the missing cutoff. Ordered by consume time alone they took the whole batch again
    every time their retry came due, and the purge removed nothing for minutes with 22,358
    consumed copies on the broker (the move-then-region-loss drill).
    """
    ids = list(dict.fromkeys(p.message_id for p in pending if p.message_id))
    fresh = [i for i in ids if i not in waiting]
    due = sorted((i for i in ids if i in waiting and waiting[i] <= now), key=waiting.__getitem__)
    reserved = min(len(due), batch // 4)
    taken = fresh[: batch - reserved]
    return taken + due[: batch - len(taken)]


class Absence(Protocol):
    """What confirms that DR holds no copy of a message (:class:`AbsenceCheck`, or a test's fake)."""

    def absent(self, queue: Queue, message_ids: Sequence[str], *, deadline: float | None = None) -> set[str]: ...


def _absence_check(remover: SelectorRemover, topology: Topology, selector_bytes: int) -> AbsenceCheck | None:
    """A browse of the broker the remover removes from; None for a remover without one (then nothing is given up)."""
    connector = getattr(remover, "connector", None)
    if not isinstance(connector, StompConnector):
        return None
    return AbsenceCheck(connector, topology.tuning.dr.max_browse_page_size, selector_bytes=selector_bytes)


def _pause(seconds: float, stop: threading.Event | None) -> None:
    """Sleep between rounds, cut short when ``stop`` is set (the role record moved on)."""
    if stop is not None:
        stop.wait(seconds)
    else:
        time.sleep(seconds)


class PurgeService:
    def __init__(
        self,
        ledger: LedgerStore,
        remover: SelectorRemover,
        topology: Topology,
        *,
        settings: PurgeSettings | None = None,
        metrics: MetricsSink | None = None,
        dr_statistics: StatisticsClient | None = None,
        primary_statistics: StatisticsClient | None = None,
        late_copies: LateCopySweep | None = None,
        clock: Callable[[], float] = time.time,
        waiting: dict[str, dict[str, float]] | None = None,
        absence: Absence | None = None,
    ) -> None:
        self.dr_statistics = dr_statistics
        #: Sweeps for the bridge's late copies of purged messages (None: never swept).
        self.late_copies = late_copies
        self.primary_statistics = primary_statistics
        self.ledger = ledger
        self.remover = remover
        self.topology = topology
        self.settings = settings or PurgeSettings()
        #: Shared by the queues a round works on at once (a sink already shared is kept as it is).
        self.metrics: MetricsSink = (
            metrics if isinstance(metrics, SerialMetrics) else SerialMetrics(metrics or NullMetrics())
        )
        self.clock = clock
        #: Per queue, message ids not found on DR -> when (``time.monotonic()``) to look again. A
        #: warm environment passes the same dict to each invocation's service: otherwise every
        #: invocation's first round spends its batch on the keys the last one could not find
        #: (copies lost with a region, waiting for the missing cutoff) instead of newer ones.
        self._waiting: dict[str, dict[str, float]] = waiting if waiting is not None else {}
        #: Per queue, the message ids the last round held back (``hold_partial_s``) -> when
        #: (``time.monotonic()``) each was first held: a key is held for that long at most.
        self._held: dict[str, dict[str, float]] = {}
        #: The longest selector line the remover sends: where a selector is full.
        remover_settings = getattr(remover, "settings", None)
        self._selector_bytes: int = getattr(remover_settings, "selector_bytes", MAX_HEADER_LINE_BYTES)
        #: Confirms a key to give up on has no copy on DR; None (no browse): nothing is given up on.
        self.absence: Absence | None = (
            absence if absence is not None else _absence_check(remover, topology, self._selector_bytes)
        )
        #: When (``time.monotonic()``) the depths were last read; None: not yet in this service.
        self._depths_read_at: float | None = None
        #: One depth read at a time: the queues of a round may each find the read due at once.
        self._depths_lock = threading.Lock()
        #: Each queue's depth on DR at the last read that answered (``hold_partial_from_depth``).
        self._dr_depths: dict[str, int] = {}
        #: None without the primary's counters: then nothing is ever given up on as missing.
        self.copy_path = (
            CopyPathWatch(primary_statistics, topology, lambda: int(self.clock() * 1000))
            if primary_statistics is not None
            else None
        )

    def run(
        self,
        max_seconds: float,
        *,
        stop_when_idle: bool = False,
        stop_when_stalled: bool = False,
        hard_deadline: float | None = None,
        stop: threading.Event | None = None,
    ) -> PurgeReport:
        """Start purge rounds over every sync queue for ``max_seconds``.

        ``hard_deadline`` (``time.monotonic()`` seconds; a Lambda invocation's end less a margin)
        is when a round must have stopped: the remover starts no selector group it could not
        finish by then. ``max_seconds`` only says when to stop starting rounds.
        ``stop_when_idle`` returns once nothing is pending; ``stop_when_stalled`` once a round
        removed nothing (a failback's catch-up: what is still pending is not on the broker now).
        ``stop`` (the role record moved on) ends the run after the round in progress.
        A round may hold back a partly filled last selector for a later round
        (``hold_partial_s``), except in a catch-up (``stop_when_stalled``) and near the end.
        """
        # The remover's connections are kept from one round to the next for the run, and closed
        # when it ends (decision 0051); a remover without kept connections (a test's) opens its own.
        keeping = getattr(self.remover, "keeping_connections", None)
        with keeping() if keeping is not None else contextlib.nullcontext():
            return self._rounds(max_seconds, stop_when_idle, stop_when_stalled, hard_deadline, stop)

    def _rounds(
        self,
        max_seconds: float,
        stop_when_idle: bool,
        stop_when_stalled: bool,
        hard_deadline: float | None,
        stop: threading.Event | None,
    ) -> PurgeReport:
        report = PurgeReport()
        deadline = time.monotonic() + max_seconds
        while time.monotonic() < deadline and not (stop and stop.is_set()):
            progress = held = 0
            caught_up = True
            round_began = time.monotonic()
            hold = not stop_when_stalled and deadline - time.monotonic() > HOLD_NEEDS_S
            if self.late_copies is not None and self.late_copies.due():
                progress += self.late_copies.sweep(
                    self.ledger, self.remover, self.topology, self.metrics, deadline=hard_deadline
                )
            queues = self.topology.captured_queues
            results = each(
                [queue.name for queue in queues],
                functools.partial(self.purge_queue, deadline=hard_deadline, hold=hold),
                workers=self.settings.queue_workers or self.topology.tuning.queues_at_once,
                name="purge",
            )
            for queue, result in zip(queues, results, strict=True):
                summary = report.queues.setdefault(queue.name, QueueReport())
                summary.purged += result.purged
                summary.missing += result.missing
                summary.pending = result.pending
                summary.oldest_pending_age_ms = result.oldest_pending_age_ms
                progress += result.purged + result.missing
                held += result.held
                caught_up = caught_up and result.caught_up
            report.rounds += 1
            if progress == 0 and held:
                # Nothing sent yet: wait briefly for keys to fill the held selector, not an idle pause.
                _pause(min(self.settings.idle_sleep_s, self.settings.hold_partial_s / 6), stop)
            elif progress == 0:
                self._emit_depths_when_due()
                if stop_when_idle and report.pending == 0:
                    report.returned_idle = True
                    break
                if stop_when_stalled:
                    break
                _pause(min(self.settings.idle_sleep_s, max(0.0, deadline - time.monotonic())), stop)
            elif caught_up and not (stop_when_idle or stop_when_stalled):
                # Everything found was removed, or held for newer keys: until the relay writes
                # again, a round at once would read the ledger only to find nothing new (decision
                # 0037). The next round starts ``idle_sleep_s`` after this one started, so keys
                # written during a long round (a deep backlog) wait no longer than before. A drain
                # or a catch-up goes on at once: it waits on the answer.
                self._emit_depths_when_due()
                next_round = min(round_began + self.settings.idle_sleep_s, deadline)
                _pause(max(0.0, next_round - time.monotonic()), stop)
        return report

    def purge_queue(self, queue: str, *, deadline: float | None = None, hold: bool = False) -> QueueReport:
        """One round for one queue; ``deadline`` (monotonic seconds) is when its removal must have stopped.

        ``hold`` lets the round leave a partly filled last selector of young keys for a later
        round (``PurgeSettings.hold_partial_s``).
        """
        result = QueueReport()
        waiting = self._waiting.setdefault(queue, {})
        limit = self.settings.batch_keys + len(waiting)
        pending = self.ledger.pending(queue, limit=limit)
        result.filled_batch = len(pending) >= limit
        if not pending:
            waiting.clear()
            self.metrics.add_metric("PendingPurge", "Count", 0)
            return result
        _forget_resolved(waiting, pending)
        started = time.monotonic()
        swept, pending = self._swept(queue, pending)
        unnameable = [p for p in pending if p.message_id is None]
        if unnameable:
            self.ledger.mark_missing(queue, unnameable)
            self.metrics.add_metric("Unnameable", "Count", len(unnameable))
            logger.error(
                "%d consumed entries of %s name no message id: never removed, marked missing", len(unnameable), queue
            )
            pending = [p for p in pending if p.message_id is not None]
        candidates = _candidates(pending, waiting, started, self.settings.batch_keys)
        candidates, held = self._hold_partial(queue, candidates, pending) if hold else (candidates, [])
        removal = self.remover.remove(queue, candidates, deadline=deadline) if candidates else None
        removed = set(removal.removed) if removal else set()
        self._reschedule(queue, waiting, candidates, removed, set(removal.refused) if removal else set())
        purged = swept + [p for p in pending if p.message_id in removed]
        if purged:
            self.ledger.mark_purged(queue, purged)
        pending, ambiguous = self._give_up_ambiguous(queue, pending, removal.ambiguous if removal else [], waiting)
        if swept and self.late_copies is not None:  # marked: the sweep may forget them
            self.late_copies.forget(queue, {p.message_id for p in swept if p.message_id})
        if removal is not None and removal.late:
            self.metrics.add_metric("PurgeLateFrames", "Count", removal.late)
        if removal is not None and removal.error is not None:
            # The purge loop counts a PurgeInvariantError (its own state, then Fail): not here too.
            self.metrics.add_metric("Purged", "Count", len(purged))
            raise removal.error
        now_ms = int(self.clock() * 1000)
        unfound = [p for p in pending if p.message_id not in removed]
        tried = set(candidates)
        missing = self._give_up(queue, [p for p in unfound if p.message_id in tried], now_ms, deadline)
        given_up = {id(p) for p in missing}
        still: list[PendingKey] = [p for p in unfound if id(p) not in given_up]
        result.purged, result.pending = len(purged), len(still)
        result.missing = len(missing) + len(unnameable) + len(ambiguous)
        result.held = len(held)
        result.oldest_pending_age_ms = now_ms - min(p.consumed_at_ms for p in still) if still else None
        self.metrics.add_metric("Purged", "Count", len(purged))
        self.metrics.add_metric("Missing", "Count", len(missing))
        self.metrics.add_metric("PendingPurge", "Count", len(still))
        self.metrics.add_metric("PurgeBatchLatencyMs", "Milliseconds", (time.monotonic() - started) * 1000)
        if result.oldest_pending_age_ms is not None:
            self.metrics.add_metric("OldestPendingAgeMs", "Milliseconds", result.oldest_pending_age_ms)
        return result

    def _give_up_ambiguous(
        self, queue: str, pending: list[PendingKey], ambiguous: list[str], waiting: dict[str, float]
    ) -> tuple[list[PendingKey], list[PendingKey]]:
        """``(still pending, given up)``: the keys whose id two different messages on DR carry are given up.

        Which copy was consumed cannot be told over STOMP, and every try hands both back with a
        raised redelivery counter, so the key is given up at once: both copies stay on DR (the
        consumed one a duplicate after a failover, the other a message that was never consumed)
        and the reconciliation reports them.
        """
        if not ambiguous:
            return pending, []
        named = set(ambiguous)
        keys = [p for p in pending if p.message_id in named]
        self.ledger.mark_missing(queue, keys)
        for message_id in named:
            waiting.pop(message_id, None)
        self.metrics.add_metric("PurgeAmbiguousCopies", "Count", len(keys))
        logger.error(
            "%s: two different messages on DR carry each of the ids %s (a client set one of them): neither "
            "removed, the keys marked missing; the reconciliation reports the copies",
            queue,
            sorted(named),
        )
        return [p for p in pending if p.message_id not in named], keys

    def _reschedule(
        self, queue: str, waiting: dict[str, float], candidates: list[str], removed: set[str], refused: set[str]
    ) -> None:
        """After a removal: forget what it removed, and say when to look again for the rest.

        A key not found is tried again soon (its copy may be on its way). A key whose ACK the
        broker refused is tried again only after ``retry_refused_s``: each try hands the message
        back with its redelivery counter raised.
        """
        now = time.monotonic()
        for message_id in candidates:
            if message_id in removed:
                waiting.pop(message_id, None)
            elif message_id in refused:
                waiting[message_id] = now + self.settings.retry_refused_s
            else:
                waiting[message_id] = now + self.settings.retry_not_found_s
        if refused:
            self.metrics.add_metric("PurgeAckRefused", "Count", len(refused))
            logger.error(
                "the DR broker refused the acks of %d messages of %s (ids set by their clients?): not removed, "
                "tried again in %.0f s",
                len(refused),
                queue,
                self.settings.retry_refused_s,
            )

    def _hold_partial(
        self, queue: str, candidates: list[str], pending: list[PendingKey]
    ) -> tuple[list[str], list[str]]:
        """``candidates`` as ``(send, held)``: ``held`` is a partly filled last selector for a later round, or empty.

        The relay writes keys in batches, so the round after a hold often finds only the held
        keys: they are held again until newer keys join them, within two bounds measured by
        this process's clock. Nothing is held that was consumed more than ``hold_partial_s``
        ago, nor once it was first held that long ago: a primary whose clock runs ahead only
        makes keys look young, and the second bound still ends their wait. Only a selector
        filled under ``hold_partial_below`` is held, so few keys wait. Holding never removes
        and never marks anything: a held key is simply pending a little longer.
        """
        last_held = self._held.pop(queue, {})
        if self.settings.hold_partial_s <= 0 or not candidates or self._shallow(queue):
            return candidates, []
        try:
            whole, partial = split_off_partial(candidates, "message-id", max_line_bytes=self._selector_bytes)
        except (InvalidKeyError, ValueError):  # the remover refuses the same list, with its own error
            return candidates, []
        now = time.monotonic()
        first_held = {k: last_held.get(k, now) for k in partial}
        if partial and self._may_hold(partial, first_held, pending, now):
            self._held[queue] = first_held
            return whole, partial
        return candidates, []

    def _shallow(self, queue: str) -> bool:
        """``queue`` is known to be too shallow on DR for a hold to save the broker anything worth a key's wait.

        The depth is read when first needed and then with the loop's depth reads, every
        ``depths_every_s``. An unknown depth is not shallow: holding is what the loop did
        before it read depths, and it costs lag, never a message.
        """
        if self._depths_read_at is None:
            self._emit_depths_when_due()
        depth = self._dr_depths.get(queue)
        return depth is not None and depth < self.settings.hold_partial_from_depth

    def _may_hold(self, partial: list[str], first: dict[str, float], pending: list[PendingKey], now: float) -> bool:
        """The bounds of ``_hold_partial``: few keys, none consumed nor first held too long ago."""
        if selector_line_bytes(partial, "message-id") > self.settings.hold_partial_below * self._selector_bytes:
            return False
        if min(first.values()) < now - self.settings.hold_partial_s:
            return False
        wanted = set(partial)
        oldest_ms = min(p.consumed_at_ms for p in pending if p.message_id in wanted)
        return oldest_ms >= self.clock() * 1000 - self.settings.hold_partial_s * 1000

    def _give_up(
        self, queue: str, unfound: list[PendingKey], now_ms: int, deadline: float | None = None
    ) -> list[PendingKey]:
        """Mark missing the keys not found whose copy can no longer arrive and is not on DR (see the module doc)."""
        waiting = self._waiting.setdefault(queue, {})
        cutoff_ms = now_ms - int(self.settings.missing_after.total_seconds() * 1000)
        drained_past = (
            self.copy_path.drained_past(queue)
            if self.copy_path is not None and any(p.consumed_at_ms < cutoff_ms for p in unfound)
            else None
        )
        due = [
            p for p in unfound if p.consumed_at_ms < cutoff_ms and can_no_longer_arrive(p.consumed_at_ms, drained_past)
        ]
        if not due or self.absence is None:
            return []
        absent = self.absence.absent(self.topology.queue(queue), [p.message_id or "" for p in due], deadline=deadline)
        on_dr = [p for p in due if p.message_id not in absent]
        if on_dr:
            # Not dispatched to the removal in time, yet there: they stay pending and are retried.
            self.metrics.add_metric("FoundByBrowse", "Count", len(on_dr))
            logger.info("%d keys of %s not found by removal are on DR after all: kept pending", len(on_dr), queue)
        missing = [p for p in due if p.message_id in absent]
        if missing:
            self.ledger.mark_missing(queue, missing)
            for entry in missing:
                waiting.pop(entry.message_id or "", None)
            logger.warning(
                "%d keys of %s never reached DR within %s, the primary's outflow has drained past them, "
                "and a browse of DR finds none of them: marked missing",
                len(missing),
                queue,
                self.settings.missing_after,
            )
        return missing

    def _swept(self, queue: str, pending: list[PendingKey]) -> tuple[list[PendingKey], list[PendingKey]]:
        """``pending`` split: entries whose message the late-copy sweep already removed from DR
        (its acks confirmed), and the rest.

        Nothing is removed here: the sweep removed exactly these message ids, each one the
        ledger holds as consumed, so the entries only need marking.
        """
        removed = self.late_copies.removed(queue) if self.late_copies is not None else set()
        if not removed:
            return [], pending
        swept = [p for p in pending if p.message_id is not None and p.message_id in removed]
        waiting = self._waiting.get(queue, {})
        for entry in swept:
            waiting.pop(entry.message_id or "", None)
        return swept, [p for p in pending if p.message_id not in removed]

    def _emit_depths_when_due(self) -> None:
        with self._depths_lock:
            now = time.monotonic()
            if self._depths_read_at is None or now - self._depths_read_at >= self.settings.depths_every_s:
                self._depths_read_at = now
                self.emit_depths()

    def emit_depths(self) -> dict[str, int]:
        """DR depth per queue, and the primary's Q.DR depth: copies not yet on DR (the loss-risk window).

        The primary may be unreachable (that is what DR is for): its figure is then left out.
        """
        depths: dict[str, int] = {}
        names = [q.name for q in self.topology.queues]
        dr_depths: dict[str, int] = {}  # what this read answers; a failed read leaves every depth unknown
        for prefix, client, queue_names in (
            ("DrDepth", self.dr_statistics, names),
            ("CopyBacklog", self.primary_statistics, [self.topology.dr_name(n) for n in names]),
        ):
            if client is None:
                continue
            try:
                stats = client.queue_stats(queue_names)
            except BrokerSyncError as e:
                logger.warning("cannot read %s: %s", prefix, e)
                continue
            if prefix == "DrDepth":
                dr_depths = {name: s.size for name, s in stats.items()}
            total = sum(s.size for s in stats.values())
            depths[prefix] = total
            self.metrics.add_metric(prefix, "Count", total)
        self._dr_depths = dr_depths  # one assignment: a queue's round reads the old depths or the new
        return depths
