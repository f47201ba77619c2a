"""The advisory relay: drains ``BROKERSYNC.CONSUMED`` on the primary into the ledger.

The order of operations is the whole design: receive → parse → write the ledger → only then
ack. A relay killed anywhere in between leaves the advisories unacked, the broker redelivers
them, and the ledger's idempotent writes absorb the replay. Acks are sent from the relay's
own thread, never from stomp.py's listener thread (acking from the listener with a large
prefetch on many subscriptions deadlocked stomp.py + ActiveMQ, see DESIGN.md); the listener
only hands frames over through a queue. Prefetch is bounded so a stalled relay holds at
most that many advisories, and a watchdog reconnects when frames stop arriving although
the queue is not empty.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

import stomp

from brokersync.broker.inbox import DISCONNECTED, FrameInbox
from brokersync.broker.statistics import QueueStats, StatisticsClient
from brokersync.broker.stomp import StompConnector, send_in_one_write, unavailable_if_lost
from brokersync.broker.stomp_receive import pace_reads
from brokersync.capture.advisory import parse_consumed_advisory
from brokersync.capture.audit import CaptureAudit
from brokersync.capture.handover import Handover
from brokersync.capture.records import ConsumedRecord, RejectedInputError, RejectReason
from brokersync.capture.writer import LedgerWriter
from brokersync.exceptions import BrokerSyncError, BrokerUnavailableError
from brokersync.ledger.codec import bucket_of
from brokersync.metrics import MetricsSink, NullMetrics
from brokersync.topology import CONSUMED_QUEUE, PARKED_QUEUE, Topology

logger = logging.getLogger(__name__)
_Parsed = tuple[ConsumedRecord, stomp.utils.Frame]
_Rejected = tuple[stomp.utils.Frame, RejectedInputError]

#: Metric per departure other than consumption (``Captured`` counts them all).
DEPARTURE_METRICS = {"expired": "CapturedExpired", "dead-lettered": "CapturedDeadLettered"}
#: The one transformation used for advisories everywhere (mixing them corrupted bodies).
ADVISORY_TRANSFORMATION = "jms-advisory-json"
_SUBSCRIPTION = "brokersync-relay"
#: ACK frames per socket write (some 35 KB): a long batch goes out in a few writes, none huge.
ACKS_PER_WRITE = 500


@dataclass(frozen=True)
class RelaySettings:
    """Relay knobs. Batches of up to 2,000 advisories, aligned to the ledger's buckets, write each
    bucket's item about once: 30.2 write units per 1,000 messages (bench/results/capture.json)."""

    batch_size: int = 2000
    flush_interval_s: float = 0.25
    #: Room for one held bucket and the next full batch (see ``_relay_batch``).
    prefetch: int = 4000
    stall_timeout_s: float = 15.0
    #: How long the broker may take to confirm parked advisories before the batch is given up
    #: (unacked, so the broker redelivers it).
    receipt_timeout_s: float = 10.0
    #: How long the receiver thread waits after a read that emptied the socket, so that its next
    #: read takes what came meanwhile in one go (``pace_reads``, decision 0050). The relay waits
    #: out ``flush_interval_s`` anyway; 0 reads as soon as a frame arrives.
    read_pause_s: float = 0.05


@dataclass
class RelayReport:
    """What one relay run did; the edge turns it into the function's response."""

    captured: int = 0
    parked: Counter[str] = field(default_factory=Counter)
    batches: int = 0
    write_units: float = 0.0
    reconnects: int = 0
    oldest_age_ms: int | None = None
    captured_by_queue: Counter[str] = field(default_factory=Counter)
    #: Advisories of the purge's removals on a broker that does not consume their queue (drained, not recorded).
    passive: int = 0
    #: Advisories of such queues left unacked because the role record had moved (or could not be
    #: read) when they were to be drained: the next run reads them under the new roles.
    passive_deferred: int = 0
    #: Captured records that left the primary other than by consumption (expired, dead-lettered).
    departed: Counter[str] = field(default_factory=Counter)
    #: How long the run went on after its time, waiting for the next run to consume too.
    hand_over_s: float = 0.0
    #: Whether it saw the next run consume before it left (False: no hand-over, or none seen).
    handed_over: bool = False

    @property
    def parked_total(self) -> int:
        return sum(self.parked.values())


