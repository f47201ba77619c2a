"""Sync keys: the ids the ledger stores and the purge loop puts into DR selectors.

Validation is strict because a key ends up inside a JMS selector on the DR broker: an id
that could carry a quote, a comma or a wildcard could widen ``JMSMessageID IN (...)``
and remove a message that was never consumed. The two kinds never overlap (a message id
always holds colons, a ULID never does), so a key says by itself which kind it is.

Every pattern is matched against the whole string (``fullmatch``) and in ASCII only: ``$``
also matches before a trailing newline, and ``\\d`` or ``str.upper()`` also accept or
produce non-ASCII characters that look like digits or letters.

Case policy for ULIDs: Crockford base32 is case-insensitive, so a lower-case ULID is
accepted and stored upper-case (the ledger holds ULIDs as 16 bytes, which have no case).
The purge removes messages by their JMS message id, never by correlation id, so a
producer that stamped a lower-case ULID is still matched exactly. Message ids are
case-sensitive and kept as they are.
"""

from __future__ import annotations

import re

from ulid import ULID

from brokersync.exceptions import BrokerSyncError
from brokersync.topology import SyncKey

#: Crockford base32, 26 characters; the first is 0-7 because a ULID is 128 bits.
ULID_PATTERN = re.compile(r"[0-7][0-9A-HJKMNP-TV-Z]{25}", re.ASCII)
#: ActiveMQ's message id: ``ID:<host>-<port>-<start>-<n>:<connection>:<session>:<producer>:<seq>``.
#: Over OpenWire the client library makes it, so the start stamp is the client's clock: Java
#: and C++ (CMS) clients write milliseconds (13 digits), the .NET client (Apache.NMS.ActiveMQ)
#: writes ``DateTime.Now.Ticks`` (18 digits), hence up to 19, a long's width. STOMP producers
#: get session -1, so the last three fields may be negative. A Java client given a
#: ``connectionIDPrefix`` puts that prefix where ``ID:<host>`` would be (ActiveMQ's
#: ``IdGenerator(prefix)``: ``<prefix>-<port>-<start>-<n>``), so ``ID:`` is optional and the
#: prefix takes the host's characters. Every id keeps only letters, digits, ``._-:``: nothing a
#: selector's string literal could be broken out of.
MESSAGE_ID_PATTERN = re.compile(
    r"(?:ID:)?[A-Za-z0-9._-]{1,200}-[0-9]{1,10}-[0-9]{10,19}-[0-9]{1,10}:[0-9]{1,10}(?::-?[0-9]{1,19}){3}",
    re.ASCII,
)

#: The longest key either pattern accepts: a message id with every field at its widest
#: (``ID:``, a 200-character host, 10, 19 and 10 digits, then four fields of up to 19 digits
#: with a sign) is 319 characters. Inputs that carry a key (receipts) may refuse anything longer.
MAX_KEY_LENGTH = 319


class InvalidKeyError(BrokerSyncError):
    """A correlation id or message id that is not a well-formed sync key. Retrying never helps."""

    retryable = False

    def __init__(self, key: str, expected: SyncKey, reason: str | None = None) -> None:
        self.key = key
        self.expected = expected
        shown = key if len(key) <= 80 else key[:77] + "..."
        what = "ULID (26 Crockford base32 characters)" if expected == "correlation-id" else "ActiveMQ message id"
        super().__init__(f"{shown!r}: {reason}" if reason else f"{shown!r} is not a valid {what}")


def key_kind(key: str) -> SyncKey:
    """Which kind a key is, by its shape: message ids hold colons, ULIDs never do."""
    return "message-id" if ":" in key else "correlation-id"


def validate_key(key: str, kind: SyncKey) -> str:
    """Return ``key`` when it is a well-formed key of ``kind``; raise :class:`InvalidKeyError` otherwise.

    ULIDs are accepted in lower case too and returned upper-case (see the module docstring);
    anything with a non-ASCII character is refused before any case folding.
    """
    if not isinstance(key, str) or not key.isascii():
        raise InvalidKeyError(str(key), kind)
    if kind == "correlation-id":
        normalised = key.upper()
        if ULID_PATTERN.fullmatch(normalised):
            return normalised
    elif MESSAGE_ID_PATTERN.fullmatch(key):
        return key
    raise InvalidKeyError(key, kind)


def validate_message_id(message_id: str) -> str:
    """A consumed message's own JMS id, exactly as the broker assigned it (what the purge selects on)."""
    return validate_key(message_id, "message-id")


def key_identity(key: str, kind: SyncKey, message_id: str | None) -> tuple[str, str | None]:
    """A key and its consumed message's id, each validated: the pair the purge selects on.

    The one definition for every input that carries both (receipts, ledger entries): a
    message-id key names its own message, so its id is the key, and another id beside it
    raises :class:`InvalidKeyError`. Two messages can share a correlation id, so a ULID
    key's id is what tells them apart; it is validated when given, and whether it must be
    given is the caller's rule (a receipt needs one; the ledger also keeps entries without).
    """
    key = validate_key(key, kind)
    checked = validate_message_id(message_id) if message_id is not None else None
    if kind == "message-id":
        if checked is not None and checked != key:
            raise InvalidKeyError(checked, "message-id", f"differs from the message-id key {key!r}")
        return key, key
    return key, checked


def is_valid_key(key: str) -> bool:
    """True when ``key`` is a well-formed key of either kind, exactly as stored."""
    return key.isascii() and bool(ULID_PATTERN.fullmatch(key) or MESSAGE_ID_PATTERN.fullmatch(key))


def ulid_time_ms(key: str) -> int:
    """The millisecond timestamp in a ULID's first 10 characters (why time-range queries work)."""
    return ULID.from_str(key).milliseconds
