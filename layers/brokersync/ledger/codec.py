"""How one consumed message is written inside a ledger capture item, and read back.

Cost is item size (1 write unit per KB), so elements are compact:

* a ULID key is a binary element: the 16 ULID bytes, a 2-byte millisecond offset in the
  item's 250 ms bucket, then (when the consumed message's id is known) that id as a
  *reference*: ``<prefix hash><tail>`` in ASCII. The first 18 bytes keep their meaning
  whether or not a reference follows, so readers that only want key and time (the
  reconciliation job) read them by position.
* a message-id key is a string element ``"<offset>|<prefix hash><tail>"``.

A message id ``ID:host-port-start-n:c:s:p:seq`` is split into the connection prefix every
id of one producer connection shares (``ID:host-port-start-n``) and its tail; the prefix is
stored once per item in a third set as ``"<hash>|<prefix>"`` and elements name it by an
8-character base32 hash (40 bits).

A hash can collide. Two different prefixes with one hash in the same item would decode an
element to either id, and selecting the wrong one removes a message that was not consumed,
so :func:`decode_item` reports such an element as *ambiguous* (no message id) instead of
picking one; the purge never removes what it cannot name exactly.
"""

from __future__ import annotations

import base64
import hashlib
import struct
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

from ulid import ULID

from brokersync.keys import key_kind

BUCKET_MS = 250
_OFFSET = struct.Struct(">H")
_ULID_BYTES = 16
#: ULID element bytes before the optional message-id reference.
ULID_ELEMENT_HEAD = _ULID_BYTES + _OFFSET.size
PREFIX_HASH_CHARS = 8


def ulid_bytes(key: str) -> bytes:
    return ULID.from_str(key).bytes


def ulid_from_bytes(raw: bytes) -> str:
    return str(ULID.from_bytes(raw))


def bucket_of(ms: int) -> int:
    return ms - ms % BUCKET_MS


def prefix_hash(prefix: str) -> str:
    return base64.b32encode(hashlib.blake2b(prefix.encode(), digest_size=5).digest()).decode()


def split_message_id(message_id: str) -> tuple[str, str]:
    """``ID:host-port-start-n`` (shared by a producer's connection) and the ``:c:s:p:seq`` tail."""
    cut = message_id.index(":", 3)
    return message_id[:cut], message_id[cut:]


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
    prefix, tail = split_message_id(message_id)
    hashed = prefix_hash(prefix)
    return Encoded(True, head + f"{hashed}{tail}".encode("ascii"), f"{hashed}|{prefix}")


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
        prefixes = self._by_hash.get(reference[:PREFIX_HASH_CHARS], set())
        if len(prefixes) != 1:
            return None, True
        (prefix,) = prefixes
        return prefix + reference[PREFIX_HASH_CHARS:], False


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
        message_id, ambiguous = table.resolve(reference.decode("ascii"))
        decoded.append(Decoded(key, at, element, message_id, ambiguous))
    for element in message_ids:
        offset, _, reference = element.partition("|")
        message_id, ambiguous = table.resolve(reference)
        decoded.append(Decoded(message_id, bucket_ms + int(offset), element, message_id, ambiguous))
    return decoded
