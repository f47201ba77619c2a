"""Writing captured records to the ledger, with the retry policy every capture path shares.

A throttled or failing table must never make a capture path ack what was not written, so
the writer either returns after every record is in the ledger or raises. Retries back off
exponentially with full jitter (what AWS recommends for throttling) and only for errors
that declare themselves retryable.
"""

from __future__ import annotations

import logging
import random
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

from brokersync.capture.records import ConsumedRecord
from brokersync.exceptions import BrokerSyncError

if TYPE_CHECKING:
    from brokersync.ledger.base import LedgerStore

logger = logging.getLogger(__name__)
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class WriteResult:
    records: int
    write_units: float


@dataclass(frozen=True)
class RetryPolicy:
    attempts: int = 8
    base_delay_s: float = 0.05
    max_delay_s: float = 5.0

    def delay(self, attempt: int) -> float:
        return random.uniform(0, min(self.max_delay_s, self.base_delay_s * 2**attempt))


def call_with_retry(
    operation: Callable[[], T],
    policy: RetryPolicy,
    *,
    sleep: Callable[[float], None] = time.sleep,
    on_retry: Callable[[BrokerSyncError, int], None] | None = None,
) -> T:
    """Run ``operation``; retry errors that say they are retryable, re-raise everything else."""
    for attempt in range(policy.attempts):
        try:
            return operation()
        except BrokerSyncError as e:
            if not e.retryable or attempt == policy.attempts - 1:
                raise
            if on_retry is not None:
                on_retry(e, attempt)
            sleep(policy.delay(attempt))
    raise AssertionError("unreachable: the last attempt returns or raises")


class LedgerWriter:
    """Groups records by queue and writes each group in one ledger call, retrying as above."""

    def __init__(
        self,
        ledger: LedgerStore,
        *,
        policy: RetryPolicy | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.ledger = ledger
        self.policy = policy or RetryPolicy()
        self.sleep = sleep
        self.retries = 0

    def write(self, records: Sequence[ConsumedRecord]) -> WriteResult:
        by_queue: dict[str, list[ConsumedRecord]] = defaultdict(list)
        for record in records:
            by_queue[record.queue].append(record)
        units = 0.0
        for queue, group in by_queue.items():
            entries = [(r.key, r.consumed_at_ms) for r in group]
            report = call_with_retry(
                lambda q=queue, e=entries: self.ledger.record(q, e),
                self.policy,
                sleep=self.sleep,
                on_retry=self._count_retry,
            )
            units += report.write_units
        return WriteResult(records=len(records), write_units=units)

    def _count_retry(self, error: BrokerSyncError, attempt: int) -> None:
        self.retries += 1
        logger.warning("ledger write failed (attempt %d), retrying: %s", attempt + 1, error)
