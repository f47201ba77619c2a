"""Ctrl-C and ``kill PID`` in the local world's long runs (the demo, drills): what they stop, and when.

A run stops everything it started through its tear-down, by PID. Two moments must not be
cut: the tear-down itself (a half-stopped world leaks processes), and the few milliseconds
between starting a process and recording its PID (an interrupt there would leave a broker
or a worker nobody knows to stop).
"""

from __future__ import annotations

import contextlib
import faulthandler
import signal
import threading
from collections.abc import Iterator
from types import FrameType

#: The signals a run turns into KeyboardInterrupt (:func:`stop_on_interrupt`).
STOPPING_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def stop_on_interrupt() -> None:
    """Ctrl-C and ``kill PID`` stop a demo or a drill through its tear-down, wherever it was started.

    A process started with SIGINT ignored (a background job of a non-interactive shell, as
    some CI runners start their steps) inherits that, and Python then installs no Ctrl-C
    handler at all: the run could not be interrupted. Both signals raise KeyboardInterrupt.
    """

    def interrupt(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, interrupt)
    # ``kill -USR1 PID`` prints where each thread is: for a run that seems stuck, in any phase.
    faulthandler.register(signal.SIGUSR1, all_threads=True)


@contextlib.contextmanager
def interrupts_stop_runs() -> Iterator[None]:
    """:func:`stop_on_interrupt` for the block, the handlers before it restored after (a bench's runs).

    Off the main thread (where signals are not delivered, and handlers cannot be set), nothing changes.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {signum: signal.getsignal(signum) for signum in STOPPING_SIGNALS}
    stop_on_interrupt()
    try:
        yield
    finally:
        for signum, handler in previous.items():
            # None: a handler not set from Python, which the default stands for.
            signal.signal(signum, signal.SIG_DFL if handler is None else handler)


@contextlib.contextmanager
def interrupts_ignored() -> Iterator[None]:
    """Tear-down finishes even when Ctrl-C is pressed again: a half-stopped world leaks processes."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


@contextlib.contextmanager
def interrupts_held() -> Iterator[None]:
    """An interrupt during the block takes effect when it ends: for starting a process and recording its PID.

    Unlike :func:`interrupts_ignored`, nothing is dropped: the held signal's own handler runs
    as the block ends (raising KeyboardInterrupt under :func:`stop_on_interrupt`).
    """
    if threading.current_thread() is not threading.main_thread():
        yield  # signals are delivered to the main thread only
        return
    held: list[int] = []
    previous = {signum: signal.signal(signum, lambda s, _f: held.append(s)) for signum in STOPPING_SIGNALS}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        for signum in dict.fromkeys(held):
            handler = previous[signum]
            if callable(handler):
                handler(signum, None)
            elif handler == signal.SIG_DFL:
                signal.raise_signal(signum)
