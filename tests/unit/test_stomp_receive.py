"""The receive loop installed into stomp.py hands the listeners exactly what stomp.py's own hands them."""

from __future__ import annotations

import itertools
import logging
import socket
from collections import deque
from collections.abc import Callable, Iterator

import pytest
import stomp
import stomp.exception
import stomp.transport
from hypothesis import example, given
from hypothesis import strategies as st

from brokersync.broker import stomp_receive
from brokersync.broker.stomp import without_tcp_delays  # (importing it installs the loop, as for every connection)
from brokersync.broker.stomp_receive import (
    READ_BYTES,
    STOMP_PY_READ,
    STOMP_PY_READ_FRAMES,
    ack_reads_at_once,
    pace_reads,
    read,
    read_frames,
)
from tests.unit.capture.advisories import advisory_frame

_BASE = stomp.transport.BaseTransport

#: Bytes rich in what frame splitting treats specially: NULs, line ends, blank lines, content lengths.
_PIECES = [
    b"\x00",
    b"\n",
    b"\r\n",
    b"\n\n",
    b"\r\n\r\n",
    b"MESSAGE\n",
    b"RECEIPT\nreceipt-id:r1\n\n\x00",
    b"content-length:",
    b"content-length:3",
    b"\ncontent-length:0\n",
    b"\ncontent-length: 5\n",
    b"x-content-length:2\n",
    b"ack:ID\\c1\n",
    b"1",
    b"7",
    b"body",
    b"\xc3\xa9",
]
_STREAMS = st.one_of(st.lists(st.sampled_from(_PIECES), max_size=40).map(b"".join), st.binary(max_size=120))


class _Recorder(stomp.ConnectionListener):
    """Records every call stomp.py's hand-off makes, in order, into a log shared with other recorders."""

    def __init__(self, name: str, log: list[tuple[object, ...]]) -> None:
        self.name, self.log = name, log

    def on_before_message(self, frame: stomp.utils.Frame) -> None:
        self.log.append((self.name, "before", frame.cmd, frame.headers, frame.body))

    def on_message(self, frame: stomp.utils.Frame) -> None:
        self.log.append((self.name, "message", frame.cmd, frame.headers, frame.body))

    def on_receipt(self, frame: stomp.utils.Frame) -> None:
        self.log.append((self.name, "receipt", frame.headers))

    def on_error(self, frame: stomp.utils.Frame) -> None:
        self.log.append((self.name, "error", frame.headers, frame.body))

    def on_connected(self, frame: stomp.utils.Frame) -> None:
        self.log.append((self.name, "connected", frame.headers))

    def on_heartbeat(self) -> None:
        self.log.append((self.name, "heartbeat"))


class _OnlyMessages:
    """A listener without stomp.py's base class: only the one method."""

    def __init__(self, log: list[tuple[object, ...]]) -> None:
        self.log = log

    def on_message(self, frame: stomp.utils.Frame) -> None:
        self.log.append(("plain", "message", frame.body))


def _transport(
    chunks: list[bytes], log: list[tuple[object, ...]], *, blocking: bool = False
) -> stomp.transport.Transport:
    """A transport reading ``chunks``; once they run out, a plain (``blocking``) socket reads as closed."""
    transport = stomp.transport.Transport([("127.0.0.1", 1)])
    for name in ("b", "a"):  # added out of order: stomp.py hands frames over by listener name
        transport.set_listener(name, _Recorder(name, log))
    transport.set_listener("c", _OnlyMessages(log))
    transport.running = True
    transport.blocking = blocking
    source: Iterator[bytes] = iter(chunks)
    transport.receive = lambda: next(source, b"")  # type: ignore[method-assign]
    return transport


def _drive(
    chunks: list[bytes],
    read_fn: Callable[..., object],
    read_frames_fn: Callable[..., object],
    monkeypatch,
    *,
    blocking: bool = False,
) -> tuple[list[tuple[object, ...]], bytes]:
    """Every listener call (and a closed connection) and the bytes left unread, after reading ``chunks``."""
    monkeypatch.setattr(_BASE, "_BaseTransport__read", read_fn)
    log: list[tuple[object, ...]] = []
    transport = _transport(chunks, log, blocking=blocking)
    _read_until_closed(transport, read_frames_fn, len(chunks) + 1, log)
    return log, transport._BaseTransport__recvbuf


