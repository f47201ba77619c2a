"""The frame inbox: the receiver thread's frames reach the acting thread in order, none lost, a drop last."""

from __future__ import annotations

import threading
import time

import stomp

from brokersync.broker.inbox import DISCONNECTED, FrameInbox


def _frame(n: int) -> stomp.utils.Frame:
    return stomp.utils.Frame("MESSAGE", {"message-id": f"m{n}"}, b"")


def _ids(items: list[object]) -> list[str]:
    return [item.headers["message-id"] for item in items]  # type: ignore[attr-defined]


def test_frames_come_out_in_arrival_order_at_most_limit_at_a_time() -> None:
    inbox = FrameInbox()
    for n in range(5):
        inbox.on_message(_frame(n))

    assert _ids(inbox.take(3, 0)) == ["m0", "m1", "m2"]
    assert _ids(inbox.take(3, 0)) == ["m3", "m4"]
    assert inbox.take(3, 0) == []


def test_a_drop_comes_after_the_frames_before_it_and_ends_the_take() -> None:
    inbox = FrameInbox()
    inbox.on_message(_frame(1))
    inbox.on_disconnected()

    taken = inbox.take(10, 0)

    assert _ids(taken[:1]) == ["m1"]
    assert taken[1] is DISCONNECTED


def test_get_returns_none_when_nothing_came_in_time() -> None:
    inbox = FrameInbox()
    started = time.monotonic()

    assert inbox.get(0) is None
    assert inbox.get(0.05) is None
    assert time.monotonic() - started >= 0.05


def test_a_reader_waiting_for_a_full_batch_wakes_when_it_is_full_not_at_its_timeout() -> None:
    inbox = FrameInbox()

    def receive() -> None:
        for n in range(50):
            inbox.on_message(_frame(n))
            time.sleep(0.001)

    threading.Thread(target=receive).start()
    started = time.monotonic()
    taken = inbox.take(50, 10.0, at_least=50)

    assert len(taken) == 50
    assert time.monotonic() - started < 5.0


def test_a_reader_waiting_for_a_full_batch_gets_what_came_by_its_timeout() -> None:
    inbox = FrameInbox()
    inbox.on_message(_frame(1))

    assert _ids(inbox.take(50, 0.05, at_least=50)) == ["m1"]


def test_a_drop_wakes_a_reader_waiting_for_a_full_batch() -> None:
    inbox = FrameInbox()
    inbox.on_message(_frame(1))
    threading.Timer(0.05, inbox.on_disconnected).start()
    started = time.monotonic()

    taken = inbox.take(50, 10.0, at_least=50)

    assert taken[-1] is DISCONNECTED
    assert time.monotonic() - started < 5.0


def test_a_receiver_racing_a_reader_loses_no_frame_and_keeps_their_order() -> None:
    inbox = FrameInbox()
    count = 20_000

    def receive() -> None:
        for n in range(count):
            inbox.on_message(_frame(n))
            if n % 97 == 0:
                time.sleep(0)
        inbox.on_disconnected()

    threading.Thread(target=receive).start()
    received: list[object] = []
    deadline = time.monotonic() + 30
    while not received or received[-1] is not DISCONNECTED:
        assert time.monotonic() < deadline, f"only {len(received)} items arrived"
        received += inbox.take(1 + len(received) % 300, 0.01, at_least=1 + len(received) % 7)

    assert _ids(received[:-1]) == [f"m{n}" for n in range(count)]
