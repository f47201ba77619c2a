"""When can a copy no longer arrive? The primary's outflow queue, watched through its counters.

A key consumed on the primary is removed from DR once its copy is there. A copy not found
may still be in the primary's ``<queue>.DR`` outflow (a DR region back from an outage
receives the whole backlog first), so a key is given up on as *missing* only once the copy
path says it cannot arrive any more: every message that was in the outflow when the key was
consumed has left it, over a bridge that was connected.

The statistics plugin gives counters, not message times, so "left" is read from them: a
sample at time ``T`` with enqueue count ``E``, followed by a later sample on the same broker
incarnation whose dequeue count is at least ``E``, shows that everything enqueued by ``T``
has left the queue (ActiveMQ dispatches a queue in order; a network bridge acks a copy once
the DR broker stored it). An empty outflow with a bridge consumer shows it at once. A
restarted primary (new broker id) starts the samples afresh; a primary that cannot be read
moves nothing, so keys then wait instead of being given up.

"In order" holds for one bridge (``tuning.bridge.parallel_bridges`` 1, the default): its
acks follow its dispatch, and copies it had in flight when its connection broke come back to
the head of the queue. With several bridges, one that stalls holds its prefetched copies
while the others' acks raise the dequeue count past them, so the count can pass a copy still
on its way. Counters cannot tell which messages are left. A copy given up on this way
arrives later: redelivered if its bridge's connection broke (the late-copy sweep removes
it), otherwise as a first delivery that only the reconciliation lists for purge.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from brokersync.broker.statistics import QueueStats, StatisticsClient
from brokersync.exceptions import BrokerSyncError
from brokersync.topology import Topology

logger = logging.getLogger(__name__)

#: Samples kept per outflow queue (one per observation; an observation at most every second).
MAX_SAMPLES = 600
#: How much the purge's clock and the primary's may disagree; a key must be older than this
#: before the drain point passes it.
CLOCK_SKEW_MS = 2_000


@dataclass(frozen=True)
class _Sample:
    at_ms: int
    enqueued: int
    broker_id: str


class CopyPathWatch:
    """Per synced queue, the latest time before which every copy has left the primary."""

    def __init__(
        self,
        primary: StatisticsClient,
        topology: Topology,
        clock_ms: Callable[[], int],
        *,
        min_interval_ms: int = 1_000,
    ) -> None:
        self.primary = primary
        self.topology = topology
        self.clock_ms = clock_ms
        self.min_interval_ms = min_interval_ms
        self._samples: dict[str, deque[_Sample]] = {}
        self._drained: dict[str, int] = {}
        self._last_ms: int | None = None
        #: The purge's queues ask side by side; one reads the counters, the others then use the read.
        self._lock = threading.Lock()

    def drained_past(self, queue: str) -> int | None:
        """Every copy of ``queue`` enqueued before this time (ms) has left the primary; None if unknown."""
        self.observe()
        return self._drained.get(queue)

    def observe(self) -> None:
        """Read the outflow counters (at most every ``min_interval_ms``) and move the drain points."""
        with self._lock:
            now = self.clock_ms()
            if self._last_ms is not None and now - self._last_ms < self.min_interval_ms:
                return
            self._last_ms = now
            outflows = {self.topology.dr_name(q): q.name for q in self.topology.captured_queues}
            try:
                stats = self.primary.queue_stats(list(outflows))
            except BrokerSyncError as e:
                logger.info("copy path not observed (primary unreachable): %s", e)
                return
            for outflow, queue in outflows.items():
                if outflow in stats:
                    self._update(queue, stats[outflow], now)

    def _update(self, queue: str, stats: QueueStats, now: int) -> None:
        samples = self._samples.setdefault(queue, deque(maxlen=MAX_SAMPLES))
        if samples and samples[-1].broker_id != stats.broker_id:
            samples.clear()  # the primary restarted: its counters began again
        bridged = stats.consumer_count > 0
        if bridged and stats.size == 0:
            self._advance(queue, now)
            samples.clear()
        elif bridged:
            passed = [s for s in samples if stats.dequeue_count >= s.enqueued]
            if passed:
                self._advance(queue, passed[-1].at_ms)
                while samples and samples[0].at_ms <= passed[-1].at_ms:
                    samples.popleft()
        samples.append(_Sample(now, stats.enqueue_count, stats.broker_id))

    def _advance(self, queue: str, at_ms: int) -> None:
        self._drained[queue] = max(self._drained.get(queue, 0), at_ms)


def can_no_longer_arrive(consumed_at_ms: int, drained_past_ms: int | None) -> bool:
    """The copy of a message consumed at ``consumed_at_ms`` has left the primary, if it ever will."""
    return drained_past_ms is not None and consumed_at_ms + CLOCK_SKEW_MS < drained_past_ms