def _read_until_closed(
    transport: stomp.transport.Transport,
    read_frames_fn: Callable[..., object],
    reads: int,
    log: list[tuple[object, ...]],
    after_each: Callable[[], None] = lambda: None,
) -> None:
    """Up to ``reads`` reads, ``after_each`` after every one; a closed connection is logged and ends them."""
    for _ in range(reads):
        try:
            read_frames_fn(transport)
        except stomp.exception.ConnectionClosedException:
            log.append(("closed",))
            break
        finally:
            after_each()


def _tls_reads(chunks: list[bytes]) -> list[bytes]:
    """The chunks one TLS read of ours takes, each joined: everything the socket has, except that
    a read whose first chunk is a lone end of line returns it (a heart-beat), as stomp.py's does."""
    reads: list[bytes] = []
    taking: list[bytes] = []
    for chunk in chunks:
        if not taking and chunk in (b"\n", b"\r\n"):
            reads.append(chunk)
        else:
            taking.append(chunk)
    return [*reads, b"".join(taking)] if taking else reads


def _chunked(stream: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(stream) + 1) for c in cuts} | {0, len(stream)})
    return [stream[a:b] for a, b in itertools.pairwise(points) if b > a]


@given(
    stream=_STREAMS,
    cuts=st.lists(st.integers(min_value=0, max_value=200), max_size=8),
    blocking=st.booleans(),
)
# A CRLF header block whose body starts with line ends: its blank line is the CRLF one,
# which ends after the first "\n\n" begins (found once in 20,000 examples).
@example(stream=b"content-length:3\r\n\r\n\n\n\x00\x00", cuts=[], blocking=True)
@example(stream=b"content-length:3\r\n\r\n\n\n\x00\x00", cuts=[], blocking=False)
def test_any_bytes_in_any_chunks_reach_the_listeners_as_stomp_py_hands_them_over(stream, cuts, blocking) -> None:
    """On a plain socket, read for read; on a TLS one, ours reads on until the socket is empty,
    so it must hand over what stomp.py does when the socket hands the same bytes over at once."""
    chunks = _chunked(stream, cuts)
    as_stomp_py_reads = chunks if blocking else _tls_reads(chunks)
    with pytest.MonkeyPatch.context() as monkeypatch:
        theirs = _drive(as_stomp_py_reads, STOMP_PY_READ, STOMP_PY_READ_FRAMES, monkeypatch, blocking=blocking)
        ours = _drive(chunks, read, read_frames, monkeypatch, blocking=blocking)

    assert ours == theirs


class _WaitingBytes:
    """A plain socket's bytes: a blocking receive takes the next chunk (b"" once none is left: closed),
    a receive that does not wait takes up to what it asks for, or finds nothing waiting."""

    def __init__(self, chunks: list[bytes]) -> None:
        self.left = deque(chunks)
        #: What each read took, chunk by chunk: a read ends where the test says so.
        self.taken: list[bytes] = []

    def receive(self) -> bytes:
        chunk = self.left.popleft() if self.left else b""
        self.taken.append(chunk)
        return chunk

    def recv(self, size: int, flags: int = 0) -> bytes:
        assert flags, "a paced read must not wait for more bytes"
        if not self.left:
            raise BlockingIOError
        chunk = self.left.popleft()
        if len(chunk) > size:
            chunk, rest = chunk[:size], chunk[size:]
            self.left.appendleft(rest)
        self.taken.append(chunk)
        return chunk


def _paced(chunks: list[bytes], log: list[tuple[object, ...]], pause_s: float = 0.05):
    """A paced plain transport over ``chunks``, and the bytes behind it."""
    transport = _transport([], log, blocking=True)
    waiting = _WaitingBytes(chunks)
    transport.receive = waiting.receive  # type: ignore[method-assign]
    transport.socket = waiting
    pace_reads(type("Connection", (), {"transport": transport})(), pause_s)  # type: ignore[arg-type]
    return transport, waiting


