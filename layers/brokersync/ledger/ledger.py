"""The ledger logic, written once over :class:`TableBackend` (DynamoDB in AWS, memory locally).

Why the layout in :mod:`brokersync.ledger.backend`:
* cost: one relay batch of 500 keys touches about two 250 ms buckets per shard, so it
  becomes a handful of set ADDs of ~1-2 KB each plus one tiny pointer: about 25-35 write
  units per 1,000 ULID keys, well under the 50 the design allows;
* idempotence: set ADDs make every write a union, so replaying advisories after a relay
  crash changes nothing;
* partitions and calls: ``C#<queue>#<shard>`` can spread one queue over ``shards``
  partitions by key hash, but every shard multiplies the items a relay batch writes and a
  purge round reads and marks, and each is a request (about 2.5 ms of a small machine's CPU
  in botocore). One shard takes about 140 write units/s at 5,000 msg/s, far below
  DynamoDB's 1,000 per partition, and its 250 ms item stays under 400 KB to some 60,000
  msg/s, so one is the default; the sync bench measured two against one (decision 0018).
  Items written by releases that used two (``LEGACY_SHARDS``) are still read;
* time: a key's consume time is its bucket plus its offset, so time-range reads are exact;
  a ULID's own timestamp (its creation) bounds when it can have been consumed, which makes
  "was K consumed" a read of its shard's buckets from that time on.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from datetime import timedelta

from brokersync.keys import InvalidKeyError, key_identity, key_kind, ulid_time_ms, validate_key
from brokersync.ledger.backend import ItemRef, KeySets, Marks, Pointer, TableBackend, element_count, write_units
from brokersync.ledger.base import LedgerEntry, LedgerStore, PendingKey, WriteReport
from brokersync.ledger.codec import Decoded, bucket_of, decode_item, encode, plausible_consumed_at_ms
from brokersync.ledger.exceptions import LedgerRecordRefusedError

logger = logging.getLogger(__name__)

DEFAULT_TTL = timedelta(days=7)
DEFAULT_SHARDS = 1
#: Shard counts earlier releases wrote with. Reads by key or time range also look where they
#: put a key, so an upgrade loses no answer while their items live (``DEFAULT_TTL``).
LEGACY_SHARDS = (2,)
#: How long after its creation a ULID-keyed message is looked for by ``was_consumed``.
DEFAULT_CONSUME_LAG = timedelta(minutes=15)
#: Work pointers read per page, and pages read at most per ``pending`` call.
POINTER_PAGE = 100
MAX_POINTER_PAGES = 20
#: How long a marks item this ledger wrote is trusted as held before it is read again (seconds):
#: how late the purge sees marks another process added (:class:`HeldMarks`).
MARKS_REREAD_S = 5.0
#: Sort keys are 13-digit millisecond strings; later bounds are clamped to the largest one.
_LAST_MS = 9_999_999_999_999


def _shard(key: str, shards: int) -> int:
    return int.from_bytes(hashlib.blake2b(key.encode(), digest_size=4).digest(), "big") % shards


def _decode(bucket_ms: int, keys: KeySets) -> list[Decoded]:
    return decode_item(bucket_ms, keys.ulids, keys.message_ids, keys.prefixes)


#: An item's prefix entries as decoded with, and its elements decoded so far.
_DecodedItem = tuple[frozenset[str], dict[bytes | str, Decoded]]


class DecodedElements:
    """Elements of capture items decoded by earlier :meth:`Ledger.pending` calls, to decode each once.

    Why: the purge reads the same recent items round after round, and an element stays
    unresolved for several rounds (its copy still on the way, or held for a fuller selector),
    so it was decoded in each of them: decoding was 17 % of the purge's py-spy samples at
    1,000 msg/s (decision 0031). An element is bytes or text that never changes, and what it decodes to
    depends only on its bucket and its item's prefix entries, so a decoded element is
    reused while the item's prefix entries are the ones it was decoded with. Only the items
    the last call for each queue read are kept, which bounds the memory by what one call
    per queue reads.
    """

    def __init__(self) -> None:
        #: Per queue, what the last ``pending`` call read, and what the call in progress has read.
        self._kept: dict[str, dict[ItemRef, _DecodedItem]] = {}
        self._reading: dict[str, dict[ItemRef, _DecodedItem]] = defaultdict(dict)

    def decode(self, queue: str, ref: ItemRef, keys: KeySets) -> list[Decoded]:
        """What :func:`decode_item` gives for ``keys``, in its order, decoding only elements not seen before."""
        reading = self._reading[queue]
        prefixes = frozenset(keys.prefixes)
        cached = reading.get(ref) or self._kept.get(queue, {}).get(ref)
        if cached is None or cached[0] != prefixes:
            cached = (prefixes, {})
        reading[ref] = cached
        known = cached[1]
        fresh = KeySets(
            ulids={e for e in keys.ulids if e not in known},
            message_ids={e for e in keys.message_ids if e not in known},
            prefixes=keys.prefixes,
        )
        if fresh:
            known.update((item.element, item) for item in _decode(ref.bucket_ms, fresh))
        return [known[e] for e in keys.ulids] + [known[e] for e in keys.message_ids]

    def __len__(self) -> int:
        """How many items are kept from the last call for each queue."""
        return sum(len(items) for items in self._kept.values())

    def keep_only_read(self, queue: str) -> None:
        """Keep, of ``queue``'s items, only those read since the last call of this.

        Per queue: a purge round reads each queue in turn, and one queue's read must not
        forget what another queue's next round will read again.
        """
        self._kept[queue] = self._reading.pop(queue, {})


class HeldCaptures:
    """Capture items read by earlier :meth:`Ledger.pending` calls, read again only when a work
    pointer names a write they may not hold.

    Why: the purge reads the items of every live pointer each round, and a pointer lives until
    every element of its items is resolved, so at 1,000 msg/s a round read about four times the
    elements that were new since the last one; botocore decodes every element of every item it
    reads (decision 0034). A capture item's sets only grow, and a pointer counts the elements
    its write left (decision 0021). An item read with at least that many elements was read
    after that write, because a write that added anything left more elements than were there
    before it; so it holds the write. Marks items are held apart, by :class:`HeldMarks`. Like
    :class:`DecodedElements`, only the items the last call for each queue named are kept.
    """

    def __init__(self) -> None:
        self._kept: dict[str, dict[ItemRef, KeySets]] = {}
        self._reading: dict[str, dict[ItemRef, KeySets]] = defaultdict(dict)

    def split(self, queue: str, pointers: Sequence[Pointer]) -> tuple[list[ItemRef], dict[ItemRef, KeySets]]:
        """The refs ``pointers`` name whose capture item must be read, in order, and those held."""
        kept = self._kept.get(queue, {})
        reading = self._reading[queue]
        stale: dict[ItemRef, None] = {}
        held: dict[ItemRef, KeySets] = {}
        for pointer in pointers:
            for index, ref in enumerate(pointer.refs):
                keys = reading.get(ref) or kept.get(ref)
                if keys is None or not pointer.counts or element_count(keys) < pointer.counts[index]:
                    stale[ref] = None
                else:
                    held[ref] = keys
        for ref in stale:
            held.pop(ref, None)
        reading.update(held)
        return list(stale), held

    def hold(self, queue: str, captured: Mapping[ItemRef, KeySets]) -> None:
        """Keep capture items just read (an item read with fewer elements than held is not kept)."""
        reading = self._reading[queue]
        kept = self._kept.get(queue, {})
        for ref, keys in captured.items():
            before = reading.get(ref) or kept.get(ref)
            if before is None or element_count(keys) >= element_count(before):
                reading[ref] = keys
            else:
                reading[ref] = before

    def keep_only_read(self, queue: str) -> None:
        """Keep, of ``queue``'s items, only those named since the last call of this."""
        self._kept[queue] = self._reading.pop(queue, {})


