"""stomp.py's receive loop without a copy of its buffer per frame and two listener passes per message.

Why: after the header and frame parsers (decisions 0016, 0020), what stomp.py's receiver
thread still spent per frame was its own: in the sync bench at 1,000 msg/s, splitting the
received bytes into frames was 11 % of the relay's py-spy samples and handing each frame to
the listeners 10 % (decision 0035). Per frame, stomp.py's split runs two regular
expressions and copies the rest of its buffer (``recvbuf = recvbuf[pos:]``: a 16 KB read of
763-byte advisories is copied some twenty times over), and its hand-off takes the listener
lock, sorts the listeners and looks each method up twice, once for ``on_before_message`` and
once for ``on_message``.

Here the split walks the buffer with an offset, runs the content-length expression only on a
header block that names ``content-length``, and copies the unread rest once per read; it
returns the frames stomp.py's ``__read`` returns, byte for byte, for any bytes in any
chunking (a property test holds the two equal). On a TLS socket a read goes on until the
socket is empty, where stomp.py's stops at a frame's end (decision 0045); it then returns
what stomp.py returns when the socket hands those bytes over at once. The hand-off looks the listeners' message
methods up once per read, not once per frame, in stomp.py's order (every listener's
``on_before_message``, then every ``on_message``, listeners sorted by name), and skips
stomp.py's no-op ones; every other frame, and every frame while DEBUG logging is on, goes
through stomp.py's own ``process_frame``. A listener added or removed while a read's frames
are handed over takes effect from the next read, not the next frame: the connections here
add theirs before CONNECT and never change them.

:func:`install` puts both in place of stomp.py's private ``BaseTransport`` methods, only on
the stomp.py release line they were checked against, and only over stomp.py's own.
"""

from __future__ import annotations

import socket
import ssl
import time
from collections.abc import Callable
from typing import Any

import stomp
import stomp.exception
import stomp.listener
import stomp.transport
import stomp.utils
from stomp import log as stomp_log

from brokersync.broker.stomp_headers import checked_release

_BASE = stomp.transport.BaseTransport
#: stomp.py's own methods (name-mangled private ones), kept for the fallback and the tests.
STOMP_PY_READ = _BASE._BaseTransport__read  # type: ignore[attr-defined]
STOMP_PY_READ_FRAMES = _BASE._BaseTransport__read_frames  # type: ignore[attr-defined]
_CONTENT_LENGTH = _BASE._BaseTransport__content_length_re  # type: ignore[attr-defined]
#: How much one read of a TLS socket, or of a paced plain one, takes before its frames are handed
#: over (a 1 KB message is a record; this is some sixty of them), so a busy connection's frames are not held long.
READ_BYTES = 64 * 1024
#: Where a transport keeps its listeners' message methods and the listeners they came from.
_HANDLERS = "_brokersync_message_handlers"
#: Where a paced transport keeps its pause (seconds; see :func:`pace_reads`).
_PAUSE = "_brokersync_read_pause_s"
#: Whether the transport's last read left its socket empty, rather than stopping at its byte bound.
_DRAINED = "_brokersync_drained"
#: Where a transport that acknowledges its reads at once keeps the socket option that does it
#: (see :func:`ack_reads_at_once`).
_QUICK_ACK = "_brokersync_quick_ack"
_NO_OP = {
    "on_before_message": stomp.listener.ConnectionListener.on_before_message,
    "on_message": stomp.listener.ConnectionListener.on_message,
}


