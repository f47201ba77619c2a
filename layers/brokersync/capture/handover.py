"""The relay's hand-over: an invocation that has relayed its time stays until the next one consumes.

The relay is a scheduled function: one invocation a minute, each relaying for 58 s. Between
one invocation's end and the next one's subscription no advisory reached the ledger, so for
about 2 s of every minute (longer when EventBridge delivered a minute's event late) consumed
messages stayed on DR past the one-second goal (decision 0017). Now an invocation that has
relayed its time goes on relaying until the broker counts one more consumer on
``BROKERSYNC.CONSUMED`` than it counted when it began to wait: the next invocation has
subscribed, and from then on both receive advisories until this one acks its last batch and
leaves. Advisories are acked only after their ledger write, and ledger writes are unions, so
two relays on the queue for a moment write nothing twice that matters (decision 0039).

Counting "one more than at the start" rather than "two" keeps a connection the broker has
not yet dropped (a killed invocation's, until its heart-beats time out) from passing for the
successor. A successor that subscribed before the wait began is not seen: the invocation then
relays to the end of its wait, which costs Lambda time and nothing else. An unreadable count
does the same. The wait is bounded: the function's timeout less a margin.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from brokersync.exceptions import BrokerSyncError

logger = logging.getLogger(__name__)

#: How often the broker's consumer count is read while waiting for the successor (seconds).
DEFAULT_POLL_S = 1.0


class Handover:
    """When a relay that has relayed its time may leave: once a successor consumes, or at ``within_s``."""

    def __init__(
        self,
        consumers: Callable[[], int | None],
        within_s: float,
        *,
        poll_s: float = DEFAULT_POLL_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """``consumers`` reads how many consumers ``BROKERSYNC.CONSUMED`` has (None: unreadable)."""
        if within_s < 0 or poll_s <= 0:
            raise ValueError("a hand-over needs within_s >= 0 and poll_s > 0")
        self.consumers = consumers
        self.within_s = within_s
        self.poll_s = poll_s
        self.clock = clock
        self.began_at: float | None = None
        self.until = 0.0
        self._count_at_start: int | None = None
        self._next_look = 0.0
        #: Whether the run ended because a successor was seen (False: the wait ran out or never began).
        self.handed_over = False

    def begin(self) -> None:
        """Start waiting: note the consumers there are now (this relay among them)."""
        now = self.clock()
        self.began_at = now
        self.until = now + self.within_s
        self._count_at_start = self._read()
        self._next_look = now + self.poll_s

    def over(self) -> bool:
        """Whether the relay may leave now: a successor consumes, or the wait is used up."""
        now = self.clock()
        if now >= self.until:
            return True
        if self._count_at_start is None or now < self._next_look:
            return False
        self._next_look = now + self.poll_s
        count = self._read()
        if count is not None and count > self._count_at_start:
            self.handed_over = True
            return True
        return False

    def waited_s(self) -> float:
        """How long the relay waited for its successor (0 when it never began to)."""
        return 0.0 if self.began_at is None else max(0.0, self.clock() - self.began_at)

    def _read(self) -> int | None:
        try:
            return self.consumers()
        except (BrokerSyncError, OSError) as e:
            logger.warning("cannot read the consumers of the advisory queue while handing over: %s", e)
            return None