class HeldMarks:
    """Marks items this ledger writes, read again only every :data:`MARKS_REREAD_S`.

    Why: the purge read the marks item of every live pointer's items each round, about three
    marks elements per key it removed, and botocore decodes every one (decision 0036). The
    purge writes those items itself, so what it holds of one is what it last read there plus
    what it wrote since. Sets only grow, so that is never more than the item holds: an element
    another process marked meanwhile can only look unresolved here until the next read, which
    costs a removal that finds nothing, never a message left on DR or one removed unconsumed.

    Only items this ledger wrote are held. A reader that writes no marks (a switchover's drain
    waiting for the purge's marks) reads them every time, as before. A read that comes back
    without a mark held here (``BatchGetItem`` is eventually consistent) does not drop it. Only
    the items the last :meth:`Ledger.pending` call for a queue named are kept.
    """

    def __init__(self, clock: Callable[[], float]) -> None:
        self.clock = clock
        #: Per queue and item: the marks known here, when the item was last read (None: never),
        #: and whether this ledger wrote to it.
        self._items: dict[str, dict[ItemRef, tuple[Marks, float | None, bool]]] = {}
        self._named: dict[str, set[ItemRef]] = defaultdict(set)

    def split(self, queue: str, refs: Sequence[ItemRef]) -> tuple[list[ItemRef], dict[ItemRef, Marks]]:
        """The refs whose marks item must be read, in order, and the marks held for the others."""
        self._named[queue].update(refs)
        items = self._items.get(queue, {})
        now = self.clock()
        stale: list[ItemRef] = []
        held: dict[ItemRef, Marks] = {}
        for ref in refs:
            marks, read_at, written = items.get(ref, (None, None, False))
            if marks is not None and written and read_at is not None and 0 <= now - read_at < MARKS_REREAD_S:
                held[ref] = marks
            else:
                stale.append(ref)
        return stale, held

    def read(self, queue: str, refs: Sequence[ItemRef], marks: Mapping[ItemRef, Marks]) -> dict[ItemRef, Marks]:
        """``marks`` just read for ``refs``, each with what is known here of it added."""
        items = self._items.setdefault(queue, {})
        now = self.clock()
        merged: dict[ItemRef, Marks] = {}
        for ref in refs:
            read = marks.get(ref, Marks())
            known, _, written = items.get(ref, (None, None, False))
            both = read if known is None else known.union(read)
            items[ref] = (both, now, written)
            merged[ref] = both
        return merged

    def wrote(self, queue: str, ref: ItemRef, marks: Marks) -> None:
        """Hold what a write added to ``ref``'s marks item, on top of what its last read here found."""
        items = self._items.setdefault(queue, {})
        known, read_at, _ = items.get(ref, (None, None, False))
        items[ref] = (marks.union(Marks()) if known is None else known.union(marks), read_at, True)

    def __len__(self) -> int:
        return sum(len(items) for items in self._items.values())

    def keep_only_named(self, queue: str) -> None:
        """Keep, of ``queue``'s items, only those named since the last call of this."""
        named = self._named.pop(queue, set())
        items = self._items.get(queue)
        if items is not None:
            self._items[queue] = {ref: entry for ref, entry in items.items() if ref in named}


