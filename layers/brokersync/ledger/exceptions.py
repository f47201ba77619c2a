"""Ledger errors; the DynamoDB adapter turns botocore and pynamodb errors into these."""

from __future__ import annotations

from brokersync.exceptions import BrokerSyncError


class LedgerError(BrokerSyncError):
    """The ledger refused a request for a reason retrying will not fix (bad table, bad input)."""


class LedgerUnavailableError(LedgerError):
    """Throttled, or the service failed transiently: retry with backoff."""

    retryable = True


class LedgerRecordRefusedError(LedgerError):
    """One record of a batch can never be stored (its key is malformed); the rest of the batch can.

    Capture paths validate keys before they reach the ledger, so this is the last guard: the
    writer isolates the record and hands it back to be parked, instead of failing the batch.
    """

    def __init__(self, key: object, reason: str) -> None:
        self.key = key
        super().__init__(reason)