@given(stream=_STREAMS, cuts=st.lists(st.integers(min_value=0, max_value=200), max_size=8))
def test_a_paced_plain_read_hands_over_what_stomp_py_does_given_the_same_bytes_at_once(stream, cuts) -> None:
    """A paced read takes what the socket holds without waiting: stomp.py, handed each read's
    bytes in one piece, must hand the listeners exactly the same."""
    ours: list[tuple[object, ...]] = []
    groups: list[bytes] = []
    with pytest.MonkeyPatch.context() as monkeypatch:
        monkeypatch.setattr(_BASE, "_BaseTransport__read", read)
        monkeypatch.setattr(stomp_receive.time, "sleep", lambda _s: None)
        chunks = _chunked(stream, cuts)
        transport, waiting = _paced(chunks, ours)

        def each_read_s_bytes() -> None:
            groups.append(b"".join(waiting.taken))
            waiting.taken.clear()

        _read_until_closed(transport, read_frames, len(chunks) + 1, ours, each_read_s_bytes)
        left = transport._BaseTransport__recvbuf
        theirs = _drive([g for g in groups if g], STOMP_PY_READ, STOMP_PY_READ_FRAMES, monkeypatch, blocking=True)

    assert (ours, left) == theirs


def test_a_paced_plain_read_takes_every_frame_waiting_in_one_hand_off(monkeypatch) -> None:
    monkeypatch.setattr(stomp_receive.time, "sleep", lambda _s: None)
    log: list[tuple[object, ...]] = []
    transport, _ = _paced([_wire(1), _wire(2), _wire(3)], log)

    read_frames(transport)

    assert [entry[3]["ack"] for entry in log if entry[:2] == ("a", "message")] == ["ID:1", "ID:2", "ID:3"]


def test_a_read_that_emptied_the_socket_is_followed_by_the_pause(monkeypatch) -> None:
    slept: list[float] = []
    monkeypatch.setattr(stomp_receive.time, "sleep", slept.append)
    transport, _ = _paced([_wire(1), _wire(2)], [], pause_s=0.05)

    read_frames(transport)

    assert slept == [0.05]


def test_a_read_that_stopped_at_its_byte_bound_reads_on_without_a_pause(monkeypatch) -> None:
    """A connection that has fallen behind must not be held back: the pause delays, it never caps."""
    slept: list[float] = []
    monkeypatch.setattr(stomp_receive.time, "sleep", slept.append)
    frames = [_wire(i) for i in range(1, 400)]
    transport, waiting = _paced(frames, [])

    read_frames(transport)

    assert slept == []
    assert sum(len(chunk) for chunk in waiting.taken) == READ_BYTES
    assert waiting.left


def test_a_connection_that_is_not_paced_never_sleeps_and_stops_at_the_first_frame(monkeypatch) -> None:
    slept: list[float] = []
    monkeypatch.setattr(stomp_receive.time, "sleep", slept.append)
    transport, waiting = _paced([_wire(1), _wire(2)], [], pause_s=0)

    read_frames(transport)

    assert slept == []
    assert len(waiting.left) == 1


def test_a_negative_pause_is_refused() -> None:
    transport, _ = _paced([], [])

    with pytest.raises(ValueError, match="0 or more"):
        pace_reads(type("Connection", (), {"transport": transport})(), -0.01)  # type: ignore[arg-type]


class _OptionsSocket:
    """A socket that records the options set on it, or refuses them as a closed one does."""

    def __init__(self, *, refuses: bool = False) -> None:
        self.options: list[tuple[int, int, int]] = []
        self.refuses = refuses

    def setsockopt(self, level: int, option: int, value: int) -> None:
        if self.refuses:
            raise OSError(9, "Bad file descriptor")
        self.options.append((level, option, value))


def _acking(chunks: list[bytes], *, blocking: bool = True, refuses: bool = False):
    transport = _transport(chunks, [], blocking=blocking)
    transport.socket = _OptionsSocket(refuses=refuses)
    assert ack_reads_at_once(type("Connection", (), {"transport": transport})())  # type: ignore[arg-type]
    return transport


_QUICK_ACK = (socket.IPPROTO_TCP, getattr(socket, "TCP_QUICKACK", -1), 1)


