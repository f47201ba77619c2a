"""Handing STOMP frames from stomp.py's receiver thread to the thread that acts on them.

Everything that acks (relay, purge) acks from its own thread: acking from inside the
listener with a large prefetch on many subscriptions deadlocked stomp.py + ActiveMQ (see
DESIGN.md). The listener therefore only queues frames, records receipts, and queues
:data:`DISCONNECTED` when the connection drops, so the acting thread learns of it in order.

Why a deque and an event rather than a ``queue.Queue``: a queue takes a lock on every put
and every get, and wakes a waiting reader on every frame. The relay waits out its flush
interval anyway, so it now asks to be woken only when its batch is full (``at_least``) and
takes the whole batch in one call; the receiver thread appends without a lock. In the sync
bench at 1,000 msg/s, the per-frame wake-ups were about a tenth of the relay's CPU
(decision 0023).
"""

from __future__ import annotations

import threading
import time
from collections import deque

import stomp

DISCONNECTED = object()


class FrameInbox(stomp.ConnectionListener):
    def __init__(self) -> None:
        self._items: deque[object] = deque()
        self._ready = threading.Event()
        #: How many queued items wake the reader: set by the reader before it waits.
        self._wanted = 1
        self.receipts: set[str] = set()
        #: ERROR frames, in arrival order. The broker answers a frame it refuses (an ACK it cannot
        #: match, say) with one and keeps the connection, so a later receipt does not mean that
        #: every frame before it was applied: the reader checks these too.
        self.errors: list[stomp.utils.Frame] = []
        self.receipt_arrived = threading.Condition()

    # -- stomp.py's receiver thread ---------------------------------------------------------------
    def on_message(self, frame: stomp.utils.Frame) -> None:
        self._items.append(frame)
        if len(self._items) >= self._wanted and not self._ready.is_set():
            self._ready.set()

    def on_receipt(self, frame: stomp.utils.Frame) -> None:
        with self.receipt_arrived:
            self.receipts.add(frame.headers.get("receipt-id", ""))
            self.receipt_arrived.notify_all()

    def on_error(self, frame: stomp.utils.Frame) -> None:
        with self.receipt_arrived:
            self.errors.append(frame)
            self.receipt_arrived.notify_all()

    def on_disconnected(self) -> None:
        self._items.append(DISCONNECTED)
        self._ready.set()
        with self.receipt_arrived:
            self.receipt_arrived.notify_all()

    # -- the acting thread ------------------------------------------------------------------------
    def take(self, limit: int, timeout_s: float, *, at_least: int = 1) -> list[object]:
        """Up to ``limit`` items in arrival order, after waiting up to ``timeout_s`` for ``at_least``.

        Returns early with what there is when the connection drops: :data:`DISCONNECTED` is
        then the last item returned, so the frames before it are seen first. An empty list
        means nothing arrived in time.
        """
        wanted = max(1, min(at_least, limit))
        if len(self._items) < wanted and timeout_s > 0:
            # The order matters: the receiver appends before it reads ``_wanted``, and the reader
            # sets ``_wanted`` and clears before it counts, so an append between the count and the
            # wait has already set the event.
            self._wanted = wanted
            self._ready.clear()
            deadline = time.monotonic() + timeout_s
            while len(self._items) < wanted and not self._dropped():
                remaining = deadline - time.monotonic()
                if remaining <= 0 or not self._ready.wait(remaining):
                    break
                self._ready.clear()
            self._wanted = 1
        taken: list[object] = []
        while self._items and len(taken) < limit:
            item = self._items.popleft()
            taken.append(item)
            if item is DISCONNECTED:
                break
        return taken

    def get(self, timeout_s: float) -> object | None:
        """The next item, waiting up to ``timeout_s`` (0: only what is already here); None if none came."""
        taken = self.take(1, timeout_s)
        return taken[0] if taken else None

    def _dropped(self) -> bool:
        """Whether a drop is queued: it is always the last thing the listener queues."""
        return bool(self._items) and self._items[-1] is DISCONNECTED
