"""Removing messages from a DR queue by selector, touching nothing else.

For each selector batch the remover opens a client-individual subscription whose selector
names exactly the batch's keys, acks every frame it receives (from its own thread, never
stomp.py's listener thread), and closes the subscription when every key was found or no
frame arrived for ``settle_s``. Keys not found stay pending: they may still be on the
bridge, or deeper in the queue than the broker pages into memory.

Two guards keep the invariant "a message whose key is not in the ledger is never
received, acked, nacked or redelivered by the purge":

* the selector is built from validated, quoted keys only (:mod:`brokersync.purge.selectors`);
* every received frame's key is checked against the batch before it is acked. A frame
  outside the batch would mean the broker evaluated the selector wrongly; it is not acked
  and the run stops with :class:`PurgeInvariantError`, which the edge turns into an alarm.

The last UNSUBSCRIBE of a run carries a receipt, and the broker processes a connection's frames in
order, so when the receipt arrives every ack before it has been applied. Only then are the
keys returned as removed (and marked purged in the ledger by the caller): a connection that
drops earlier leaves the keys pending, and a re-run finds the same messages again.
"""

from __future__ import annotations

import contextlib
import itertools
import queue as queue_mod
import time
from dataclasses import dataclass, field

import stomp

from brokersync.broker.inbox import DISCONNECTED, FrameInbox
from brokersync.broker.stomp import StompConnector
from brokersync.exceptions import BrokerSyncError, BrokerUnavailableError
from brokersync.keys import key_kind
from brokersync.purge.selectors import selector_batches
from brokersync.topology import SyncKey

_FRAME_KEY_HEADER: dict[SyncKey, str] = {"correlation-id": "correlation-id", "message-id": "message-id"}


class PurgeInvariantError(BrokerSyncError):
    """The broker delivered a message whose key the purge did not ask for. Never retried."""


@dataclass(frozen=True)
class RemoverSettings:
    #: Frames the broker may push per subscription before an ack: bounded (DESIGN.md, deadlock).
    prefetch: int = 500
    #: With no frame for this long, a subscription has found what the broker has paged in.
    settle_s: float = 0.4
    #: Upper bound for one ``remove`` call, whatever happens.
    timeout_s: float = 20.0
    #: Subscriptions open at once on the connection (one per selector batch).
    parallel_subscriptions: int = 16


@dataclass
class RemovalResult:
    removed: list[str] = field(default_factory=list)
    not_found: list[str] = field(default_factory=list)
    subscriptions: int = 0
    elapsed_s: float = 0.0


