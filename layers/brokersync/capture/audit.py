"""Detecting consumed advisories that never reached the ledger.

Forwarded advisories are non-persistent: a primary restart empties ``BROKERSYNC.CONSUMED``.
So the relay counts what it captured per queue (consumed, expired and dead-lettered alike:
each is a dequeue, and each raises an advisory the relay captures)
and per incarnation of the primary (the advisory's ``originBrokerId`` changes at every
broker start), and the audit compares that with the broker's own dequeue counters, read
through the statistics plugin. For the running incarnation the difference is a gap that
may still be in flight; for an incarnation that is gone, what was dequeued and never
captured is lost, reported once as ``AdvisoriesLost``. The
reconciliation job repairs what is lost; this makes sure it is never hidden.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

from brokersync.broker.statistics import StatisticsClient
from brokersync.ledger.backend import AuditBackend
from brokersync.metrics import MetricsSink, NullMetrics
from brokersync.side_by_side import each
from brokersync.topology import Topology

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class AuditFinding:
    queue: str
    broker_id: str
    dequeued: int
    captured: int
    #: Lost for good (a finished incarnation) or, for the running one, still possibly in flight.
    missing: int
    final: bool


class CaptureAudit:
    def __init__(
        self,
        backend: AuditBackend,
        statistics: StatisticsClient,
        topology: Topology,
        *,
        metrics: MetricsSink | None = None,
        clock: Callable[[], float] = time.time,
        queue_workers: int | None = None,
    ) -> None:
        self.backend = backend
        #: Counter items written at once; None: the topology's ``tuning.queues_at_once``.
        self.queue_workers = queue_workers or topology.tuning.queues_at_once
        self.statistics = statistics
        self.topology = topology
        self.metrics: MetricsSink = metrics or NullMetrics()
        self.clock = clock

    def record_captured(self, counts: Counter[tuple[str, str]]) -> None:
        """Add what the relay wrote, per ``(queue, broker id)``, after the ledger write succeeded.

        One counter item each, written side by side: a batch over many queues adds many.
        """
        added = [(queue, broker_id, count) for (queue, broker_id), count in counts.items() if count]
        each(added, self._add, workers=self.queue_workers, name="audit")

    def _add(self, counted: tuple[str, str, int]) -> None:
        queue, broker_id, count = counted
        self.backend.add_audit(queue, broker_id, captured=count)

    def check(self) -> list[AuditFinding]:
        """Observe the primary's counters, then report every incarnation's shortfall."""
        queues = [q.name for q in self.topology.captured_queues]
        stats = self.statistics.queue_stats(queues)
        now_ms = int(self.clock() * 1000)
        findings: list[AuditFinding] = []
        for queue in queues:
            current = stats.get(queue)
            if current is not None:
                self.backend.set_audit(
                    queue,
                    current.broker_id,
                    dequeued=current.dequeue_count,
                    expired=current.expired_count,
                    observed_at_ms=now_ms,
                )
            for broker_id, record in self.backend.audits(queue).items():
                # Expiries and DLQ moves are dequeues whose advisories the relay captures too.
                missing = max(0, record.dequeued - record.captured)
                final = current is None or broker_id != current.broker_id
                findings.append(AuditFinding(queue, broker_id, record.dequeued, record.captured, missing, final))
                if not final:
                    self.metrics.add_metric("CaptureGap", "Count", missing)
                elif missing > record.reported_lost:
                    newly_lost = missing - record.reported_lost
                    self.metrics.add_metric("AdvisoriesLost", "Count", newly_lost)
                    logger.error(
                        "%d consumed advisories of %s were lost with primary incarnation %s "
                        "(dequeued %d, expired %d, captured %d): reconciliation must repair them",
                        newly_lost,
                        queue,
                        broker_id,
                        record.dequeued,
                        record.expired,
                        record.captured,
                    )
                    self.backend.set_audit(queue, broker_id, reported_lost=missing)
        return findings