@pytest.mark.skipif(not hasattr(socket, "TCP_QUICKACK"), reason="TCP_QUICKACK is Linux's (Lambda's) option")
def test_a_connection_acking_at_once_asks_for_the_acknowledgement_after_every_read() -> None:
    """Linux clears TCP_QUICKACK as it sees fit: once at connect would not last the connection."""
    transport = _acking([_wire(1), _wire(2), _wire(3)])

    for _ in range(3):
        read_frames(transport)

    assert transport.socket.options == [_QUICK_ACK] * 3


@pytest.mark.skipif(not hasattr(socket, "TCP_QUICKACK"), reason="TCP_QUICKACK is Linux's (Lambda's) option")
def test_a_tls_read_of_many_records_asks_once() -> None:
    transport = _acking([_wire(1), _wire(2), _wire(3), b""], blocking=False)

    read_frames(transport)

    assert transport.socket.options == [_QUICK_ACK]


@pytest.mark.skipif(not hasattr(socket, "TCP_QUICKACK"), reason="TCP_QUICKACK is Linux's (Lambda's) option")
def test_a_connection_without_tcp_delays_writes_at_once_and_acknowledges_every_read_at_once() -> None:
    transport = _transport([_wire(1), _wire(2)], [], blocking=True)
    transport.socket = _OptionsSocket()

    without_tcp_delays(type("Connection", (), {"transport": transport})())  # type: ignore[arg-type]
    read_frames(transport)
    read_frames(transport)

    assert transport.socket.options == [(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1), _QUICK_ACK, _QUICK_ACK]


def test_a_connection_not_acking_at_once_sets_no_option() -> None:
    transport = _transport([_wire(1)], [], blocking=True)
    transport.socket = _OptionsSocket()

    read_frames(transport)

    assert transport.socket.options == []


@pytest.mark.skipif(not hasattr(socket, "TCP_QUICKACK"), reason="TCP_QUICKACK is Linux's (Lambda's) option")
def test_a_socket_that_refuses_the_option_still_hands_its_frames_over() -> None:
    """The option only hurries the broker's next frame; a socket closing under the read must not lose this one."""
    log: list[tuple[object, ...]] = []
    transport = _acking([_wire(1)], refuses=True)
    transport.set_listener("z", _Recorder("z", log))

    read_frames(transport)

    assert [entry[3]["ack"] for entry in log if entry[:2] == ("z", "message")] == ["ID:1"]


def test_where_the_system_has_no_such_option_nothing_is_asked(monkeypatch) -> None:
    monkeypatch.delattr(socket, "TCP_QUICKACK", raising=False)
    transport = _transport([_wire(1)], [], blocking=True)
    transport.socket = _OptionsSocket()

    assert not ack_reads_at_once(type("Connection", (), {"transport": transport})())  # type: ignore[arg-type]
    read_frames(transport)
    assert transport.socket.options == []


def _wire(index: int) -> bytes:
    headers, body = advisory_frame()
    data = body.encode()
    headers = {**headers, "ack": f"ID\\c{index}", "content-length": str(len(data))}
    return ("MESSAGE\n" + "".join(f"{k}:{v}\n" for k, v in headers.items()) + "\n").encode() + data + b"\x00\n"


def test_advisories_sixteen_kilobytes_at_a_time_arrive_whole_and_in_order(monkeypatch) -> None:
    stream = b"".join(_wire(i) for i in range(100))
    chunks = [stream[i : i + 16384] for i in range(0, len(stream), 16384)]

    log, rest = _drive(chunks, read, read_frames, monkeypatch)

    messages = [entry for entry in log if entry[:2] == ("a", "message")]
    assert [entry[3]["ack"] for entry in messages] == [f"ID:{i}" for i in range(100)]
    assert rest == b""


def test_a_body_holding_nuls_is_cut_by_its_content_length(monkeypatch) -> None:
    stream = b"MESSAGE\ncontent-length:5\n\na\x00b\x00c\x00MESSAGE\n\nnext\x00"

    log, _ = _drive([stream], read, read_frames, monkeypatch)

    assert [entry[4] for entry in log if entry[:2] == ("a", "message")] == ["a\x00b\x00c", "next"]


def test_a_frame_waits_for_the_rest_of_its_content_length(monkeypatch) -> None:
    stream = b"MESSAGE\ncontent-length:5\n\na\x00b\x00c\x00"
    log, rest = _drive([stream[:20]], read, read_frames, monkeypatch)

    assert log == []
    assert rest == stream[:20]


