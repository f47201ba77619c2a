"""Capture: turning "message M was consumed on the primary" into ledger records.

Two sources feed it: consumed advisories the primary forwards into ``BROKERSYNC.CONSUMED``
(drained by the relay) and JSON receipts on ``BROKERSYNC.RECEIPTS`` (delivered by an Amazon
MQ event source mapping). Both parse into :class:`ConsumedRecord` and both reject bad input
with a :class:`RejectedInputError` that carries a machine-readable reason, so the callers can log,
count and park it without ever matching on message text.
"""

from __future__ import annotations

from brokersync.capture.records import ConsumedRecord, RejectedInputError, RejectReason

__all__ = ["ConsumedRecord", "RejectReason", "RejectedInputError"]
