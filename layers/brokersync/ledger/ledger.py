"""The ledger logic, written once over :class:`TableBackend` (DynamoDB in AWS, memory locally).

Why the layout in :mod:`brokersync.ledger.backend`:
* cost: one relay batch of 500 keys touches about two 250 ms buckets per shard, so it
  becomes a handful of set ADDs of ~1-2 KB each plus one tiny pointer: about 25-35 write
  units per 1,000 ULID keys, well under the 50 the design allows;
* idempotence: set ADDs make every write a union, so replaying advisories after a relay
  crash changes nothing;
* partitions: ``C#<queue>#<shard>`` spreads one queue over ``shards`` partitions by key
  hash; at 5,000 msg/s with two shards each partition takes about 70 write units/s,
  far below DynamoDB's 1,000 per partition;
* time: a key's consume time is its bucket plus its offset, so time-range reads are exact;
  a ULID's own timestamp (its creation) bounds when it can have been consumed, which makes
  "was K consumed" a read of one shard's buckets from that time on.
"""

from __future__ import annotations

import base64
import hashlib
import struct
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from datetime import timedelta

from brokersync.keys import InvalidKeyError, key_kind, ulid_time_ms, validate_key
from brokersync.ledger.backend import BUCKET_MS, ItemRef, KeySets, Marks, Pointer, TableBackend, write_units
from brokersync.ledger.base import LedgerStore, PendingKey, WriteReport
from brokersync.ledger.codec import ulid_bytes, ulid_from_bytes
from brokersync.ledger.exceptions import LedgerError

DEFAULT_TTL = timedelta(days=7)
DEFAULT_SHARDS = 2
#: How long after its creation a ULID-keyed message is looked for by ``was_consumed``.
DEFAULT_CONSUME_LAG = timedelta(minutes=15)
_OFFSET = struct.Struct(">H")
#: Work pointers read per page, and pages read at most per ``pending`` call.
POINTER_PAGE = 100
MAX_POINTER_PAGES = 20
#: Sort keys are 13-digit millisecond strings; later bounds are clamped to the largest one.
_LAST_MS = 9_999_999_999_999


def _shard(key: str, shards: int) -> int:
    return int.from_bytes(hashlib.blake2b(key.encode(), digest_size=4).digest(), "big") % shards


def _bucket(ms: int) -> int:
    return ms - ms % BUCKET_MS


def _prefix_hash(prefix: str) -> str:
    return base64.b32encode(hashlib.blake2b(prefix.encode(), digest_size=5).digest()).decode()


def _split_message_id(key: str) -> tuple[str, str]:
    """``ID:host-port-start-n`` (shared by a producer's connection) and the ``:c:s:p:seq`` tail."""
    cut = key.index(":", 3)
    return key[:cut], key[cut:]


def _element(key: str, consumed_at_ms: int) -> tuple[str, bytes | str, str | None]:
    """The set element for a key consumed at a time, and (message ids) its prefix entry."""
    offset = consumed_at_ms - _bucket(consumed_at_ms)
    if key_kind(key) == "correlation-id":
        return "u", ulid_bytes(key) + _OFFSET.pack(offset), None
    prefix, tail = _split_message_id(key)
    hashed = _prefix_hash(prefix)
    return "m", f"{offset}|{hashed}{tail}", f"{hashed}|{prefix}"


def _decode(bucket_ms: int, keys: KeySets) -> list[tuple[str, int, bytes | str]]:
    """``(key, consumed_at_ms, element)`` for every element of a capture item."""
    decoded: list[tuple[str, int, bytes | str]] = []
    for element in keys.ulids:
        decoded.append((ulid_from_bytes(element[:16]), bucket_ms + _OFFSET.unpack(element[16:])[0], element))
    prefixes = dict(entry.split("|", 1) for entry in keys.prefixes)
    for element in keys.message_ids:
        offset, _, compact = element.partition("|")
        decoded.append((prefixes[compact[:8]] + compact[8:], bucket_ms + int(offset), element))
    return decoded


