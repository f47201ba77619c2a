"""The storage contract the ledger logic runs on, and the item layout it implies.

Three kinds of item live in one table (keys ``pk``/``sk``, TTL attribute ``expires_at``):

* capture ``C#<queue>#<shard>`` / ``<bucket ms>``: the keys consumed from a queue in one
  250 ms bucket of consume time, as sets. Elements are encoded by :mod:`brokersync.ledger.codec`
  (ULID keys: 16-byte ULID + 2-byte ms offset + the consumed message's id as a reference;
  message-id keys: ``"<offset>|<hash><tail>"`` strings), where the long connection prefix every
  id of one producer shares (``ID:host-port-start-n``) is stored once per item as
  ``"<hash>|<prefix>"`` in a third set. Writes
  ADD to the sets, so recording a key twice is a no-op: replays cannot duplicate anything.
  Written in the primary region only.
* work pointer ``Q#<queue>`` / ``<write ms>#<digest>``: one per write, naming the capture
  items it touched and how many elements each held right after the write. The DR purge loop
  reads pointers oldest first and deletes one when all its items are resolved; a new write
  always makes a new pointer, so a delete in one region can never hide keys added in the
  other (global tables resolve per item, last writer wins). Global tables replicate each item
  on its own, in no order across items, so a pointer can reach DR before the write it names:
  an item read there with fewer elements than the pointer counted is not complete yet, and
  the pointer stays.
* marks ``P#<queue>#<shard>`` / ``<bucket ms>``: the elements of the matching capture item
  the purge removed (``purged``) or gave up on (``missing``). Written in the DR region only.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from brokersync.ledger.codec import BUCKET_MS

__all__ = ["BUCKET_MS"]


@dataclass(frozen=True, slots=True)
class ItemRef:
    shard: int
    bucket_ms: int


@dataclass
class KeySets:
    """The set attributes of a capture or marks item."""

    ulids: set[bytes] = field(default_factory=set)
    message_ids: set[str] = field(default_factory=set)
    #: ``"<hash>|<connection prefix>"`` entries that message-id elements refer to by hash.
    prefixes: set[str] = field(default_factory=set)

    def __bool__(self) -> bool:
        return bool(self.ulids or self.message_ids)


@dataclass
class Marks:
    purged: KeySets = field(default_factory=KeySets)
    missing: KeySets = field(default_factory=KeySets)

    def elements(self) -> KeySets:
        """Every element marked, purged or missing alike: what the marks item's size counts."""
        return KeySets(self.purged.ulids | self.missing.ulids, self.purged.message_ids | self.missing.message_ids)

    def union(self, other: Marks) -> Marks:
        """A new marks value holding both: what an item holds after both were ADDed (sets only grow)."""
        return Marks(
            purged=KeySets(self.purged.ulids | other.purged.ulids, self.purged.message_ids | other.purged.message_ids),
            missing=KeySets(
                self.missing.ulids | other.missing.ulids, self.missing.message_ids | other.missing.message_ids
            ),
        )


@dataclass
class AuditRecord:
    """Capture bookkeeping for one queue on one incarnation of the primary broker.

    ``captured`` is what the relay wrote for advisories from that incarnation; ``dequeued``
    and ``expired`` the broker's own counters when last observed; ``reported_lost`` what was
    already published as lost, so a loss is reported once.
    """

    captured: int = 0
    dequeued: int = 0
    expired: int = 0
    observed_at_ms: int = 0
    reported_lost: int = 0


@dataclass(frozen=True, slots=True)
class Pointer:
    sk: str
    refs: tuple[ItemRef, ...]
    #: Elements each ref's capture item held right after the write, aligned with ``refs``;
    #: empty for pointers written before pointers counted them.
    counts: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        if self.counts and len(self.counts) != len(self.refs):
            raise ValueError(f"pointer {self.sk}: {len(self.counts)} counts for {len(self.refs)} refs")

    def complete(self, ref_index: int, held: KeySets | None) -> bool:
        """Whether ``held`` (the ref's capture item as read here) includes this pointer's write.

        Sets only grow (``ADD`` in the primary region, TTL removes whole items), so a replica
        holding fewer elements than the write left has not received it yet.
        """
        if not self.counts:
            return True
        return held is not None and element_count(held) >= self.counts[ref_index]


