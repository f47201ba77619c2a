"""Ledger errors; the DynamoDB adapter turns botocore and pynamodb errors into these."""

from __future__ import annotations

from brokersync.exceptions import BrokerSyncError


class LedgerError(BrokerSyncError):
    """The ledger refused a request for a reason retrying will not fix (bad table, bad input)."""


class LedgerUnavailableError(LedgerError):
    """Throttled, or the service failed transiently: retry with backoff."""

    retryable = True