def _frame_end(buffer: bytes, start: int, nul: int) -> int | None:
    """Where the frame starting at ``start`` ends (its NUL, as stomp.py takes it), or None: wait for more bytes.

    ``nul`` is the first NUL from ``start``. A header block (up to the first blank line) with a
    ``content-length`` sets where the body ends instead, NULs included; such a frame waits
    until the buffer holds more than its header block and body.
    """
    # PREAMBLE_END_RE's leftmost ``\n\n|\r\n\r\n`` in the frame, by two finds instead of the expression.
    # A ``\r\n\r\n`` is leftmost if it starts before the first ``\n\n``, though it may end after
    # it starts (``\r\n\r\n\n``): the second find may reach three bytes past it, within the frame.
    blank = buffer.find(b"\n\n", start, nul)
    crlf = buffer.find(b"\r\n\r\n", start, nul if blank < 0 else min(nul, blank + 3))
    if crlf >= 0:
        preamble_end, body_start = crlf, crlf + 4
    elif blank >= 0:
        preamble_end, body_start = blank, blank + 2
    else:
        return nul
    named = buffer.find(b"content-length", start, preamble_end)
    if named < 0:
        return nul  # most frames: the expression is not run at all
    # Any match starts at a ``content-length``, so the search starts at the first one; ``^``
    # matches there as it does in the frame alone, unless that is the frame's very start.
    if named > start:
        content_length = _CONTENT_LENGTH.search(buffer, named, preamble_end)
    else:
        content_length = _CONTENT_LENGTH.search(buffer[start:preamble_end])
    if content_length is None:
        return nul
    frame_size = body_start - start + int(content_length.group("value"))
    if frame_size <= nul - start:
        return nul
    if frame_size < len(buffer) - start:
        return start + frame_size  # the byte there is taken as the frame's NUL, unread, as stomp.py does
    return None


def _after_line_ends(buffer: bytes, pos: int, is_eol: Callable[[bytes], bool]) -> int:
    """``pos`` moved past the line ends stomp.py skips after a frame."""
    if is_eol is stomp.utils.is_eol_default:  # a line end is b"\n" alone
        while buffer[pos : pos + 1] == b"\n":
            pos += 1
        return pos
    while True:
        if is_eol(buffer[pos : pos + 1]):
            pos += 1
        elif is_eol(buffer[pos : pos + 2]):
            pos += 2
        else:
            return pos


def split_frames(buffer: bytes, is_eol: Callable[[bytes], bool]) -> tuple[list[bytes], bytes]:
    """The whole frames at the start of ``buffer`` and the bytes left over, as stomp.py's ``__read`` splits them."""
    frames: list[bytes] = []
    start = 0
    while True:
        nul = buffer.find(b"\x00", start)
        if nul < 0:
            break
        end = _frame_end(buffer, start, nul)
        if end is None:
            break
        frames.append(buffer[start:end])
        start = _after_line_ends(buffer, end + 1, is_eol)
    return frames, buffer[start:] if start else buffer


def _tls_pending(transport: Any) -> bool:
    """Whether the TLS socket holds decrypted bytes not yet read: ``select`` would not wake for them."""
    pending = getattr(transport.socket, "pending", None)
    return bool(pending is not None and pending())


def read(transport: Any) -> list[bytes]:
    """``BaseTransport.__read``: the next frame(s) from the socket, read as stomp.py reads them, split once.

    One difference: on a TLS (non-blocking) socket it goes on reading past a frame's end until
    the socket has nothing more (``SSLWantReadError``), or :data:`READ_BYTES` and the
    record in hand are read. A TLS read returns at most one record, and ActiveMQ writes each
    frame as a record of its own, so stomp.py's stop at the first NUL made every frame a read
    and a hand-off of its own there (decision 0045). What it returns is what stomp.py returns
    when the socket hands the same bytes over in one piece (a property test holds it). A plain
    socket still stops at the first NUL, its next read would block, unless the connection is
    paced (:func:`pace_reads`): then the read also takes, without waiting, what else the socket
    holds, up to :data:`READ_BYTES`.
    """
    is_eol = transport._BaseTransport__is_eol
    chunks: list[bytes] = []
    received = 0
    while transport.running:
        try:
            try:
                chunk = transport.receive()
            except (ssl.SSLWantReadError, ssl.SSLWantWriteError):
                break
            except stomp.exception.InterruptedException:
                stomp_log.debug("socket read interrupted, restarting")
                continue
        except Exception:
            stomp_log.debug("socket read error", exc_info=stomp_log.verbose)
            chunk = b""
        if chunk is None or len(chunk) == 0:
            if not transport.blocking:
                break  # a TLS socket's recv can return None while the connection is open
            stomp_log.debug("nothing received, raising ConnectionClosedException")
            raise stomp.exception.ConnectionClosedException()
        if is_eol(chunk) and not transport._BaseTransport__recvbuf and not chunks:
            return [chunk]  # an end of line to an empty buffer: a heart-beat
        chunks.append(chunk)
        received += len(chunk)
        if transport.blocking:
            if b"\x00" in chunk:
                received += _take_what_waits(transport, chunks, READ_BYTES - received)
                break
        elif received >= READ_BYTES and not _tls_pending(transport):
            break
    transport.__dict__[_DRAINED] = received < READ_BYTES
    if chunks:
        buffered = transport._BaseTransport__recvbuf
        transport._BaseTransport__recvbuf = b"".join([buffered, *chunks]) if buffered or len(chunks) > 1 else chunks[0]
    if not transport._BaseTransport__recvbuf or not transport.running:
        return []
    frames, transport._BaseTransport__recvbuf = split_frames(transport._BaseTransport__recvbuf, is_eol)
    return frames