@dataclass(frozen=True, slots=True)
class CapturedWrite:
    """What one ``ADD`` to a capture item left: its size (for the bill) and its element count."""

    size_bytes: int
    elements: int


def element_count(keys: KeySets) -> int:
    """Elements of a capture item (the prefixes set only helps decode them)."""
    return len(keys.ulids) + len(keys.message_ids)


class TableBackend(ABC):
    """Item operations on the ledger table; the DynamoDB adapter and the in-memory one implement them."""

    @abstractmethod
    def add_captured(self, queue: str, ref: ItemRef, keys: KeySets, expires_at: int) -> CapturedWrite:
        """ADD ``keys`` to the capture item; return its size and element count afterwards."""

    @abstractmethod
    def put_pointer(self, queue: str, pointer: Pointer, expires_at: int) -> int:
        """Write a work pointer; return its size in bytes."""

    @abstractmethod
    def pointers(self, queue: str, limit: int, after: str | None = None) -> list[Pointer]:
        """The oldest ``limit`` work pointers of ``queue`` (those sorting after ``after``, when given)."""

    @abstractmethod
    def delete_pointer(self, queue: str, sk: str) -> None: ...

    @abstractmethod
    def captured(self, queue: str, refs: Sequence[ItemRef]) -> dict[ItemRef, KeySets]:
        """Capture items by reference (absent ones are left out)."""

    @abstractmethod
    def captured_range(
        self, queue: str, shard: int, first_bucket_ms: int, last_bucket_ms: int
    ) -> Iterator[tuple[int, KeySets]]:
        """Capture items of one shard whose bucket lies in ``[first, last]``, ascending."""

    @abstractmethod
    def marks(self, queue: str, refs: Sequence[ItemRef]) -> dict[ItemRef, Marks]: ...

    def captured_and_marks(
        self,
        queue: str,
        refs: Sequence[ItemRef],
        *,
        captured_refs: Sequence[ItemRef] | None = None,
        marks_refs: Sequence[ItemRef] | None = None,
    ) -> tuple[dict[ItemRef, KeySets], dict[ItemRef, Marks]]:
        """The capture item of every ref in ``captured_refs`` and the marks item of every ref in
        ``marks_refs`` (all of ``refs`` when not given: the purge leaves out those it holds already).

        The purge reads them for a whole page of work pointers at once: the DynamoDB adapter
        does it in one BatchGetItem (per 100 keys), where a read per pointer and per item kind
        made the DynamoDB client a third of the purge's CPU."""
        wanted = refs if captured_refs is None else captured_refs
        return self.captured(queue, wanted), self.marks(queue, refs if marks_refs is None else marks_refs)

    @abstractmethod
    def add_marks(self, queue: str, ref: ItemRef, marks: Marks, expires_at: int) -> int:
        """ADD to the marks item's sets; return its size in bytes afterwards."""


class AuditBackend(ABC):
    """Audit items ``A#<queue>`` / ``<broker id>``, written by the relay in the primary region."""

    @abstractmethod
    def add_audit(self, queue: str, broker_id: str, *, captured: int = 0) -> None: ...

    @abstractmethod
    def set_audit(
        self,
        queue: str,
        broker_id: str,
        *,
        dequeued: int | None = None,
        expired: int | None = None,
        observed_at_ms: int | None = None,
        reported_lost: int | None = None,
    ) -> None: ...

    @abstractmethod
    def audits(self, queue: str) -> dict[str, AuditRecord]: ...


def item_size(pk: str, sk: str, keys: KeySets, extra_attributes: int = 1) -> int:
    """DynamoDB's size of a capture/marks item: attribute names plus values (numbers ~8 bytes)."""
    size = len("pk") + len(pk.encode()) + len("sk") + len(sk.encode())
    if keys.ulids:
        size += len("u") + sum(len(e) for e in keys.ulids)
    if keys.message_ids:
        size += len("m") + sum(len(e.encode()) for e in keys.message_ids)
    if keys.prefixes:
        size += len("mp") + sum(len(e.encode()) for e in keys.prefixes)
    return size + extra_attributes * (len("expires_at") + 8)


def write_units(size_bytes: int) -> int:
    """Standard write units for one write of an item this size (1 per started KB)."""
    return max(1, -(-size_bytes // 1024))
