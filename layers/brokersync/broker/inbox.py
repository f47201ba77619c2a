"""Handing STOMP frames from stomp.py's receiver thread to the thread that acts on them.

Everything that acks (relay, purge) acks from its own thread: acking from inside the
listener with a large prefetch on many subscriptions deadlocked stomp.py + ActiveMQ (see
DESIGN.md). The listener therefore only queues frames, records receipts, and queues
:data:`DISCONNECTED` when the connection drops, so the acting thread learns of it in order.
"""

from __future__ import annotations

import queue as queue_mod
import threading

import stomp

DISCONNECTED = object()


class FrameInbox(stomp.ConnectionListener):
    def __init__(self) -> None:
        self.frames: queue_mod.Queue[object] = queue_mod.Queue()
        self.receipts: set[str] = set()
        self.receipt_arrived = threading.Condition()

    def on_message(self, frame: stomp.utils.Frame) -> None:
        self.frames.put(frame)

    def on_receipt(self, frame: stomp.utils.Frame) -> None:
        with self.receipt_arrived:
            self.receipts.add(frame.headers.get("receipt-id", ""))
            self.receipt_arrived.notify_all()

    def on_disconnected(self) -> None:
        self.frames.put(DISCONNECTED)
        with self.receipt_arrived:
            self.receipt_arrived.notify_all()