def _take_what_waits(transport: Any, chunks: list[bytes], room: int) -> int:
    """On a paced connection, append what its plain socket holds now to ``chunks``, up to ``room``
    bytes, without waiting; how many (0 on a connection that is not paced).

    A paced reader sleeps after each read, so a read must take everything that came during the
    last sleep: stopping at the first frame's end, with up to 16 KB a receive, would cap what
    the connection can take at a few receives per pause. A closed or failing socket ends this
    early; the next (blocking) read finds it so, as stomp.py's own read would.
    """
    if not transport.__dict__.get(_PAUSE):
        return 0
    taken = 0
    while taken < room:
        try:
            chunk = transport.socket.recv(room - taken, socket.MSG_DONTWAIT)
        except (BlockingIOError, InterruptedError):
            break
        except OSError:
            stomp_log.debug("socket read error", exc_info=stomp_log.verbose)
            break
        if not chunk:
            break
        chunks.append(chunk)
        taken += len(chunk)
    return taken


def pace_reads(connection: stomp.Connection12, pause_s: float) -> None:
    """Make ``connection``'s receiver thread sleep ``pause_s`` after each read that emptied the socket.

    Why: at 1,000 msg/s ActiveMQ writes a few frames at a time, and every read is a wake-up of
    the receiver thread, a system call and a hand-off, whatever it brings. A reader that waits
    before reading again finds the frames of the whole pause at once. At 1,000 msg/s a 50 ms
    pause took a consumer that only receives and ACKs from 0.027 to 0.017-0.019 CPU-seconds per
    1,000 messages, and the relay, whose own work per message it does not touch, 5-6 % less
    (decision 0050). Only a read that left the socket empty is
    followed by a pause, so a connection that falls behind reads on without pausing: the
    pause delays frames by at most ``pause_s``, it never caps how many a second arrive.

    For a reader that waits for its frames anyway (the relay writes every 0.25 s); not for one
    that waits on each RECEIPT (the purge): each would come up to ``pause_s`` later. On a TLS
    connection the same thread writes the outgoing frames, which then wait up to ``pause_s``
    too. 0 turns pacing off.
    """
    if pause_s < 0:
        raise ValueError(f"a read pause is 0 or more seconds, not {pause_s}")
    connection.transport.__dict__[_PAUSE] = pause_s


def ack_reads_at_once(connection: stomp.Connection12) -> bool:
    """Make ``connection`` acknowledge (in TCP) each read at once; whether this system can (Linux can).

    Why: ActiveMQ's TCP transport leaves Nagle's algorithm on (its ``tcpNoDelay`` option is off
    by default, and Amazon MQ manages the transport connectors), so once it has written a frame it holds
    its next small one until the client's kernel has acknowledged the first, and Linux delays
    that acknowledgement by 40 ms when the reader is not sending anything, as a reader waiting
    for its frames is not. A removal call's first MESSAGE came in 2-5 ms and the other four of
    its batch some 40 ms later, every call (decision 0052). ``TCP_QUICKACK`` after each read
    sends the acknowledgement now; Linux clears it again as it sees fit, so it is set after
    every read, not once. It costs a system call per read and changes no byte of any frame.

    For a reader that waits on each exchange (the purge's removal calls); not for one that
    streams and takes its frames in batches anyway (the relay's paced reads). Only with
    :func:`install` in place: stomp.py's own read ignores it.
    """
    option = getattr(socket, "TCP_QUICKACK", None)
    if option is None:
        return False
    connection.transport.__dict__[_QUICK_ACK] = option
    return True


