"""Is a copy on DR after all? A browse that must say "no" before a key is given up on.

The remover takes what the DR broker dispatches to its selector within ``settle_s`` (0.4 s),
so "not found" by a removal means "not dispatched in time", not "not there". A DR broker
catching up on a backlog (a region back from an outage receives thousands of copies at once),
a long pause, or a loaded host dispatches later than that. The copy path (:mod:`copy_path`)
tells when a copy can no longer *arrive*; it cannot tell a copy that arrived from one that is
not there. A key given up on while its copy sat on DR left that copy there for good: the
late-copy sweep takes only redelivered copies, so a consumed message stayed on DR, a
duplicate at the next failover. The dr-region-loss drill gave up on 1,884 such keys in CI.

So the keys the purge would give up on are first looked for with a browse of the DR queue,
with a selector on exactly their message ids. ActiveMQ ends a browse with an explicit end
frame (``browser: end``) once it has gone through the messages it pages in, so an id with no
frame before that end is not on the queue; a broker that is slow only makes the browse
take longer (up to ``idle_timeout_s`` between frames). A browse delivers, acks and counts
nothing, so the invariant's redelivery counters stay as they were.

A browse sees at most the queue policy's ``maxBrowsePageSize`` messages from the head, and
none the queue could not page in from its store (at the cursor's high-water mark of its
memory limit, or with the broker's memory full). On such a queue, or when the browse or the
counters cannot be read, nothing is confirmed absent: the keys stay pending, and a later
round asks again.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass

from brokersync.broker.statistics import BROKER_MEMORY_FULL_PERCENT, CURSOR_HIGH_WATER_PERCENT, StatisticsClient
from brokersync.broker.stomp import StompConnector
from brokersync.exceptions import BrokerSyncError
from brokersync.keys import InvalidKeyError
from brokersync.purge.selectors import MAX_HEADER_LINE_BYTES, selector_batches
from brokersync.snapshot.browser import QueueBrowser
from brokersync.topology import Queue

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class AbsenceCheck:
    """Confirms, by browsing one broker, which message ids a queue does not hold."""

    connector: StompConnector
    #: The queue policy's ``maxBrowsePageSize``: a queue this deep or deeper is not browsed whole.
    browse_limit: int
    #: A browse that receives nothing (no message, no end) for this long has told nothing.
    idle_timeout_s: float = 10.0
    #: Selectors (browses) per call; ids beyond them are not confirmed this time.
    max_selectors: int = 8
    selector_bytes: int = MAX_HEADER_LINE_BYTES

    def absent(self, queue: Queue, message_ids: Sequence[str], *, deadline: float | None = None) -> set[str]:
        """The ids of ``message_ids`` that ``queue`` does not hold; empty whenever that cannot be told.

        ``deadline`` (``time.monotonic()`` seconds): no browse is started that could not end
        by then (one idle timeout), and ids not browsed are not confirmed.
        """
        try:
            batches = selector_batches(message_ids, "message-id", max_line_bytes=self.selector_bytes)
        except (InvalidKeyError, ValueError) as e:  # the remover refuses such an id before it gets here
            logger.warning("not browsing %s for ids no selector may name: %s", queue.name, e)
            return set()
        if not batches or not self._browsable(queue.name):
            return set()
        browser = QueueBrowser(self.connector, idle_timeout_s=self.idle_timeout_s, prefetch=500)
        confirmed: set[str] = set()
        for batch, selector in batches[: self.max_selectors]:
            if deadline is not None and time.monotonic() + self.idle_timeout_s > deadline:
                break
            try:
                found = {line.message_id for line in browser.lines(queue, selector=selector)}
            except BrokerSyncError as e:
                logger.warning("cannot confirm that %d ids are absent from %s: %s", len(batch), queue.name, e)
                break
            confirmed.update(k for k in batch if k not in found)
        return confirmed

    def _browsable(self, queue: str) -> bool:
        """The whole of ``queue`` is within a browse: not too deep, and nothing left unpaged for memory."""
        try:
            snapshot = StatisticsClient(self.connector).snapshot([queue])
        except BrokerSyncError as e:
            logger.warning("cannot confirm absences on %s: its counters cannot be read: %s", queue, e)
            return False
        stats = snapshot.queues.get(queue)
        if stats is None:  # no such queue on the broker: the browse creates it, empty
            return True
        reasons = []
        if stats.size >= self.browse_limit:
            reasons.append(f"{stats.size} messages, a browse reaches {self.browse_limit}")
        if stats.memory_percent >= CURSOR_HIGH_WATER_PERCENT:
            reasons.append(f"{stats.memory_percent}% of its memory limit, where paging in stops")
        if snapshot.broker.memory_percent >= BROKER_MEMORY_FULL_PERCENT:
            reasons.append("the broker's memory is full")
        if reasons:
            detail = "; ".join(reasons)
            logger.warning("no key of %s is given up on while a browse cannot see all of it: %s", queue, detail)
            return False
        return True