def _merged(spans: Iterator[tuple[int, int]] | Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    """Inclusive bucket ranges merged where they overlap: each bucket of their union in exactly one."""
    merged: list[tuple[int, int]] = []
    for first, last in sorted(spans):
        if merged and first <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], last))
        else:
            merged.append((first, last))
    return merged


def _entries(items: Iterable[Decoded], key: str) -> list[LedgerEntry]:
    """The consumed messages ``items`` name under ``key``: each message id once, as first read, none ambiguous."""
    found: dict[str, LedgerEntry] = {}
    for item in items:
        if item.message_id is not None and not item.ambiguous:
            found.setdefault(item.message_id, LedgerEntry(item.key or key, item.consumed_at_ms, item.message_id))
    return list(found.values())


def _unresolved(captured: KeySets, done: Marks) -> KeySets:
    """The elements of a capture item that its marks item does not mark purged or missing."""
    return KeySets(
        ulids=captured.ulids - done.purged.ulids - done.missing.ulids,
        message_ids=captured.message_ids - done.purged.message_ids - done.missing.message_ids,
        prefixes=captured.prefixes,
    )


def _valid_entry(entry: LedgerEntry | tuple[str, int]) -> LedgerEntry:
    """The entry with its key and message id validated (and a ULID upper-cased); raises InvalidKeyError."""
    key, consumed_at_ms, *rest = entry
    key, message_id = key_identity(key, key_kind(key), rest[0] if rest else None)
    at = plausible_consumed_at_ms(consumed_at_ms)
    if at is None:
        raise ValueError(f"consumed at {consumed_at_ms!r}: not epoch milliseconds from 2000 to 2100")
    return LedgerEntry(key, at, message_id)


