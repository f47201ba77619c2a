"""Several STOMP frames in one write: the bytes are what stomp.py's STOMP 1.2 protocol would send."""

from __future__ import annotations

import queue
from types import SimpleNamespace

import pytest
import stomp
from hypothesis import given
from hypothesis import strategies as st
from stomp.exception import StompException

from brokersync.broker.stomp import send_in_one_write, stomp_escape
from tests.unit.stomp_writes import frames_in

ACK_ID = "ID:app-41000-1795340000000-1:1:-1:1:7"


class _Seen(stomp.ConnectionListener):
    def __init__(self) -> None:
        self.sent: list[str] = []

    def on_send(self, frame: stomp.utils.Frame) -> None:
        self.sent.append(frame.cmd)


def _connection(*, blocking: bool) -> SimpleNamespace:
    writes: list[bytes] = []
    transport = SimpleNamespace(
        blocking=blocking,
        listeners={"seen": _Seen()},
        send=writes.append,
        send_queue=queue.Queue(),
        writes=writes,
    )
    return SimpleNamespace(transport=transport)


def test_frames_go_in_one_write_in_order_with_their_values_escaped() -> None:
    connection = _connection(blocking=True)

    send_in_one_write(connection, [("ACK", {"id": ACK_ID}), ("UNSUBSCRIBE", {"id": "purge-3", "receipt": "r-1"})])  # type: ignore[arg-type]

    (data,) = connection.transport.writes
    assert b"id:ID\\capp-41000-1795340000000-1\\c1\\c-1\\c1\\c7\n" in data
    frames = frames_in(data)
    assert [(f.cmd, f.headers) for f in frames] == [
        ("ACK", {"id": ACK_ID}),
        ("UNSUBSCRIBE", {"id": "purge-3", "receipt": "r-1"}),
    ]


def test_listeners_see_each_frame_as_stomp_py_shows_them_the_heartbeat_clock_included() -> None:
    connection = _connection(blocking=True)

    send_in_one_write(connection, [("ACK", {"id": ACK_ID}), ("UNSUBSCRIBE", {"id": "purge-3"})])  # type: ignore[arg-type]

    assert connection.transport.listeners["seen"].sent == ["ACK", "UNSUBSCRIBE"]


def test_a_tls_connection_gets_the_bytes_through_its_send_queue() -> None:
    """stomp.py's TLS transport is non-blocking: its I/O thread alone writes to the socket."""
    connection = _connection(blocking=False)

    send_in_one_write(connection, [("UNSUBSCRIBE", {"id": "purge-3"})])  # type: ignore[arg-type]

    assert connection.transport.writes == []
    assert [f.cmd for f in frames_in(connection.transport.send_queue.get_nowait())] == ["UNSUBSCRIBE"]


def test_a_closed_tls_connection_raises_stomp_py_s_own_error() -> None:
    connection = _connection(blocking=False)
    connection.transport.send_queue = None

    with pytest.raises(StompException):
        send_in_one_write(connection, [("UNSUBSCRIBE", {"id": "purge-3"})])  # type: ignore[arg-type]


def _bytes_as_stomp_py_builds_them(frames: list[tuple[str, dict[str, str]]]) -> bytes:
    return b"".join(
        stomp.utils.pack(stomp.utils.convert_frame(stomp.utils.Frame(c, {k: stomp_escape(v) for k, v in h.items()})))
        for c, h in frames
    )


_HEADER_TEXT = st.text(st.characters(codec="utf-8", exclude_characters="\x00"), max_size=40)


@given(
    st.lists(
        st.tuples(
            st.sampled_from(["ACK", "NACK", "UNSUBSCRIBE", "SUBSCRIBE", "BEGIN"]),
            st.dictionaries(st.text("abcdefghijklmnopqrstuvwxyz-", min_size=1, max_size=12), _HEADER_TEXT, max_size=4),
        ),
        min_size=1,
        max_size=6,
    )
)
def test_the_bytes_are_stomp_py_s_own_whichever_way_they_are_built(frames: list[tuple[str, dict[str, str]]]) -> None:
    """With only stomp.py's heartbeat clock listening, the frames are built without Frame objects."""
    connection = _connection(blocking=True)
    connection.transport.listeners = {
        "protocol-listener": stomp.listener.HeartbeatListener(connection.transport, (0, 0))
    }

    send_in_one_write(connection, frames)  # type: ignore[arg-type]

    assert connection.transport.writes == [_bytes_as_stomp_py_builds_them(frames)]


def test_the_heartbeat_clock_moves_once_for_a_write_of_many_frames() -> None:
    connection = _connection(blocking=True)
    clock = stomp.listener.HeartbeatListener(connection.transport, (0, 0))
    clock.next_outbound_heartbeat, clock.send_sleep = 0.0, 5.0
    shown: list[str] = []
    clock_on_send = clock.on_send
    clock.on_send = lambda frame: (shown.append(frame.cmd), clock_on_send(frame))  # type: ignore[method-assign]
    connection.transport.listeners = {"protocol-listener": clock}

    send_in_one_write(connection, [("ACK", {"id": ACK_ID}), ("ACK", {"id": ACK_ID + "0"})])  # type: ignore[arg-type]

    assert shown == ["ACK"]
    assert clock.next_outbound_heartbeat > 0.0
