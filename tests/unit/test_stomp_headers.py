"""The header parser installed into stomp.py returns exactly what stomp.py's own returns."""

from __future__ import annotations

import stomp
import stomp.utils
from hypothesis import given
from hypothesis import strategies as st

import brokersync.broker.stomp  # noqa: F401  (installs the parser, as every connection's module does)
from brokersync.broker import stomp_headers
from brokersync.broker.stomp_headers import STOMP_PY_PARSE_HEADERS, parse_headers

#: Text rich in what header parsing treats specially: separators, escapes, unknown escapes.
_PIECES = [*":\\cnrt \r\n\tID-é0", "\\c", "\\\\", "\\n", "\\r", "\\t"]
_TEXT = st.one_of(st.lists(st.sampled_from(_PIECES), max_size=20).map("".join), st.text(max_size=20))
_LINE = st.one_of(_TEXT, st.tuples(_TEXT, _TEXT).map(lambda kv: f"{kv[0]}:{kv[1]}"))


@given(lines=st.lists(_LINE, max_size=12), offset=st.integers(min_value=0, max_value=3))
def test_any_header_lines_parse_as_stomp_py_parses_them(lines: list[str], offset: int) -> None:
    assert parse_headers(lines, offset) == STOMP_PY_PARSE_HEADERS(lines, offset)


def test_importing_the_connection_module_puts_it_in_stomp_py_s_frame_parser() -> None:
    assert stomp.utils.parse_headers is parse_headers


def test_an_activemq_message_frame_parses_with_its_escapes_undone() -> None:
    frame = stomp.utils.parse_frame(
        b"MESSAGE\nmessage-id:ID\\cdr-1-1\\c1\\c1\\c1\\c7\nack:ID\\cdr-1-1\\c1\\c1\\c1\\c7\n"
        b"destination:/queue/orders\nbrokersync-detail:a\\\\b\\nc\nack:second\n\nbody"
    )

    assert frame.headers == {
        "message-id": "ID:dr-1-1:1:1:1:7",
        "ack": "ID:dr-1-1:1:1:1:7",
        "destination": "/queue/orders",
        "brokersync-detail": "a\\b\nc",
    }


def test_a_stomp_py_release_it_was_not_checked_against_is_left_alone(monkeypatch) -> None:
    monkeypatch.setattr(stomp.utils, "parse_headers", STOMP_PY_PARSE_HEADERS)
    monkeypatch.setattr(stomp, "__version__", "10.0.0")

    assert stomp_headers.install() is False
    assert stomp.utils.parse_headers is STOMP_PY_PARSE_HEADERS