class Ledger(LedgerStore):
    """The ledger over any backend; ``clock`` returns epoch seconds (tests pass their own).

    What it holds between calls (decoded elements, capture and marks items) is kept per queue,
    and a queue's calls come from one thread at a time: the purge and the relay work on
    different queues side by side (:mod:`brokersync.side_by_side`), never on one queue at once.
    """

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
        self._decoded = DecodedElements()
        self._held = HeldCaptures()
        self._held_marks = HeldMarks(clock)

    def _expires_at(self) -> int:
        return int(self.clock() + self.ttl.total_seconds())

    # -- writes (primary region) --------------------------------------------------------------
    def record(self, queue: str, entries: Sequence[LedgerEntry | tuple[str, int]]) -> WriteReport:
        """Record a batch; a malformed key refuses the whole call (capture paths validate before this)."""
        groups: dict[ItemRef, KeySets] = defaultdict(KeySets)
        for entry in entries:
            try:
                valid = _valid_entry(entry)
            except (InvalidKeyError, TypeError, ValueError) as e:
                raise LedgerRecordRefusedError(
                    entry[0] if entry else None, f"refusing to record on {queue}: {e}"
                ) from e
            encoded = encode(valid.key, valid.consumed_at_ms, valid.message_id)
            ref = ItemRef(_shard(valid.key, self.shards), bucket_of(valid.consumed_at_ms))
            if encoded.ulid:
                groups[ref].ulids.add(encoded.element)  # type: ignore[arg-type]
            else:
                groups[ref].message_ids.add(encoded.element)  # type: ignore[arg-type]
            if encoded.prefix_entry is not None:
                groups[ref].prefixes.add(encoded.prefix_entry)
        if not groups:
            return WriteReport(items=0, write_units=0.0)
        expires_at = self._expires_at()
        units = 0
        refs = tuple(sorted(groups, key=lambda r: (r.bucket_ms, r.shard)))
        counts = []
        for ref in refs:
            written = self.backend.add_captured(queue, ref, groups[ref], expires_at)
            units += write_units(written.size_bytes)
            counts.append(written.elements)
        digest = hashlib.blake2b(repr(refs).encode(), digest_size=5).hexdigest()
        pointer = Pointer(sk=f"{int(self.clock() * 1000):013d}#{digest}", refs=refs, counts=tuple(counts))
        units += write_units(self.backend.put_pointer(queue, pointer, expires_at))
        return WriteReport(items=len(groups) + 1, write_units=float(units))

    # -- reads and marks (DR region) -----------------------------------------------------------
    def pending(self, queue: str, limit: int = 1000, *, read_only: bool = False) -> list[PendingKey]:
        """Unresolved consumed messages, oldest consume first, read from the oldest work pointers on.

        One entry per consumed message: a key consumed twice (two messages sharing a
        correlation id) is two entries with two message ids. Pointers are read a page at a
        time until ``limit`` entries are found (or :data:`MAX_POINTER_PAGES` pages were read,
        bounding one call's cost); what was found is sorted by consume time before the cut,
        so a batch written late with older keys still comes first. Pointers whose items are
        all resolved are deleted on the way. An element whose message id cannot be named
        exactly (a prefix-hash collision) is marked missing at once and logged: the purge
        never removes what it cannot name.

        ``read_only`` does neither (no pointer deleted, nothing marked): for readers outside
        the DR region, where a write to a marks item would race the purge's across regions.
        """
        found: dict[tuple[str, str | None], int] = {}
        places: dict[tuple[str, str | None], list[tuple[ItemRef, bytes | str]]] = defaultdict(list)
        after: str | None = None
        for _page in range(MAX_POINTER_PAGES):
            pointers = self.backend.pointers(queue, limit=POINTER_PAGE, after=after)
            refs = list(dict.fromkeys(ref for pointer in pointers for ref in pointer.refs))
            items = self._read_page(queue, pointers, refs)
            for pointer in pointers:
                self._collect(queue, pointer, items, found, places, read_only=read_only)
            if not pointers or len(pointers) < POINTER_PAGE or len(found) >= limit:
                break
            after = pointers[-1].sk
        self._decoded.keep_only_read(queue)
        self._held.keep_only_read(queue)
        self._held_marks.keep_only_named(queue)
        ordered = sorted(found.items(), key=lambda item: (item[1], item[0][0], item[0][1] or ""))
        return [
            PendingKey(key, consumed_at, message_id, tuple(places[(key, message_id)]))
            for (key, message_id), consumed_at in ordered[:limit]
        ]

    def _read_page(
        self, queue: str, pointers: Sequence[Pointer], refs: Sequence[ItemRef]
    ) -> tuple[dict[ItemRef, KeySets], dict[ItemRef, Marks]]:
        """Every ref's marks, and the capture items of a page of pointers, held ones not read again."""
        if not refs:
            return {}, {}
        stale, held = self._held.split(queue, pointers)
        stale_marks, held_marks = self._held_marks.split(queue, refs)
        if not stale and not stale_marks:
            return held, held_marks
        captured, marks = self.backend.captured_and_marks(queue, refs, captured_refs=stale, marks_refs=stale_marks)
        self._held.hold(queue, captured)
        return {**held, **captured}, {**held_marks, **self._held_marks.read(queue, stale_marks, marks)}

    def _collect(
        self,
        queue: str,
        pointer: Pointer,
        items: tuple[dict[ItemRef, KeySets], dict[ItemRef, Marks]],
        found: dict[tuple[str, str | None], int],
        places: dict[tuple[str, str | None], list[tuple[ItemRef, bytes | str]]],
        *,
        read_only: bool = False,
    ) -> None:
        """Add ``pointer``'s unresolved elements to ``found``; ``items`` were read for its whole page."""
        captured, marks = items
        unresolved = 0
        unnameable: dict[ItemRef, Marks] = defaultdict(Marks)
        for index, ref in enumerate(pointer.refs):
            if not pointer.complete(index, captured.get(ref)):
                # The pointer reached this region before the write it names (global tables
                # replicate items in no order): what is here is work, but the pointer stays.
                unresolved += 1
            # Resolved elements are set aside before decoding, not after: the purge reads the
            # same recent items round after round, and most of their elements are already
            # marked, so decoding them all made each round cost what the window holds rather
            # than what is still pending.
            unresolved_keys = _unresolved(captured.get(ref, KeySets()), marks.get(ref, Marks()))
            for item in self._decoded.decode(queue, ref, unresolved_keys):
                if item.ambiguous or item.key is None:
                    sets = unnameable[ref].missing
                    (sets.ulids if isinstance(item.element, bytes) else sets.message_ids).add(item.element)  # type: ignore[arg-type]
                    continue
                unresolved += 1
                place = (item.key, item.message_id)
                found[place] = min(found.get(place, item.consumed_at_ms), item.consumed_at_ms)
                places[place].append((ref, item.element))
        if read_only:
            return
        if unnameable:
            expires_at = self._expires_at()
            for ref, refused in unnameable.items():
                self.backend.add_marks(queue, ref, refused, expires_at)
                self._held_marks.wrote(queue, ref, refused)
            logger.error(
                "%d ledger elements of %s name their message id ambiguously (prefix hash collision): "
                "marked missing, never removed; the reconciliation reports them",
                sum(len(m.missing.ulids) + len(m.missing.message_ids) for m in unnameable.values()),
                queue,
            )
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
                    ItemRef(_shard(pending.key, self.shards), bucket_of(pending.consumed_at_ms)),
                    encode(pending.key, pending.consumed_at_ms, pending.message_id).element,
                ),
            )
            for ref, element in locations:
                sets = groups[ref].missing if missing else groups[ref].purged
                if isinstance(element, bytes):
                    sets.ulids.add(element)
                else:
                    sets.message_ids.add(element)
        expires_at = self._expires_at()
        units = 0
        for ref, marks in groups.items():
            units += write_units(self.backend.add_marks(queue, ref, marks, expires_at))
            self._held_marks.wrote(queue, ref, marks)
        return WriteReport(items=len(groups), write_units=float(units))

    def consumed_between(self, queue: str, start_ms: int, end_ms: int) -> list[str]:
        hits: dict[str, int] = {}
        first, last = bucket_of(max(0, start_ms)), bucket_of(min(end_ms, _LAST_MS))
        for shard in range(max((self.shards, *LEGACY_SHARDS))):  # a tuple: LEGACY_SHARDS may be empty
            for bucket_ms, keys in self.backend.captured_range(queue, shard, first, last):
                for item in _decode(bucket_ms, keys):
                    if item.key is not None and start_ms <= item.consumed_at_ms < end_ms:
                        hits[item.key] = min(hits.get(item.key, item.consumed_at_ms), item.consumed_at_ms)
        return [key for key, _ in sorted(hits.items(), key=lambda item: (item[1], item[0]))]

    def consumed_entries(self, queue: str, key: str, window: timedelta = DEFAULT_CONSUME_LAG) -> list[LedgerEntry]:
        """Every consumed message recorded under ``key``, read as :meth:`was_consumed` reads (same window)."""
        return _entries(self._recorded_under(queue, key, window), key)

    def consumed_entries_of(
        self,
        queue: str,
        keys: Sequence[str],
        window: timedelta = DEFAULT_CONSUME_LAG,
        *,
        from_ms: Mapping[str, int] | None = None,
    ) -> dict[str, list[LedgerEntry]]:
        """:meth:`consumed_entries` of many keys, each bucket read once however many keys' windows hold it.

        Every message-id key's window is the same stretch back from now, so asking for 500 of
        them one by one read the same 15 minutes of a queue's ledger 500 times (the late-copy
        sweep did, decision 0030). Here overlapping windows are merged per shard and each
        merged range is read once; each key still sees only the elements of its own window,
        in the order :meth:`consumed_entries` sees them, so the answers are the same. A key
        the ledger cannot hold (it was never recorded) is left out of the answer.

        ``from_ms`` (key as given -> a time) looks a message-id key up over ``window`` from
        that time instead of back from now: for a message consumed long before the lookup (a
        failback's heads), as a ULID key is looked up from its creation.
        """
        from_ms = from_ms or {}
        wanted: dict[str, tuple[str, int, int]] = {}  # key as given -> (key as stored, first and last bucket)
        for given in dict.fromkeys(keys):
            try:
                wanted[given] = self._key_window(given, window, from_ms.get(given))
            except (InvalidKeyError, ValueError):
                continue
        # shard -> stored key -> [(its rank among the key's shards, first bucket, last bucket)]
        by_shard: dict[int, dict[str, list[tuple[int, int, int]]]] = defaultdict(lambda: defaultdict(list))
        for key, first, last in wanted.values():
            for rank, shard in enumerate(self._shards_of(key)):
                by_shard[shard][key].append((rank, first, last))
        seen: dict[str, list[tuple[int, int, Decoded]]] = defaultdict(list)
        for shard, windows in by_shard.items():
            for first, last in _merged((w[1], w[2]) for spans in windows.values() for w in spans):
                for bucket_ms, item_keys in self.backend.captured_range(queue, shard, first, last):
                    for item in _decode(bucket_ms, item_keys):
                        for rank, lo, hi in windows.get(item.key, ()) if item.key is not None else ():
                            if lo <= bucket_ms <= hi:
                                seen[item.key].append((rank, bucket_ms, item))
        # A key's shards in its own order, then its buckets; the sort is stable, so within a bucket as decoded.
        in_order = {key: [hit[2] for hit in sorted(hits, key=lambda hit: hit[:2])] for key, hits in seen.items()}
        return {given: _entries(in_order.get(key, []), key) for given, (key, _first, _last) in wanted.items()}

    def was_consumed(self, queue: str, key: str, window: timedelta = DEFAULT_CONSUME_LAG) -> bool:
        """ULID keys: consumed within ``window`` after their creation. Message ids: within ``window`` of now.

        A key consumed later than that answers False: the caller then processes a message
        that may be a duplicate, which is the safe way to be wrong.
        """
        return next(self._recorded_under(queue, key, window), None) is not None

    def _recorded_under(self, queue: str, key: str, window: timedelta) -> Iterator[Decoded]:
        """The elements recorded under ``key``: a ULID's from its creation on, a message id's back from now."""
        key, first, last = self._key_window(key, window)
        for shard in self._shards_of(key):
            for bucket_ms, keys in self.backend.captured_range(queue, shard, first, last):
                yield from (item for item in _decode(bucket_ms, keys) if item.key == key)

    def _key_window(self, key: str, window: timedelta, from_ms: int | None = None) -> tuple[str, int, int]:
        """``key`` as stored, and the first and last bucket it is looked for in (raises InvalidKeyError).

        A ULID key from its creation; a message id from ``from_ms`` when given (a time this
        ledger can hold), else back from now.
        """
        kind = key_kind(key)
        key = validate_key(key, kind)
        seconds = window.total_seconds()
        if kind == "correlation-id":
            start = ulid_time_ms(key)
        elif from_ms is not None and 0 < from_ms <= _LAST_MS - seconds * 1000:
            start = from_ms
        else:
            start = int(self.clock() * 1000 - seconds * 1000)
        return key, bucket_of(start), bucket_of(start + int(seconds * 1000))

    def _shards_of(self, key: str) -> list[int]:
        """Where ``key`` is written now, then where earlier layouts wrote it (each once)."""
        return list(dict.fromkeys(_shard(key, count) for count in (self.shards, *LEGACY_SHARDS)))

    def add_pending(self, queue: str, entries: Sequence[LedgerEntry | tuple[str, int]]) -> WriteReport:
        """Repair: record entries as consumed now, so they are new work for the purge whatever their age."""
        now_ms = int(self.clock() * 1000)
        repaired = [LedgerEntry(*entry) for entry in entries]
        return self.record(queue, [LedgerEntry(e.key, now_ms, e.message_id) for e in repaired])
