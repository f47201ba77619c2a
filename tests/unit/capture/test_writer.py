"""The capture writer retries what may pass, and gives up loudly on what cannot."""

from __future__ import annotations

import threading
from collections.abc import Sequence

import pytest
from ulid import ULID

from brokersync.capture.records import ConsumedRecord
from brokersync.capture.writer import LedgerWriter, RetryPolicy
from brokersync.ledger import LedgerError, LedgerRecordRefusedError, LedgerUnavailableError, WriteReport, memory_ledger
from tests.unit.capture.advisories import ULID_KEY


class FlakyLedger:
    def __init__(self, failures: list[Exception]) -> None:
        self.failures = failures
        self.inner = memory_ledger()
        self.calls = 0

    def record(self, queue: str, entries: Sequence[tuple[str, int]]) -> WriteReport:
        self.calls += 1
        if self.failures:
            raise self.failures.pop(0)
        return self.inner.record(queue, entries)


RECORD = ConsumedRecord("ORDERS", ULID_KEY, "correlation-id", 1795340000000)


def test_throttling_is_retried_with_backoff_until_the_write_succeeds() -> None:
    ledger = FlakyLedger([LedgerUnavailableError("throttled"), LedgerUnavailableError("throttled")])
    sleeps: list[float] = []

    result = LedgerWriter(ledger, sleep=sleeps.append).write([RECORD])  # type: ignore[arg-type]

    assert result.records == 1
    assert ledger.calls == 3
    assert len(sleeps) == 2


def test_a_table_that_stays_throttled_raises_after_the_last_attempt() -> None:
    ledger = FlakyLedger([LedgerUnavailableError("throttled")] * 10)

    with pytest.raises(LedgerUnavailableError):
        LedgerWriter(ledger, policy=RetryPolicy(attempts=3), sleep=lambda _s: None).write([RECORD])  # type: ignore[arg-type]

    assert ledger.calls == 3


def test_an_error_that_is_not_retryable_is_raised_at_once() -> None:
    ledger = FlakyLedger([LedgerError("no such table")])

    with pytest.raises(LedgerError, match="no such table"):
        LedgerWriter(ledger, sleep=lambda _s: None).write([RECORD])  # type: ignore[arg-type]

    assert ledger.calls == 1


def test_the_backoff_grows_and_stays_capped() -> None:
    policy = RetryPolicy(base_delay_s=0.1, max_delay_s=1.0)

    assert all(0 <= policy.delay(attempt) <= min(1.0, 0.1 * 2**attempt) for attempt in range(10))


def test_a_record_the_ledger_refuses_costs_that_record_only() -> None:
    ledger = memory_ledger()
    bad = ConsumedRecord("ORDERS", "not-a-key", "correlation-id", 1795340000000, "ID:app-1-1795340000000-1:1:-1:1:2")
    good = ConsumedRecord("ORDERS", ULID_KEY, "correlation-id", 1795340000000, "ID:app-1-1795340000000-1:1:-1:1:1")

    result = LedgerWriter(ledger, sleep=lambda _s: None).write([good, bad])

    assert result.records == 1
    assert [(record, type(error)) for record, error in result.refused] == [(bad, LedgerRecordRefusedError)]
    assert [p.key for p in ledger.pending("ORDERS")] == [ULID_KEY]


class _TogetherLedger:
    """A ledger whose writes, one per queue, must all be in flight at once to proceed."""

    def __init__(self, queues: int, failing: str | None = None) -> None:
        self.inner = memory_ledger()
        self.together = threading.Barrier(queues, timeout=5)  # broken unless every queue's write waits at once
        self.failing = failing

    def record(self, queue: str, entries: Sequence[tuple[str, int]]) -> WriteReport:
        self.together.wait()
        if queue == self.failing:
            raise LedgerError("no such table")
        return self.inner.record(queue, entries)


def _records_for(*queues: str) -> list[ConsumedRecord]:
    return [ConsumedRecord(queue, str(ULID()), "correlation-id", 1795340000000) for queue in queues]


def test_the_groups_of_different_queues_are_written_side_by_side() -> None:
    ledger = _TogetherLedger(queues=3)

    result = LedgerWriter(ledger, sleep=lambda _s: None).write(_records_for("ORDERS", "PAYMENTS", "AUDIT"))  # type: ignore[arg-type]

    assert result.records == 3
    assert all(len(ledger.inner.pending(queue)) == 1 for queue in ("ORDERS", "PAYMENTS", "AUDIT"))


def test_a_queue_whose_write_fails_fails_the_batch_once_the_others_are_written() -> None:
    ledger = _TogetherLedger(queues=2, failing="ORDERS")

    with pytest.raises(LedgerError, match="no such table"):
        LedgerWriter(ledger, sleep=lambda _s: None).write(_records_for("ORDERS", "PAYMENTS"))  # type: ignore[arg-type]

    # Nothing is acked: the batch comes again, and writing PAYMENTS again adds nothing new.
    assert len(ledger.inner.pending("PAYMENTS")) == 1
