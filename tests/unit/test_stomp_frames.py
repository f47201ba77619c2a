"""The frame parser installed into stomp.py's transport returns exactly what stomp.py's own returns."""

from __future__ import annotations

import stomp
import stomp.transport
import stomp.utils
from hypothesis import given
from hypothesis import strategies as st

import brokersync.broker.stomp  # noqa: F401  (installs the parser, as every connection's module does)
from brokersync.broker import stomp_frames
from brokersync.broker.stomp_frames import STOMP_PY_PARSE_FRAME, parse_frame
from tests.unit.capture.advisories import advisory_frame

#: Bytes rich in what frame parsing treats specially: line ends, blank lines, separators, escapes.
_PIECES = [b"\n", b"\r", b"\r\n", b"\n\n", b":", b"\\c", b"\\", b"MESSAGE", b"ack", b"\xc3\xa9", b"\xff", b"x"]
_FRAMES = st.one_of(st.lists(st.sampled_from(_PIECES), max_size=30).map(b"".join), st.binary(max_size=60))


def _as_tuple(frame: stomp.utils.Frame | None) -> tuple[object, ...] | None:
    return None if frame is None else (frame.cmd, frame.headers, frame.body)


@given(frame=_FRAMES)
def test_any_bytes_parse_as_stomp_py_parses_them(frame: bytes) -> None:
    assert _as_tuple(parse_frame(frame)) == _as_tuple(STOMP_PY_PARSE_FRAME(frame))


def test_an_activemq_advisory_parses_to_its_command_headers_and_body() -> None:
    headers, body = advisory_frame()
    wire = ("MESSAGE\n" + "".join(f"{k}:{v.replace(':', chr(92) + 'c')}\n" for k, v in headers.items()) + "\n").encode()

    frame = parse_frame(wire + body.encode())

    assert frame is not None
    assert (frame.cmd, frame.headers, frame.body) == ("MESSAGE", headers, body.encode())


def test_importing_the_connection_module_puts_it_in_stomp_py_s_transport() -> None:
    assert stomp.transport.parse_frame is parse_frame  # type: ignore[attr-defined]


def test_a_stomp_py_release_it_was_not_checked_against_is_left_alone(monkeypatch) -> None:
    monkeypatch.setattr(stomp.transport, "parse_frame", STOMP_PY_PARSE_FRAME)
    monkeypatch.setattr(stomp, "__version__", "10.0.0")

    assert stomp_frames.install() is False
    assert stomp.transport.parse_frame is STOMP_PY_PARSE_FRAME  # type: ignore[attr-defined]
