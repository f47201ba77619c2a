"""The in-memory backend: the same item semantics as DynamoDB, for unit tests and property tests.

Complete rather than mocked: sets union on ADD, pointers sort by key, sizes are computed
with DynamoDB's rules, so the write-unit figures it reports are the ones AWS would charge.
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Iterator, Sequence

from brokersync.ledger.backend import (
    AuditBackend,
    AuditRecord,
    CapturedWrite,
    ItemRef,
    KeySets,
    Marks,
    Pointer,
    TableBackend,
    element_count,
    item_size,
)


class MemoryBackend(TableBackend, AuditBackend):
    def __init__(self) -> None:
        self._captured: dict[tuple[str, ItemRef], KeySets] = {}
        self._marks: dict[tuple[str, ItemRef], Marks] = {}
        self._pointers: dict[str, dict[str, Pointer]] = {}
        self._audits: dict[str, dict[str, AuditRecord]] = {}
        self._lock = threading.Lock()

    def add_captured(self, queue: str, ref: ItemRef, keys: KeySets, expires_at: int) -> CapturedWrite:
        with self._lock:
            item = self._captured.setdefault((queue, ref), KeySets())
            item.ulids |= keys.ulids
            item.message_ids |= keys.message_ids
            item.prefixes |= keys.prefixes
            return CapturedWrite(
                item_size(f"C#{queue}#{ref.shard}", f"{ref.bucket_ms:013d}", item), element_count(item)
            )

    def put_pointer(self, queue: str, pointer: Pointer, expires_at: int) -> int:
        with self._lock:
            self._pointers.setdefault(queue, {})[pointer.sk] = pointer
        return len(f"Q#{queue}") + len(pointer.sk) + 16 + 20 * len(pointer.refs) + 4 * len(pointer.counts)

    def pointers(self, queue: str, limit: int, after: str | None = None) -> list[Pointer]:
        with self._lock:
            items = self._pointers.get(queue, {})
            return [items[sk] for sk in sorted(items) if after is None or sk > after][:limit]

    def delete_pointer(self, queue: str, sk: str) -> None:
        with self._lock:
            self._pointers.get(queue, {}).pop(sk, None)

    def captured(self, queue: str, refs: Sequence[ItemRef]) -> dict[ItemRef, KeySets]:
        with self._lock:
            return {r: copy.deepcopy(self._captured[(queue, r)]) for r in refs if (queue, r) in self._captured}

    def captured_range(
        self, queue: str, shard: int, first_bucket_ms: int, last_bucket_ms: int
    ) -> Iterator[tuple[int, KeySets]]:
        with self._lock:
            hits = sorted(
                (ref.bucket_ms, copy.deepcopy(keys))
                for (q, ref), keys in self._captured.items()
                if q == queue and ref.shard == shard and first_bucket_ms <= ref.bucket_ms <= last_bucket_ms
            )
        yield from hits

    def marks(self, queue: str, refs: Sequence[ItemRef]) -> dict[ItemRef, Marks]:
        with self._lock:
            return {r: copy.deepcopy(self._marks[(queue, r)]) for r in refs if (queue, r) in self._marks}

    def add_marks(self, queue: str, ref: ItemRef, marks: Marks, expires_at: int) -> int:
        with self._lock:
            item = self._marks.setdefault((queue, ref), Marks())
            for mine, theirs in ((item.purged, marks.purged), (item.missing, marks.missing)):
                mine.ulids |= theirs.ulids
                mine.message_ids |= theirs.message_ids
            return item_size(f"P#{queue}#{ref.shard}", f"{ref.bucket_ms:013d}", item.elements())

    def add_audit(self, queue: str, broker_id: str, *, captured: int = 0) -> None:
        with self._lock:
            self._audits.setdefault(queue, {}).setdefault(broker_id, AuditRecord()).captured += captured

    def set_audit(
        self,
        queue: str,
        broker_id: str,
        *,
        dequeued: int | None = None,
        expired: int | None = None,
        observed_at_ms: int | None = None,
        reported_lost: int | None = None,
    ) -> None:
        with self._lock:
            record = self._audits.setdefault(queue, {}).setdefault(broker_id, AuditRecord())
            for name, value in (
                ("dequeued", dequeued),
                ("expired", expired),
                ("observed_at_ms", observed_at_ms),
                ("reported_lost", reported_lost),
            ):
                if value is not None:
                    setattr(record, name, value)

    def audits(self, queue: str) -> dict[str, AuditRecord]:
        with self._lock:
            return copy.deepcopy(self._audits.get(queue, {}))
