"""Sync keys: the ids the ledger stores and the purge loop puts into DR selectors.

Validation is strict because a key ends up inside a JMS selector on the DR broker: an id
that could carry a quote, a comma or a wildcard could widen ``JMSCorrelationID IN (...)``
and remove a message that was never consumed. The two kinds never overlap (a ULID never
starts with ``ID:``), so a key says by itself which selector header it belongs to.
"""

from __future__ import annotations

import re

from ulid import ULID

from brokersync.exceptions import BrokerSyncError
from brokersync.topology import SyncKey

#: Crockford base32, 26 characters; the first is 0-7 because a ULID is 128 bits.
ULID_PATTERN = re.compile(r"^[0-7][0-9A-HJKMNP-TV-Z]{25}$")
#: ActiveMQ's message id: ``ID:<host>-<port>-<start ms>-<n>:<connection>:<session>:<producer>:<seq>``.
#: STOMP producers get session -1, so the last three fields may be negative.
MESSAGE_ID_PATTERN = re.compile(r"^ID:[A-Za-z0-9._-]{1,200}-\d{1,10}-\d{10,16}-\d{1,10}:\d{1,10}(?::-?\d{1,19}){3}$")


class InvalidKeyError(BrokerSyncError):
    """A correlation id or message id that is not a well-formed sync key."""

    def __init__(self, key: str, expected: SyncKey) -> None:
        self.key = key
        self.expected = expected
        shown = key if len(key) <= 80 else key[:77] + "..."
        what = "ULID (26 Crockford base32 characters)" if expected == "correlation-id" else "ActiveMQ message id"
        super().__init__(f"{shown!r} is not a valid {what}")


def key_kind(key: str) -> SyncKey:
    """Which selector header a well-formed key belongs to."""
    return "message-id" if key.startswith("ID:") else "correlation-id"


def validate_key(key: str, kind: SyncKey) -> str:
    """Return ``key`` when it is a well-formed key of ``kind``; raise :class:`InvalidKeyError` otherwise.

    ULIDs are accepted in lower case too (some libraries print them so) and normalised to
    upper case, the form producers' JMS headers carry after ``brokersync.client.send``.
    """
    if kind == "correlation-id":
        normalised = key.upper()
        if ULID_PATTERN.match(normalised):
            return normalised
    elif MESSAGE_ID_PATTERN.match(key):
        return key
    raise InvalidKeyError(key, kind)


def is_valid_key(key: str) -> bool:
    """True when ``key`` is a well-formed key of either kind, exactly as stored."""
    return bool(ULID_PATTERN.match(key) or MESSAGE_ID_PATTERN.match(key))


def ulid_time_ms(key: str) -> int:
    """The millisecond timestamp in a ULID's first 10 characters (why time-range queries work)."""
    return ULID.from_str(key).milliseconds