class SelectorRemover:
    """Removes messages by sync key from queues on one broker (the DR broker)."""

    _ids = itertools.count(1)

    def __init__(self, connector: StompConnector, settings: RemoverSettings | None = None) -> None:
        self.connector = connector
        self.settings = settings or RemoverSettings()

    def remove(self, queue: str, keys: list[str]) -> RemovalResult:
        """Remove the messages of ``queue`` keyed by ``keys`` (either kind, mixed); report what was found."""
        started = time.monotonic()
        result = RemovalResult()
        by_kind: dict[SyncKey, list[str]] = {"correlation-id": [], "message-id": []}
        for key in keys:
            by_kind[key_kind(key)].append(key)
        batches = [
            (kind, batch, selector)
            for kind, kind_keys in by_kind.items()
            if kind_keys
            for batch, selector in selector_batches(kind_keys, kind)
        ]
        if not batches:
            return result
        inbox = FrameInbox()
        connection = self.connector.connect(inbox, name="brokersync-purge")
        try:
            step = self.settings.parallel_subscriptions
            for offset in range(0, len(batches), step):
                group = batches[offset : offset + step]
                self._remove_group(connection, inbox, queue, group, result, started)
                result.subscriptions += len(group)
        finally:
            with contextlib.suppress(Exception):
                connection.disconnect()
        removed = set(result.removed)
        result.not_found = [k for k in dict.fromkeys(keys) if k not in removed]
        result.elapsed_s = time.monotonic() - started
        return result

    def _remove_group(
        self,
        connection: stomp.Connection12,
        inbox: FrameInbox,
        queue: str,
        group: list[tuple[SyncKey, list[str], str]],
        result: RemovalResult,
        started: float,
    ) -> None:
        kinds: dict[str, SyncKey] = {}
        expected: dict[str, set[str]] = {}
        for kind, batch, selector in group:
            sub_id = f"purge-{next(self._ids)}"
            kinds[sub_id] = kind
            expected[sub_id] = set(batch)
            connection.subscribe(
                f"/queue/{queue}",
                id=sub_id,
                ack="client-individual",
                headers={"selector": selector, "activemq.prefetchSize": str(min(self.settings.prefetch, len(batch)))},
            )
        acked: list[str] = []
        confirmed = False
        try:
            outstanding = sum(len(v) for v in expected.values())
            last_frame = time.monotonic()
            deadline = started + self.settings.timeout_s
            while outstanding > 0:
                wait = min(last_frame + self.settings.settle_s, deadline) - time.monotonic()
                item = self._next(inbox, wait)
                if item is None:
                    break
                acked.append(self._ack_selected(connection, item, queue, kinds, expected))
                outstanding -= 1
                last_frame = time.monotonic()
            # Frames that raced the settle timeout are selected keys too: ack them rather than
            # let the unsubscribe hand them back with a raised redelivery counter.
            while (item := self._next(inbox, 0)) is not None:
                acked.append(self._ack_selected(connection, item, queue, kinds, expected))
            self._unsubscribe_confirmed(connection, inbox, list(kinds))
            confirmed = True
        finally:
            if not confirmed:
                for sub_id in kinds:
                    with contextlib.suppress(Exception):
                        connection.unsubscribe(sub_id)
        result.removed.extend(acked)

    @staticmethod
    def _next(inbox: FrameInbox, wait: float) -> stomp.utils.Frame | None:
        try:
            item = inbox.frames.get(timeout=wait) if wait > 0 else inbox.frames.get_nowait()
        except queue_mod.Empty:
            return None
        if item is DISCONNECTED:
            raise BrokerUnavailableError("the DR broker dropped the purge connection")
        assert isinstance(item, stomp.utils.Frame)
        return item

    @staticmethod
    def _ack_selected(
        connection: stomp.Connection12,
        frame: stomp.utils.Frame,
        queue: str,
        kinds: dict[str, SyncKey],
        expected: dict[str, set[str]],
    ) -> str:
        """Ack ``frame`` if, and only if, its key is one its subscription asked for."""
        sub_id = frame.headers.get("subscription", "")
        key = frame.headers.get(_FRAME_KEY_HEADER[kinds[sub_id]], "") if sub_id in kinds else ""
        if key not in expected.get(sub_id, set()):
            raise PurgeInvariantError(
                f"subscription {sub_id!r} on {queue} received {key!r}, which it did not select; not acked"
            )
        expected[sub_id].discard(key)
        connection.ack(frame.headers["ack"])
        return key

    def _unsubscribe_confirmed(self, connection: stomp.Connection12, inbox: FrameInbox, sub_ids: list[str]) -> None:
        """Unsubscribe; the last UNSUBSCRIBE carries a receipt, so its arrival confirms every ack before it."""
        receipt = f"purge-confirm-{next(self._ids)}"
        for sub_id in sub_ids[:-1]:
            connection.unsubscribe(sub_id)
        connection.unsubscribe(sub_ids[-1], headers={"receipt": receipt})
        deadline = time.monotonic() + self.settings.timeout_s
        with inbox.receipt_arrived:
            while receipt not in inbox.receipts:
                remaining = deadline - time.monotonic()
                if remaining <= 0 or not connection.is_connected():
                    raise BrokerUnavailableError("the DR broker did not confirm the purge acks")
                inbox.receipt_arrived.wait(remaining)
