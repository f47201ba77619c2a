"""A daemon loop that can be stopped before it was started.

Ctrl-C can land while the demo is still setting up, before its view and lag watcher run;
the tear-down then stops them anyway, and a start that comes after the stop does nothing.
"""

from __future__ import annotations

import threading
from collections.abc import Callable


class BackgroundLoop:
    def __init__(self, target: Callable[[threading.Event], None], name: str) -> None:
        self._stopped = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=target, args=(self._stopped,), name=name, daemon=True)

    def start(self) -> None:
        with self._lock:
            if not self._stopped.is_set():
                self._thread.start()

    def stop(self, timeout_s: float) -> None:
        with self._lock:
            self._stopped.set()
            started = self._thread.ident is not None
        if started:
            self._thread.join(timeout=timeout_s)