def _relaying_until(deadline: float, handover: Handover | None) -> float | None:
    """Until when the relay's next batch may run (monotonic seconds), or None once it is to leave.

    Its own time first; past that, while a hand-over waits for the next invocation.
    """
    if time.monotonic() < deadline:
        return deadline
    if handover is None:
        return None
    if handover.began_at is None:
        handover.begin()
    return None if handover.over() else handover.until


class AdvisoryRelay:
    """One relay over one primary broker; ``run`` is what each Lambda invocation (or process) calls."""

    def __init__(
        self,
        connector: StompConnector,
        writer: LedgerWriter,
        topology: Topology,
        *,
        settings: RelaySettings | None = None,
        statistics: StatisticsClient | None = None,
        audit: CaptureAudit | None = None,
        metrics: MetricsSink | None = None,
        clock: Callable[[], float] = time.time,
        passive: frozenset[str] = frozenset(),
        roles_hold: Callable[[], bool] | None = None,
    ) -> None:
        """``roles_hold`` reads the role record and says whether it still holds the roles
        ``passive`` was made from (False when it moved or cannot be read); None: never asked."""
        self.connector = connector
        self.writer = writer
        self.topology = topology
        #: Queues consumed on the other broker: their advisories here are the purge's removals
        #: (:mod:`brokersync.sides`), acked and counted for the audit but never recorded.
        self.passive = passive
        #: Asked before a batch's advisories are drained as the purge's own, after they arrived:
        #: the roles read when the run began may have moved since (a queue move flips them), and
        #: then those advisories may be an application's consumption here, to be recorded.
        self.roles_hold = roles_hold
        self._roles_moved = False
        self.settings = settings or RelaySettings()
        self.statistics = statistics
        self.audit = audit
        self.metrics: MetricsSink = metrics or NullMetrics()
        self.clock = clock
        self._inbox = FrameInbox()
        self._connection: stomp.Connection12 | None = None
        self._receipt_ids = itertools.count(1)

    # -- connection -------------------------------------------------------------------------
    def _connect(self) -> None:
        self._inbox = FrameInbox()
        connection = self.connector.connect(self._inbox, name="brokersync-relay")
        try:
            with unavailable_if_lost("the relay subscribed"):
                connection.subscribe(
                    f"/queue/{CONSUMED_QUEUE}",
                    id=_SUBSCRIPTION,
                    ack="client-individual",
                    headers={
                        "transformation": ADVISORY_TRANSFORMATION,
                        "activemq.prefetchSize": str(self.settings.prefetch),
                    },
                )
        except BrokerUnavailableError:
            with contextlib.suppress(Exception):
                connection.disconnect()
            raise
        pace_reads(connection, self.settings.read_pause_s)
        self._connection = connection

    def _disconnect(self) -> None:
        connection, self._connection = self._connection, None
        if connection is not None:
            with contextlib.suppress(Exception):
                connection.disconnect()

    def _reconnect(self, report: RelayReport, why: str) -> None:
        logger.warning("relay reconnecting: %s", why)
        report.reconnects += 1
        self.metrics.add_metric("RelayReconnects", "Count", 1)
        self._disconnect()
        self._connect()

    # -- main loop ----------------------------------------------------------------------------
    def run(self, max_seconds: float, stop: threading.Event | None = None, *, hand_over_s: float = 0.0) -> RelayReport:
        """Relay for up to ``max_seconds`` (or until ``stop`` is set), then ack what was written and return.

        ``hand_over_s`` (a scheduled invocation's): after ``max_seconds``, go on relaying until
        the next invocation consumes too, for at most this long (:mod:`brokersync.capture.handover`),
        so no advisory waits between two invocations. ``stop`` still ends the run at once.

        Raises :class:`BrokerUnavailableError` when the primary cannot be reached at all, and
        the writer's error when the ledger stays unavailable through its retries; in both
        cases nothing unwritten was acked.
        """
        report = RelayReport()
        deadline = time.monotonic() + max_seconds
        statistics = self.statistics
        handover = (
            Handover(lambda: _advisory_consumers(statistics), hand_over_s)
            if hand_over_s > 0 and statistics is not None
            else None
        )
        stop = stop or threading.Event()
        self._roles_moved = False
        self._connect()
        carried: list[stomp.utils.Frame] = []
        try:
            idle_since = time.monotonic()
            while not stop.is_set() and not self._roles_moved:
                end = _relaying_until(deadline, handover)
                if end is None:
                    break
                frames, disconnected = self._take_batch(end, stop)
                if disconnected:
                    carried = []  # unacked on a dead connection: the broker redelivers them
                full = len(frames) >= self.settings.batch_size
                if frames or (carried and not full):
                    ending = stop.is_set() or time.monotonic() >= end
                    carried = self._relay_batch(carried + frames, report, hold_newest=full and not ending)
                    idle_since = time.monotonic()
                if disconnected:
                    self._reconnect(report, "connection lost")
                    idle_since = time.monotonic()
                elif not frames and time.monotonic() - idle_since > self.settings.stall_timeout_s:
                    if self._backlog_waiting():
                        self._reconnect(report, f"no advisory for {self.settings.stall_timeout_s}s with a backlog")
                    idle_since = time.monotonic()
            if carried and self._connection is not None and self._connection.is_connected():
                self._relay_batch(carried, report, hold_newest=False)
        finally:
            self._disconnect()
        if handover is not None and handover.began_at is not None:
            self._report_handover(handover, report, cut_short=stop.is_set() or self._roles_moved)
        return report

    def _report_handover(self, handover: Handover, report: RelayReport, *, cut_short: bool) -> None:
        report.hand_over_s = round(handover.waited_s(), 3)
        report.handed_over = handover.handed_over
        if not handover.handed_over and not cut_short:
            # No successor within the wait: advisories wait on the broker until one comes.
            self.metrics.add_metric("RelayHandoverMissed", "Count", 1)
            logger.warning("no next relay consumed within %.0f s of this one's time: it left anyway", handover.within_s)

    def _take_batch(self, deadline: float, stop: threading.Event) -> tuple[list[stomp.utils.Frame], bool]:
        """Up to ``batch_size`` frames, waiting at most ``flush_interval_s`` after the first one.

        After the first frame the relay sleeps until the flush time or a full batch, whichever
        comes first, and takes what arrived in one call: not a wake-up per frame.
        """
        if stop.is_set():
            return [], False
        first = min(deadline, time.monotonic() + 0.5) - time.monotonic()
        items = self._inbox.take(self.settings.batch_size, max(0.0, first))
        if not items:
            return [], False
        flush_at = min(deadline, time.monotonic() + self.settings.flush_interval_s)
        while items[-1] is not DISCONNECTED and len(items) < self.settings.batch_size and not stop.is_set():
            remaining = flush_at - time.monotonic()
            if remaining <= 0:
                break
            wanted = self.settings.batch_size - len(items)
            # A stop is seen at the flush time, at most flush_interval_s on; the batch in hand is still relayed.
            items += self._inbox.take(wanted, remaining, at_least=wanted)
        if items[-1] is DISCONNECTED:
            # Frames received on a dead connection cannot be acked; the broker redelivers them.
            return [], True
        return items, False  # type: ignore[return-value]

    def _relay_batch(
        self, frames: list[stomp.utils.Frame], report: RelayReport, *, hold_newest: bool
    ) -> list[stomp.utils.Frame]:
        """Write, park and ack ``frames``; return the ones held back (unacked) for the next batch.

        With ``hold_newest`` (the batch was cut by size, so more of its newest consume-time
        bucket is on the way), the advisories of that bucket wait for the next batch: each
        ledger write then completes its bucket's item instead of rewriting a growing one,
        which is what keeps capture near 30 write units per 1,000 messages (bench/capture.py).
        At most one batch is held, and nothing is held when a run ends.
        """
        records, rejected = self._parse(frames)
        deferred: list[stomp.utils.Frame] = []
        if self.passive:
            records, deferred = self._drop_passive(records, report)
        records, held = self._hold_newest_bucket(records) if hold_newest else (records, [])
        if records:
            records, refused = self._write(records, report)
            rejected += refused
        if rejected:
            self._park_confirmed(rejected, report)
        unacked = {id(f) for f in held + deferred}
        self._ack([f for f in frames if id(f) not in unacked])
        report.batches += 1
        report.captured += len(records)
        report.captured_by_queue.update(r.queue for r, _ in records)
        return held

    def _parse(self, frames: list[stomp.utils.Frame]) -> tuple[list[_Parsed], list[_Rejected]]:
        records: list[_Parsed] = []
        rejected: list[_Rejected] = []
        received_at_ms = int(self.clock() * 1000)
        for frame in frames:
            try:
                record = parse_consumed_advisory(
                    frame.headers, frame.body, self.topology, received_at_ms=received_at_ms
                )
            except RejectedInputError as e:
                rejected.append((frame, e))
                continue
            records.append((record, frame))
        return records, rejected

    def _drop_passive(
        self, records: list[_Parsed], report: RelayReport
    ) -> tuple[list[_Parsed], list[stomp.utils.Frame]]:
        """``records`` without the passive queues' advisories, and the frames of those left unacked.

        They are drained (acked, never recorded) only when the role record, read now, after
        they arrived, still holds the roles they were judged by. Otherwise they stay unacked and
        the run ends: the broker hands them to the next run, which reads the roles afresh.
        """
        passive = [(r, f) for r, f in records if r.queue in self.passive]
        if not passive:
            return records, []
        rest = [(r, f) for r, f in records if r.queue not in self.passive]
        if self.roles_hold is not None and not self.roles_hold():
            deferred = [f for _, f in passive]
            self._roles_moved = True
            report.passive_deferred += len(deferred)
            logger.info(
                "role record moved or unreadable: %d advisories of %s left for the next run",
                len(deferred),
                ", ".join(sorted(self.passive)),
            )
            return rest, deferred
        removals = Counter((r.queue, f.headers.get("originBrokerId", "unknown")) for r, f in passive)
        report.passive += len(passive)
        self.metrics.add_metric("PassiveRemovalsDrained", "Count", len(passive))
        if self.audit is not None:
            # The broker counts them as dequeues: account for them, or the audit would call them lost.
            self.audit.record_captured(removals)
        return rest, []

    def _hold_newest_bucket(self, records: list[_Parsed]) -> tuple[list[_Parsed], list[stomp.utils.Frame]]:
        newest = max(bucket_of(r.consumed_at_ms) for r, _ in records) if records else None
        newest_pairs = [(r, f) for r, f in records if bucket_of(r.consumed_at_ms) == newest]
        if not newest_pairs or len(newest_pairs) == len(records) or len(newest_pairs) > self.settings.batch_size:
            return records, []
        return [(r, f) for r, f in records if bucket_of(r.consumed_at_ms) != newest], [f for _, f in newest_pairs]

    def _write(self, records: list[_Parsed], report: RelayReport) -> tuple[list[_Parsed], list[_Rejected]]:
        """Write to the ledger (retrying inside; raises if it stays down); return what was written, what refused."""
        written = self.writer.write([r for r, _ in records])
        refused_ids = {id(record): error for record, error in written.refused}
        refused = [
            (f, RejectedInputError(RejectReason.INVALID_KEY, str(refused_ids[id(r)])))
            for r, f in records
            if id(r) in refused_ids
        ]
        records = [(r, f) for r, f in records if id(r) not in refused_ids]
        report.write_units += written.write_units
        if not records:
            return records, refused
        by_incarnation = Counter((r.queue, f.headers.get("originBrokerId", "unknown")) for r, f in records)
        age_ms = max(0, int(self.clock() * 1000) - min(r.consumed_at_ms for r, _ in records))
        report.oldest_age_ms = max(report.oldest_age_ms or 0, age_ms)
        self.metrics.add_metric("Captured", "Count", len(records))
        self.metrics.add_metric("CaptureBatchSize", "Count", len(records))
        self.metrics.add_metric("CaptureWriteUnits", "Count", written.write_units)
        self.metrics.add_metric("OldestAdvisoryAgeMs", "Milliseconds", age_ms)
        for departure, count in Counter(r.departure for r, _ in records).items():
            if departure != "consumed":
                report.departed[departure] += count
                self.metrics.add_metric(DEPARTURE_METRICS[departure], "Count", count)
        if self.audit is not None:
            self.audit.record_captured(by_incarnation)
        return records, refused

    def _park_confirmed(self, rejected: list[_Rejected], report: RelayReport) -> None:
        """Park every rejected advisory and wait until the broker confirms the parks.

        The parks are confirmed before any original is acked: an unconfirmed SEND lost with
        the connection would otherwise take the only copy of the advisory with it. The broker
        handles a connection's frames in order, so a receipt on the last SEND confirms all.
        """
        receipt = f"relay-park-{next(self._receipt_ids)}"
        for index, (frame, error) in enumerate(rejected):
            self._park(frame, error, receipt if index == len(rejected) - 1 else None)
            report.parked[error.reason.value] += 1
            self.metrics.add_metric("Parked", "Count", 1)
            logger.warning("advisory parked (%s): %s", error.reason.value, error.detail)
        self._wait_receipt(receipt)

    def _park(self, frame: stomp.utils.Frame, error: RejectedInputError, receipt: str | None = None) -> None:
        """Keep an unrecordable advisory, with why, on a queue operators can inspect and replay."""
        connection = self._require_connection()
        headers = {
            "persistent": "true",
            "brokersync-reason": error.reason.value,
            "brokersync-detail": error.detail[:500],
        }
        for name in ("orignalMessageId", "orignalDestination", "original-destination"):
            if name in frame.headers:
                headers[f"brokersync-{name}"] = frame.headers[name][:500]
        if receipt is not None:
            headers["receipt"] = receipt
        with unavailable_if_lost("the relay parked an advisory"):  # unconfirmed: left unacked
            connection.send(f"/queue/{PARKED_QUEUE}", frame.body, headers=headers)

    def _wait_receipt(self, receipt: str) -> None:
        deadline = time.monotonic() + self.settings.receipt_timeout_s
        inbox = self._inbox
        with inbox.receipt_arrived:
            while receipt not in inbox.receipts:
                remaining = deadline - time.monotonic()
                if remaining <= 0 or self._connection is None or not self._connection.is_connected():
                    raise BrokerUnavailableError("the primary did not confirm the parked advisories; none was acked")
                inbox.receipt_arrived.wait(remaining)
            inbox.receipts.discard(receipt)

    def _ack(self, frames: list[stomp.utils.Frame]) -> None:
        """One ACK per advisory (decision 0003), the batch's ACKs in writes of ``ACKS_PER_WRITE``.

        Why in one write: a write per ACK was a system call and stomp.py's per-frame transmit for
        every advisory, about 29 µs of CPU against 7 µs in one write (measured in-process; too
        small to show in the sync bench at 500 msg/s, decision 0016). The broker still sees one
        individual ACK per advisory, in the same order, so what it does is unchanged.
        """
        connection = self._require_connection()
        with unavailable_if_lost("the relay acked advisories"):  # unacked ones the broker redelivers
            for start in range(0, len(frames), ACKS_PER_WRITE):
                chunk = frames[start : start + ACKS_PER_WRITE]
                send_in_one_write(connection, [("ACK", {"id": frame.headers["ack"]}) for frame in chunk])

    def _require_connection(self) -> stomp.Connection12:
        if self._connection is None or not self._connection.is_connected():
            raise BrokerUnavailableError("the relay's connection to the primary dropped before it could ack")
        return self._connection

    def _backlog_waiting(self) -> bool:
        """Whether advisories wait on the broker while none reach us (the stall the watchdog exists for)."""
        if self.statistics is None:
            return True
        try:
            stats = _advisory_queue(self.statistics)
        except BrokerSyncError:
            return True
        return stats is not None and stats.size > 0


def _advisory_queue(statistics: StatisticsClient) -> QueueStats | None:
    """The advisory queue's counters now (None: the broker has no such queue; raises when unreadable)."""
    return statistics.queue_stats([CONSUMED_QUEUE]).get(CONSUMED_QUEUE)


def _advisory_consumers(statistics: StatisticsClient) -> int | None:
    """Consumers of the advisory queue now, the asking relay among them (None: the broker did not say).

    The hand-over's count: an unreadable count raises, and :class:`Handover` waits on.
    """
    stats = _advisory_queue(statistics)
    return None if stats is None else stats.consumer_count