def test_a_lone_line_end_is_a_heart_beat(monkeypatch) -> None:
    log, _ = _drive([b"\n"], read, read_frames, monkeypatch)

    assert ("a", "heartbeat") in log


def test_a_listener_added_between_reads_gets_the_next_read_s_messages(monkeypatch) -> None:
    log: list[tuple[object, ...]] = []
    transport = _transport([_wire(1), b"", _wire(2)], log)  # b"": nothing more to read for now
    read_frames(transport)
    transport.set_listener("d", _Recorder("d", log))

    read_frames(transport)

    assert [(entry[0], entry[3]["ack"]) for entry in log if entry[1] == "message" and entry[0] in "ad"] == [
        ("a", "ID:1"),
        ("a", "ID:2"),
        ("d", "ID:2"),
    ]


def test_a_tls_read_takes_every_frame_the_socket_has_in_one_hand_off(monkeypatch) -> None:
    """A TLS read returns one record, and ActiveMQ writes a frame per record: stopping at the
    first frame's end would make each frame a read and a hand-off of its own."""
    log: list[tuple[object, ...]] = []
    transport = _transport([_wire(1), _wire(2), _wire(3), b"", _wire(4)], log)
    handed_over: list[int] = []
    counting = stomp_receive._message_handlers
    monkeypatch.setattr(stomp_receive, "_message_handlers", lambda t: handed_over.append(1) or counting(t))

    read_frames(transport)

    assert [entry[3]["ack"] for entry in log if entry[:2] == ("a", "message")] == ["ID:1", "ID:2", "ID:3"]
    assert len(handed_over) == 1


def test_a_tls_read_stops_at_its_byte_bound() -> None:
    frames = [_wire(i) for i in range(1, 400)]
    transport = _transport(frames, [])
    bound = next(n for n in range(1, 400) if sum(len(f) for f in frames[:n]) >= READ_BYTES)

    taken = read(transport)

    assert sum(1 for f in taken if f.startswith(b"MESSAGE")) == bound < len(frames)


def test_a_tls_read_past_its_bound_still_takes_what_the_tls_layer_holds_decrypted() -> None:
    """``select`` wakes for the kernel's bytes only: a record left half read would wait for the next."""
    frames = [_wire(i) for i in range(1, 400)]
    transport = _transport(frames, [])
    held = iter([True, True, False])
    transport.socket = type("Socket", (), {"pending": lambda _self: next(held, False)})()
    bound = next(n for n in range(1, 400) if sum(len(f) for f in frames[:n]) >= READ_BYTES)

    taken = read(transport)

    assert sum(1 for f in taken if f.startswith(b"MESSAGE")) == bound + 2


def test_a_plain_read_stops_at_the_first_frame_s_end() -> None:
    """A blocking socket's next read would wait for more bytes while the frame it has waits too."""
    transport = _transport([_wire(1), _wire(2)], [], blocking=True)

    assert len(read(transport)) == 1


def test_with_debug_logging_on_every_frame_goes_through_stomp_py_s_own_hand_off(monkeypatch, caplog) -> None:
    log: list[tuple[object, ...]] = []
    transport = _transport([_wire(1)], log)

    with caplog.at_level(logging.DEBUG, logger="stomp.py"):
        read_frames(transport)

    assert any("received frame" in record.getMessage() for record in caplog.records)
    calls = [entry[:2] for entry in log]
    assert calls == [("a", "before"), ("b", "before"), ("a", "message"), ("b", "message"), ("plain", "message")]


def test_importing_the_connection_module_puts_it_in_stomp_py_s_transport() -> None:
    assert _BASE._BaseTransport__read is read
    assert _BASE._BaseTransport__read_frames is read_frames


def test_a_stomp_py_release_it_was_not_checked_against_is_left_alone(monkeypatch) -> None:
    monkeypatch.setattr(_BASE, "_BaseTransport__read", STOMP_PY_READ)
    monkeypatch.setattr(_BASE, "_BaseTransport__read_frames", STOMP_PY_READ_FRAMES)
    monkeypatch.setattr(stomp, "__version__", "10.0.0")

    assert stomp_receive.install() is False
    assert _BASE._BaseTransport__read is STOMP_PY_READ