def _ack_at_once(transport: Any) -> None:
    """Ask the kernel to acknowledge what was just read now; a socket that refuses it is left as it is."""
    sock = getattr(transport, "socket", None)
    if sock is None:
        return
    try:
        sock.setsockopt(socket.IPPROTO_TCP, transport.__dict__[_QUICK_ACK], 1)
    except OSError:
        stomp_log.debug("TCP_QUICKACK refused", exc_info=stomp_log.verbose)


def _message_handlers(transport: Any) -> list[Callable[[stomp.utils.Frame], object]]:
    """The listeners' ``on_before_message`` methods, then their ``on_message`` ones, as stomp.py calls them.

    Worked out again only when the transport's listeners are not the ones they were worked out
    from: a read at 1,000 msg/s often brings a single frame.
    """
    with transport._BaseTransport__listeners_change_condition:
        cached = transport.__dict__.get(_HANDLERS)
        if cached is not None and cached[0] == transport.listeners:
            return cached[1]
        listeners = dict(transport.listeners)
    handlers = []
    for name in ("on_before_message", "on_message"):
        for _, listener in sorted(listeners.items()):
            method = getattr(listener, name, None)
            if method is not None and getattr(method, "__func__", None) is not _NO_OP[name]:
                handlers.append(method)
    transport.__dict__[_HANDLERS] = (listeners, handlers)
    return handlers


def _stomp_py_dispatch(transport: Any) -> bool:
    """Whether this transport hands frames over as stomp.py's own ``process_frame`` and ``notify`` do."""
    kind = type(transport)
    return kind.process_frame is _BASE.process_frame and kind.notify is _BASE.notify


def read_frames(transport: Any) -> None:
    """``BaseTransport.__read_frames``: parse what one read brought and hand each frame to the listeners."""
    frames = transport._BaseTransport__read()
    if _QUICK_ACK in transport.__dict__:
        _ack_at_once(transport)
    if not frames:
        return
    is_eol = transport._BaseTransport__is_eol
    parse_frame = stomp.transport.parse_frame  # looked up here: brokersync.broker.stomp_frames replaces it
    auto_decode = transport._BaseTransport__auto_decode
    direct = _stomp_py_dispatch(transport) and not stomp_log.isEnabledFor(stomp_log.DEBUG)
    handlers: list[Callable[[stomp.utils.Frame], object]] | None = None
    for raw in frames:
        frame = stomp.utils.HEARTBEAT_FRAME if is_eol(raw) else parse_frame(raw)
        if frame is None:
            continue
        if auto_decode:
            frame.body = stomp.utils.decode(frame.body)
        if direct and frame.cmd.lower() == "message":
            if handlers is None:
                handlers = _message_handlers(transport)
            for handler in handlers:
                handler(frame)
        else:
            transport.process_frame(frame, raw)
    pause = transport.__dict__.get(_PAUSE)
    if pause and transport.__dict__.get(_DRAINED) and transport.running:
        time.sleep(pause)


def install() -> bool:
    """Use :func:`read` and :func:`read_frames` in stomp.py's transport; whether they are in place."""
    if _BASE._BaseTransport__read is read and _BASE._BaseTransport__read_frames is read_frames:  # type: ignore[attr-defined]
        return True
    if (
        not checked_release()
        or _BASE._BaseTransport__read is not STOMP_PY_READ  # type: ignore[attr-defined]
        or _BASE._BaseTransport__read_frames is not STOMP_PY_READ_FRAMES  # type: ignore[attr-defined]
    ):
        return False
    _BASE._BaseTransport__read = read  # type: ignore[attr-defined]
    _BASE._BaseTransport__read_frames = read_frames  # type: ignore[attr-defined]
    return True