class Ledger(LedgerStore):
    """The ledger over any backend; ``clock`` returns epoch seconds (tests pass their own)."""

    def __init__(
        self,
        backend: TableBackend,
        *,
        shards: int = DEFAULT_SHARDS,
        ttl: timedelta = DEFAULT_TTL,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if not 1 <= shards <= 64:
            raise ValueError("shards must be between 1 and 64")
        self.backend = backend
        self.shards = shards
        self.ttl = ttl
        self.clock = clock

    def _expires_at(self) -> int:
        return int(self.clock() + self.ttl.total_seconds())

    # -- writes (primary region) --------------------------------------------------------------
    def record(self, queue: str, entries: Sequence[tuple[str, int]]) -> WriteReport:
        groups: dict[ItemRef, KeySets] = defaultdict(KeySets)
        for key, consumed_at_ms in entries:
            try:
                valid = validate_key(key, key_kind(key))
            except InvalidKeyError as e:
                raise LedgerError(f"refusing to record on {queue}: {e}") from e
            kind, element, prefix = _element(valid, consumed_at_ms)
            ref = ItemRef(_shard(valid, self.shards), _bucket(consumed_at_ms))
            if kind == "u":
                groups[ref].ulids.add(element)  # type: ignore[arg-type]
            else:
                groups[ref].message_ids.add(element)  # type: ignore[arg-type]
                groups[ref].prefixes.add(prefix)  # type: ignore[arg-type]
        if not groups:
            return WriteReport(items=0, write_units=0.0)
        expires_at = self._expires_at()
        units = 0
        for ref, keys in sorted(groups.items(), key=lambda item: (item[0].bucket_ms, item[0].shard)):
            units += write_units(self.backend.add_captured(queue, ref, keys, expires_at))
        refs = tuple(sorted(groups, key=lambda r: (r.bucket_ms, r.shard)))
        digest = hashlib.blake2b(repr(refs).encode(), digest_size=5).hexdigest()
        pointer = Pointer(sk=f"{int(self.clock() * 1000):013d}#{digest}", refs=refs)
        units += write_units(self.backend.put_pointer(queue, pointer, expires_at))
        return WriteReport(items=len(groups) + 1, write_units=float(units))

    # -- reads and marks (DR region) -----------------------------------------------------------
    def pending(self, queue: str, limit: int = 1000) -> list[PendingKey]:
        """Unresolved keys, oldest consume first, read from the oldest work pointers on.

        Pointers are read a page at a time until ``limit`` keys are found (or
        :data:`MAX_POINTER_PAGES` pages were read, bounding one call's cost); the keys found
        are sorted by consume time before the cut, so a batch written late with older keys
        still comes first. Pointers whose items are all resolved are deleted on the way.
        """
        found: dict[str, int] = {}
        places: dict[str, list[tuple[ItemRef, bytes | str]]] = defaultdict(list)
        after: str | None = None
        for _page in range(MAX_POINTER_PAGES):
            pointers = self.backend.pointers(queue, limit=POINTER_PAGE, after=after)
            for pointer in pointers:
                self._collect(queue, pointer, found, places)
            if not pointers or len(pointers) < POINTER_PAGE or len(found) >= limit:
                break
            after = pointers[-1].sk
        ordered = sorted(found.items(), key=lambda item: (item[1], item[0]))
        return [PendingKey(key, consumed_at, tuple(places[key])) for key, consumed_at in ordered[:limit]]

    def _collect(
        self,
        queue: str,
        pointer: Pointer,
        found: dict[str, int],
        places: dict[str, list[tuple[ItemRef, bytes | str]]],
    ) -> None:
        captured = self.backend.captured(queue, pointer.refs)
        marks = self.backend.marks(queue, pointer.refs)
        unresolved = 0
        for ref in pointer.refs:
            done = marks.get(ref, Marks())
            resolved = done.purged.ulids | done.missing.ulids | done.purged.message_ids | done.missing.message_ids
            for key, consumed_at, element in _decode(ref.bucket_ms, captured.get(ref, KeySets())):
                if element in resolved:
                    continue
                unresolved += 1
                found[key] = min(found.get(key, consumed_at), consumed_at)
                places[key].append((ref, element))
        if unresolved == 0:
            self.backend.delete_pointer(queue, pointer.sk)

    def mark_purged(self, queue: str, keys: Sequence[PendingKey]) -> WriteReport:
        return self._mark(queue, keys, missing=False)

    def mark_missing(self, queue: str, keys: Sequence[PendingKey]) -> WriteReport:
        return self._mark(queue, keys, missing=True)

    def _mark(self, queue: str, keys: Sequence[PendingKey], *, missing: bool) -> WriteReport:
        groups: dict[ItemRef, Marks] = defaultdict(Marks)
        for pending in keys:
            locations = pending.locations or (
                (
                    ItemRef(_shard(pending.key, self.shards), _bucket(pending.consumed_at_ms)),
                    _element(pending.key, pending.consumed_at_ms)[1],
                ),
            )
            for ref, element in locations:
                sets = groups[ref].missing if missing else groups[ref].purged
                if isinstance(element, bytes):
                    sets.ulids.add(element)
                else:
                    sets.message_ids.add(element)
        expires_at = self._expires_at()
        units = sum(write_units(self.backend.add_marks(queue, ref, marks, expires_at)) for ref, marks in groups.items())
        return WriteReport(items=len(groups), write_units=float(units))

    def consumed_between(self, queue: str, start_ms: int, end_ms: int) -> list[str]:
        hits: dict[str, int] = {}
        first, last = _bucket(max(0, start_ms)), _bucket(min(end_ms, _LAST_MS))
        for shard in range(self.shards):
            for bucket_ms, keys in self.backend.captured_range(queue, shard, first, last):
                for key, consumed_at, _ in _decode(bucket_ms, keys):
                    if start_ms <= consumed_at < end_ms:
                        hits[key] = min(hits.get(key, consumed_at), consumed_at)
        return [key for key, _ in sorted(hits.items(), key=lambda item: (item[1], item[0]))]

    def was_consumed(self, queue: str, key: str, window: timedelta = DEFAULT_CONSUME_LAG) -> bool:
        """ULID keys: consumed within ``window`` after their creation. Message ids: within ``window`` of now.

        A key consumed later than that answers False: the caller then processes a message
        that may be a duplicate, which is the safe way to be wrong.
        """
        kind = key_kind(key)
        key = validate_key(key, kind)
        start = (
            ulid_time_ms(key) if kind == "correlation-id" else int(self.clock() * 1000 - window.total_seconds() * 1000)
        )
        end = start + int(window.total_seconds() * 1000)
        shard = _shard(key, self.shards)
        for bucket_ms, keys in self.backend.captured_range(queue, shard, _bucket(start), _bucket(end)):
            if any(found == key for found, _t, _e in _decode(bucket_ms, keys)):
                return True
        return False

    def add_pending(self, queue: str, entries: Sequence[tuple[str, int]]) -> WriteReport:
        """Repair: record keys as consumed now, so they are new work for the purge whatever their age."""
        now_ms = int(self.clock() * 1000)
        return self.record(queue, [(key, now_ms) for key, _ in entries])
