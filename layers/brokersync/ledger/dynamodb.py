"""The DynamoDB backend (pynamodb), and the translation of its errors into ledger errors.

Throttling and transient service errors become :class:`LedgerUnavailableError` (retryable);
pynamodb's own retries run first (botocore's standard mode), the capture writer's backoff
after that. Errors are classified by the botocore error code, never by message text.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime
from typing import Any, TypeVar

from pynamodb.attributes import BinarySetAttribute, NumberAttribute, TTLAttribute, UnicodeAttribute, UnicodeSetAttribute
from pynamodb.constants import NONE
from pynamodb.exceptions import PynamoDBException
from pynamodb.models import Model

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
from brokersync.ledger.exceptions import LedgerError, LedgerUnavailableError

T = TypeVar("T")

RETRYABLE_CODES = frozenset(
    {
        "ProvisionedThroughputExceededException",
        "ThrottlingException",
        "RequestLimitExceeded",
        "InternalServerError",
        "ServiceUnavailable",
        "TransactionConflictException",
    }
)


class LedgerItem(Model):
    """Every ledger item; which attributes are set depends on the item kind (see backend.py)."""

    class Meta:
        table_name = "brokersync-ledger"
        max_retry_attempts = 5
        base_backoff_ms = 25

    pk = UnicodeAttribute(hash_key=True)
    sk = UnicodeAttribute(range_key=True)
    u = BinarySetAttribute(legacy_encoding=False, null=True)
    m = UnicodeSetAttribute(null=True)
    mp = UnicodeSetAttribute(null=True)
    pu = BinarySetAttribute(legacy_encoding=False, null=True)
    pm = UnicodeSetAttribute(null=True)
    xu = BinarySetAttribute(legacy_encoding=False, null=True)
    xm = UnicodeSetAttribute(null=True)
    refs = UnicodeAttribute(null=True)
    captured = NumberAttribute(null=True)
    dequeued = NumberAttribute(null=True)
    expired = NumberAttribute(null=True)
    observed_at_ms = NumberAttribute(null=True)
    reported_lost = NumberAttribute(null=True)
    #: Marks items: when marks were last added (ms). The reconciliation's consume-to-purge lag
    #: is measured against it, an upper bound per key that costs no extra item.
    pt = NumberAttribute(null=True)
    expires_at = TTLAttribute(null=True)


#: A peer region's replica is read with a short leash: that region may be the one lost, and a
#: loop in the surviving region must not wait on it.
PEER_READ = {"connect_timeout_seconds": 1, "read_timeout_seconds": 2, "max_retry_attempts": 0}


def ledger_model(
    table_name: str, region: str | None = None, host: str | None = None, *, peer: bool = False
) -> type[LedgerItem]:
    """A model class bound to one table (and, locally, to moto's endpoint); ``peer``: another region's replica."""
    settings = {"table_name": table_name, "region": region, "host": host, **(PEER_READ if peer else {})}
    meta = type("Meta", (), {**LedgerItem.Meta.__dict__, **settings})
    return type("BoundLedgerItem", (LedgerItem,), {"Meta": meta})


def _translate(operation: Callable[[], T]) -> T:
    try:
        return operation()
    except PynamoDBException as e:
        code = getattr(e, "cause_response_code", None)
        if code in RETRYABLE_CODES or code is None:
            raise LedgerUnavailableError(f"ledger unavailable ({code or 'connection'}): {e.msg}") from e
        raise LedgerError(f"ledger request failed ({code}): {e.msg}") from e


def _key_sets(item: LedgerItem) -> KeySets:
    return KeySets(set(item.u or ()), set(item.m or ()), set(item.mp or ()))


def _expiry(epoch_seconds: int) -> datetime:
    return datetime.fromtimestamp(epoch_seconds, UTC)


def _refs_text(pointer: Pointer) -> str:
    """``shard:bucket:count`` per ref (``shard:bucket`` for a pointer that counted nothing)."""
    if pointer.counts:
        return ",".join(f"{r.shard}:{r.bucket_ms}:{n}" for r, n in zip(pointer.refs, pointer.counts, strict=True))
    return ",".join(f"{r.shard}:{r.bucket_ms}" for r in pointer.refs)


def _pointer(sk: str, text: str | None) -> Pointer:
    """The pointer stored under ``sk``; one written before pointers counted reads with no counts."""
    if not text:
        return Pointer(sk=sk, refs=())
    parts = [part.split(":") for part in text.split(",")]
    refs = tuple(ItemRef(int(p[0]), int(p[1])) for p in parts)
    counted = all(len(p) == 3 for p in parts)
    return Pointer(sk=sk, refs=refs, counts=tuple(int(p[2]) for p in parts) if counted else ())


#: How many marks items' sets a backend remembers for sizing its own marks writes. The purge
#: touches a handful of buckets a round; a thousand covers minutes of them.
MARKS_REMEMBERED = 1024


class DynamoDBBackend(TableBackend, AuditBackend):
    def __init__(self, model: type[LedgerItem]) -> None:
        self.model = model
        self._marks_held: dict[tuple[str, ItemRef], KeySets] = {}
        self._marks_lock = threading.Lock()

    def _hold_marks(self, queue: str, ref: ItemRef, added: KeySets) -> KeySets:
        """The marks item's elements as this process knows them, after adding ``added``."""
        key = (queue, ref)
        with self._marks_lock:
            known = self._marks_held.pop(key, KeySets())
            held = KeySets(known.ulids | added.ulids, known.message_ids | added.message_ids)
            self._marks_held[key] = held
            while len(self._marks_held) > MARKS_REMEMBERED:
                del self._marks_held[next(iter(self._marks_held))]
            return held

    def _capture_key(self, queue: str, ref: ItemRef) -> tuple[str, str]:
        return f"C#{queue}#{ref.shard}", f"{ref.bucket_ms:013d}"

    def add_captured(self, queue: str, ref: ItemRef, keys: KeySets, expires_at: int) -> CapturedWrite:
        pk, sk = self._capture_key(queue, ref)
        item = self.model(pk, sk)
        actions: list[Any] = [self.model.expires_at.set(_expiry(expires_at))]
        if keys.ulids:
            actions.append(self.model.u.add(keys.ulids))
        if keys.message_ids:
            actions.append(self.model.m.add(keys.message_ids))
        if keys.prefixes:
            actions.append(self.model.mp.add(keys.prefixes))
        _translate(lambda: item.update(actions=actions, add_version_condition=False))
        held = _key_sets(item)  # the whole item after the ADD (pynamodb asks for ALL_NEW)
        return CapturedWrite(item_size(pk, sk, held), element_count(held))

    def put_pointer(self, queue: str, pointer: Pointer, expires_at: int) -> int:
        item = self.model(f"Q#{queue}", pointer.sk, refs=_refs_text(pointer), expires_at=_expiry(expires_at))
        _translate(item.save)
        return len(f"Q#{queue}") + len(pointer.sk) + len(item.refs or "") + 30

    def pointers(self, queue: str, limit: int, after: str | None = None) -> list[Pointer]:
        condition = self.model.sk > after if after is not None else None

        def run() -> list[Pointer]:
            return [
                _pointer(i.sk, i.refs)
                for i in self.model.query(
                    f"Q#{queue}", range_key_condition=condition, scan_index_forward=True, limit=limit
                )
            ]

        return _translate(run)

    def delete_pointer(self, queue: str, sk: str) -> None:
        _translate(self.model(f"Q#{queue}", sk).delete)

    def captured(self, queue: str, refs: Sequence[ItemRef]) -> dict[ItemRef, KeySets]:
        return self._read(queue, refs, [])[0]

    def captured_range(
        self, queue: str, shard: int, first_bucket_ms: int, last_bucket_ms: int
    ) -> Iterator[tuple[int, KeySets]]:
        condition = self.model.sk.between(f"{first_bucket_ms:013d}", f"{last_bucket_ms:013d}")
        items = _translate(lambda: list(self.model.query(f"C#{queue}#{shard}", range_key_condition=condition)))
        for item in items:
            yield int(item.sk), _key_sets(item)

    def _marks_key(self, queue: str, ref: ItemRef) -> tuple[str, str]:
        return f"P#{queue}#{ref.shard}", f"{ref.bucket_ms:013d}"

    def marks(self, queue: str, refs: Sequence[ItemRef]) -> dict[ItemRef, Marks]:
        return self._read(queue, [], refs)[1]

    def captured_and_marks(
        self,
        queue: str,
        refs: Sequence[ItemRef],
        *,
        captured_refs: Sequence[ItemRef] | None = None,
        marks_refs: Sequence[ItemRef] | None = None,
    ) -> tuple[dict[ItemRef, KeySets], dict[ItemRef, Marks]]:
        return self._read(
            queue, refs if captured_refs is None else captured_refs, refs if marks_refs is None else marks_refs
        )

    def _read(
        self, queue: str, captured_refs: Sequence[ItemRef], marks_refs: Sequence[ItemRef]
    ) -> tuple[dict[ItemRef, KeySets], dict[ItemRef, Marks]]:
        """Capture items and marks items in one BatchGetItem (pynamodb pages it per 100 keys)."""
        captured_keys = {self._capture_key(queue, r): r for r in captured_refs}
        marks_keys = {self._marks_key(queue, r): r for r in marks_refs}

        def run() -> tuple[dict[ItemRef, KeySets], dict[ItemRef, Marks]]:
            captured: dict[ItemRef, KeySets] = {}
            marks: dict[ItemRef, Marks] = {}
            for item in self.model.batch_get([*captured_keys, *marks_keys]):
                key = (item.pk, item.sk)
                if key in captured_keys:
                    captured[captured_keys[key]] = _key_sets(item)
                else:
                    marks[marks_keys[key]] = Marks(
                        purged=KeySets(set(item.pu or ()), set(item.pm or ())),
                        missing=KeySets(set(item.xu or ()), set(item.xm or ())),
                    )
            for ref in marks_keys.values():
                self._hold_marks(queue, ref, marks.get(ref, Marks()).elements())
            return captured, marks

        return _translate(run)

    def add_marks(self, queue: str, ref: ItemRef, marks: Marks, expires_at: int) -> int:
        """ADD the marks, asking for nothing back; the size returned is as this process knows it.

        The purge marks every round, and a marks item holds a whole bucket's resolved elements:
        asking for the item back (pynamodb's ``update`` always asks for ``ALL_NEW``) made botocore
        decode all of it again on each write (decision 0034). The size, which only feeds the
        bill's write units, is the item as last read here plus what this write adds: exact while
        the purge is the region's one writer of marks, and never below what this write alone
        leaves.
        """
        pk, sk = self._marks_key(queue, ref)
        actions: list[Any] = [
            self.model.expires_at.set(_expiry(expires_at)),
            self.model.pt.set(int(time.time() * 1000)),
        ]
        for attribute, values in (
            (self.model.pu, marks.purged.ulids),
            (self.model.pm, marks.purged.message_ids),
            (self.model.xu, marks.missing.ulids),
            (self.model.xm, marks.missing.message_ids),
        ):
            if values:
                actions.append(attribute.add(values))
        # The model's own connection, the one ``Model.update`` uses, so that the table, region,
        # endpoint, timeouts and retries are the model's.
        connection = self.model._get_connection()
        _translate(lambda: connection.update_item(pk, range_key=sk, actions=actions, return_values=NONE))
        return item_size(pk, sk, self._hold_marks(queue, ref, marks.elements()))

    def add_audit(self, queue: str, broker_id: str, *, captured: int = 0) -> None:
        item = self.model(f"A#{queue}", broker_id)
        _translate(lambda: item.update(actions=[self.model.captured.add(captured)], add_version_condition=False))

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
        item = self.model(f"A#{queue}", broker_id)
        actions = [
            attribute.set(value)
            for attribute, value in (
                (self.model.dequeued, dequeued),
                (self.model.expired, expired),
                (self.model.observed_at_ms, observed_at_ms),
                (self.model.reported_lost, reported_lost),
            )
            if value is not None
        ]
        if actions:
            _translate(lambda: item.update(actions=actions, add_version_condition=False))

    def audits(self, queue: str) -> dict[str, AuditRecord]:
        def run() -> dict[str, AuditRecord]:
            return {
                i.sk: AuditRecord(
                    captured=int(i.captured or 0),
                    dequeued=int(i.dequeued or 0),
                    expired=int(i.expired or 0),
                    observed_at_ms=int(i.observed_at_ms or 0),
                    reported_lost=int(i.reported_lost or 0),
                )
                for i in self.model.query(f"A#{queue}")
            }

        return _translate(run)
