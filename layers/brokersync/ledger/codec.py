"""How one consumed message is written inside a ledger capture item, and read back.

Cost is item size (1 write unit per KB), so elements are compact:

* a ULID key is a binary element: the 16 ULID bytes, a 2-byte millisecond offset in the
  item's 250 ms bucket, then (when the consumed message's id is known) that id as a packed
  *reference*: the 5-byte hash of its producer id (``ID:host-port-start-n:c:s:p``), then
  ``0x01`` + the sequence number as a varint, or ``0x02`` + the ASCII tail when the sequence
  is not a canonical decimal (so decoding is always exact). About 27 bytes in all. The first
  18 bytes keep their meaning whether or not a reference follows, so readers that only want
  key and time (the reconciliation job) read them by position.
* a message-id key is a string element ``"<offset>|<prefix hash><tail>"``, where the prefix
  is the connection part every id of one producer connection shares (``ID:host-port-start-n``)
  and the tail ``:c:s:p:seq``.

Prefixes are stored once per item in a third set as ``"<hash>|<prefix>"``; elements name
them by a 40-bit hash (8 base32 characters in strings, 5 raw bytes in binary).

A hash can collide. Two different prefixes with one hash in the same item would decode an
element to either id, and selecting the wrong one removes a message that was not consumed,
so :func:`decode_item` reports such an element as *ambiguous* (no message id) instead of
picking one; the purge never removes what it cannot name exactly.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import struct
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

from ulid import ULID

from brokersync.keys import ULID_PATTERN, key_kind

BUCKET_MS = 250
_OFFSET = struct.Struct(">H")
_ULID_BYTES = 16
#: ULID element bytes before the optional message-id reference.
ULID_ELEMENT_HEAD = _ULID_BYTES + _OFFSET.size
PREFIX_HASH_CHARS = 8
_HASH_BYTES = 5


#: Crockford base32 (ULIDs) and the digits ``int(..., 32)`` reads, in value order.
_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
_TO_INT_DIGITS = str.maketrans(_CROCKFORD, "0123456789abcdefghijklmnopqrstuv")
#: Every 10-bit value as its two Crockford characters.
_CROCKFORD_PAIRS = tuple(_CROCKFORD[v >> 5] + _CROCKFORD[v & 31] for v in range(1024))


def ulid_bytes(key: str) -> bytes:
    """The 16 bytes of a ULID key, as python-ulid's ``ULID.from_str(key).bytes``.

    Why not just that: it is a quarter of the codec's cost per consumed message on the relay
    (decision 0020). A key in canonical form (what :func:`brokersync.keys.validate_key`
    returns) is read with ``int``; anything else goes to python-ulid, which raises on what it
    cannot read exactly as before. A unit test holds the two equal.
    """
    if ULID_PATTERN.fullmatch(key):
        return int(key.translate(_TO_INT_DIGITS), 32).to_bytes(_ULID_BYTES, "big")
    return ULID.from_str(key).bytes


def ulid_from_bytes(raw: bytes) -> str:
    """The canonical text of a 16-byte ULID, as ``str(ULID.from_bytes(raw))``; other lengths raise as it does.

    The purge decodes every element new to it, and python-ulid's path was most of that
    (decision 0020). ``base64.b32encode`` is plain Python too, looping over 5-byte groups: it
    was 4-5 % of the purge's samples at 1,000 msg/s. Ten bits at a time from one integer,
    looked up as two characters, takes half as long.
    """
    if len(raw) != _ULID_BYTES:
        return str(ULID.from_bytes(raw))
    n = int.from_bytes(raw, "big")
    p = _CROCKFORD_PAIRS
    # 128 bits: the first character carries the top 3, twelve pairs 120, the last character 5.
    return (
        _CROCKFORD[n >> 125]
        + p[n >> 115 & 1023] + p[n >> 105 & 1023] + p[n >> 95 & 1023] + p[n >> 85 & 1023]
        + p[n >> 75 & 1023] + p[n >> 65 & 1023] + p[n >> 55 & 1023] + p[n >> 45 & 1023]
        + p[n >> 35 & 1023] + p[n >> 25 & 1023] + p[n >> 15 & 1023] + p[n >> 5 & 1023]
        + _CROCKFORD[n & 31]
    )  # fmt: skip


#: Consume times the ledger holds, in epoch milliseconds: 2000-01-01 to 2100-01-01 UTC. Every
#: broker's and consumer's clock is inside; a time outside is a forged or mistyped field (epoch
#: seconds where milliseconds belong, a bool, 10**40), and recorded it would land in a bucket no
#: purge window reads, or in a sort key DynamoDB refuses, failing the whole batch it came in.
EARLIEST_CONSUMED_AT_MS = 946_684_800_000
LATEST_CONSUMED_AT_MS = 4_102_444_800_000


def plausible_consumed_at_ms(value: object) -> int | None:
    """``value`` as a consume time the ledger can hold, or None (bools are not numbers here)."""
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    return value if EARLIEST_CONSUMED_AT_MS <= value < LATEST_CONSUMED_AT_MS else None


def bucket_of(ms: int) -> int:
    return ms - ms % BUCKET_MS


@functools.lru_cache(maxsize=4096)
def prefix_hash(prefix: str) -> str:
    """The 40-bit name of a producer prefix. Cached: a producer connection sends many messages."""
    return base64.b32encode(hashlib.blake2b(prefix.encode(), digest_size=5).digest()).decode()


def split_message_id(message_id: str) -> tuple[str, str]:
    """``ID:host-port-start-n`` (shared by a producer's connection) and the ``:c:s:p:seq`` tail."""
    cut = message_id.index(":", 3)
    return message_id[:cut], message_id[cut:]


_SEQ_VARINT = 0x01
_SEQ_TEXT = 0x02


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        low, value = value & 0x7F, value >> 7
        out.append(low | (0x80 if value else 0))
        if not value:
            return bytes(out)


def _read_varint(raw: bytes) -> int | None:
    value = shift = 0
    for index, byte in enumerate(raw):
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return value if index == len(raw) - 1 else None
    return None


def _reference(message_id: str) -> tuple[bytes, str]:
    """The packed reference for ``message_id`` and the prefix entry it needs."""
    producer, _, sequence = message_id.rpartition(":")
    packed_hash, entry = _producer_reference(producer)
    canonical = sequence.isdigit() and str(int(sequence)) == sequence
    body = bytes([_SEQ_VARINT]) + _varint(int(sequence)) if canonical else bytes([_SEQ_TEXT]) + sequence.encode()
    return packed_hash + body, entry


@functools.lru_cache(maxsize=4096)
def _producer_reference(producer: str) -> tuple[bytes, str]:
    """A producer's packed hash and its prefix entry: the same for each of its messages, so cached."""
    hashed = prefix_hash(producer)
    return base64.b32decode(hashed), f"{hashed}|{producer}"


@dataclass(frozen=True, slots=True)
class Encoded:
    """One element and the prefix entry its message-id reference needs (``None`` without one)."""

    ulid: bool
    element: bytes | str
    prefix_entry: str | None


def encode(key: str, consumed_at_ms: int, message_id: str | None) -> Encoded:
    """The element for ``key`` (already validated) consumed at ``consumed_at_ms``."""
    offset = consumed_at_ms - bucket_of(consumed_at_ms)
    if key_kind(key) == "message-id":
        prefix, tail = split_message_id(key)
        hashed = prefix_hash(prefix)
        return Encoded(False, f"{offset}|{hashed}{tail}", f"{hashed}|{prefix}")
    head = ulid_bytes(key) + _OFFSET.pack(offset)
    if message_id is None:
        return Encoded(True, head, None)
    reference, entry = _reference(message_id)
    return Encoded(True, head + reference, entry)


@dataclass(frozen=True, slots=True)
class Decoded:
    """One element read back. ``message_id`` is ``None`` when the element names none, or names it ambiguously."""

    key: str | None
    consumed_at_ms: int
    element: bytes | str
    message_id: str | None
    ambiguous: bool = False


class PrefixTable:
    """An item's prefix entries by hash, knowing which hashes name more than one prefix."""

    def __init__(self, entries: Iterable[str]) -> None:
        by_hash: dict[str, set[str]] = defaultdict(set)
        for entry in entries:
            hashed, _, prefix = entry.partition("|")
            by_hash[hashed].add(prefix)
        self._by_hash = by_hash

    def resolve(self, reference: str) -> tuple[str | None, bool]:
        """``(message id, ambiguous)`` for ``<hash><tail>``; ``(None, True)`` on a collision or an unknown hash."""
        prefix = self._prefix(reference[:PREFIX_HASH_CHARS])
        return (prefix + reference[PREFIX_HASH_CHARS:], False) if prefix is not None else (None, True)

    def resolve_packed(self, reference: bytes) -> tuple[str | None, bool]:
        """The same for a packed binary reference (see the module docstring)."""
        hashed = base64.b32encode(reference[:_HASH_BYTES]).decode()
        producer = self._prefix(hashed)
        kind, body = reference[_HASH_BYTES : _HASH_BYTES + 1], reference[_HASH_BYTES + 1 :]
        if producer is None or not body:
            return None, True
        if kind == bytes([_SEQ_VARINT]):
            sequence = _read_varint(body)
            return (f"{producer}:{sequence}", False) if sequence is not None else (None, True)
        if kind == bytes([_SEQ_TEXT]) and body.isascii():
            return f"{producer}:{body.decode()}", False
        return None, True

    def _prefix(self, hashed: str) -> str | None:
        prefixes = self._by_hash.get(hashed, set())
        return next(iter(prefixes)) if len(prefixes) == 1 else None


def decode_item(
    bucket_ms: int, ulids: Iterable[bytes], message_ids: Iterable[str], prefixes: Iterable[str]
) -> list[Decoded]:
    """Every element of a capture item, with its key, consume time and message id."""
    table = PrefixTable(prefixes)
    decoded: list[Decoded] = []
    for element in ulids:
        key = ulid_from_bytes(element[:_ULID_BYTES])
        at = bucket_ms + _OFFSET.unpack(element[_ULID_BYTES:ULID_ELEMENT_HEAD])[0]
        reference = element[ULID_ELEMENT_HEAD:]
        if not reference:
            decoded.append(Decoded(key, at, element, None))
            continue
        message_id, ambiguous = table.resolve_packed(reference)
        decoded.append(Decoded(key, at, element, message_id, ambiguous))
    for element in message_ids:
        offset, _, reference = element.partition("|")
        message_id, ambiguous = table.resolve(reference)
        decoded.append(Decoded(message_id, bucket_ms + int(offset), element, message_id, ambiguous))
    return decoded
