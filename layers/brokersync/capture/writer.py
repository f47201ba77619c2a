"""Writing captured records to the ledger, with the retry policy every capture path shares.

A throttled or failing table must never make a capture path ack what was not written, so
the writer either returns after every record is in the ledger or raises. Retries back off
exponentially with full jitter (what AWS recommends for throttling) and only for errors
that declare themselves retryable.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

from brokersync.capture.records import ConsumedRecord
from brokersync.exceptions import BrokerSyncError
from brokersync.ledger.base import LedgerEntry
from brokersync.ledger.exceptions import LedgerRecordRefusedError
from brokersync.side_by_side import QUEUE_WORKERS, each

if TYPE_CHECKING:
    from brokersync.ledger.base import LedgerStore

logger = logging.getLogger(__name__)
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class WriteResult:
    records: int
    write_units: float
    #: Records the ledger refused outright (never retryable), each with why; the rest were written.
    refused: tuple[tuple[ConsumedRecord, BrokerSyncError], ...] = ()


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
    """Groups records by queue and writes each group in one ledger call, retrying as above.

    The groups of different queues are written side by side (``queue_workers`` at once): they
    touch different items, and the batch is acked only once every group is written.
    """

    def __init__(
        self,
        ledger: LedgerStore,
        *,
        policy: RetryPolicy | None = None,
        sleep: Callable[[float], None] = time.sleep,
        queue_workers: int = QUEUE_WORKERS,
    ) -> None:
        self.ledger = ledger
        self.policy = policy or RetryPolicy()
        self.sleep = sleep
        self.queue_workers = queue_workers
        self.retries = 0
        self._retries_lock = threading.Lock()

    def write(self, records: Sequence[ConsumedRecord]) -> WriteResult:
        """Write every record, or raise; a record the ledger refuses outright is returned, not raised.

        A record the ledger refuses (:class:`LedgerRecordRefusedError`: a key it will never
        take) would otherwise fail its whole batch again on every redelivery and stall capture
        for every queue, so the group is written again one record at a time and only the
        refused ones are handed back (the relay parks them, the receipts path counts them).
        Any other error (the table is gone, the ledger stays throttled) raises: nothing of the
        batch may then be acked.
        """
        by_queue: dict[str, list[ConsumedRecord]] = defaultdict(list)
        for record in records:
            by_queue[record.queue].append(record)
        results = each(by_queue.items(), self._write_queue, workers=self.queue_workers, name="ledger-write")
        return WriteResult(
            records=sum(r.records for r in results),
            write_units=sum(r.write_units for r in results),
            refused=tuple(refusal for r in results for refusal in r.refused),
        )

    def _write_queue(self, queue_group: tuple[str, list[ConsumedRecord]]) -> WriteResult:
        """One queue's group; on a refusal, its records one at a time, the refused ones handed back."""
        queue, group = queue_group
        try:
            return WriteResult(records=len(group), write_units=self._write_group(queue, group))
        except LedgerRecordRefusedError:
            pass
        units, written = 0.0, 0
        refused: list[tuple[ConsumedRecord, BrokerSyncError]] = []
        for record in group:
            try:
                units += self._write_group(queue, [record])
                written += 1
            except LedgerRecordRefusedError as single:
                refused.append((record, single))
        return WriteResult(records=written, write_units=units, refused=tuple(refused))

    def _write_group(self, queue: str, group: Sequence[ConsumedRecord]) -> float:
        entries = [LedgerEntry(r.key, r.consumed_at_ms, r.message_id) for r in group]
        report = call_with_retry(
            lambda: self.ledger.record(queue, entries),
            self.policy,
            sleep=self.sleep,
            on_retry=self._count_retry,
        )
        return report.write_units

    def _count_retry(self, error: BrokerSyncError, attempt: int) -> None:
        with self._retries_lock:
            self.retries += 1
        logger.warning("ledger write failed (attempt %d), retrying: %s", attempt + 1, error)
