"""stomp.py's frame parser without its two regular expressions, for frames whose header block has no ``\\r``.

Why: after the header parser (:mod:`brokersync.broker.stomp_headers`), splitting a received
frame into command, header lines and body was the next largest piece of stomp.py on the
relay's profile: a regular-expression search for the blank line, then a regular-expression
split of the header block into lines (decision 0020). ActiveMQ ends its lines with ``\\n``.
Without a ``\\r`` before the first blank line, the first ``\\n\\n`` is where stomp.py's
``\\n\\n|\\r\\n\\r\\n`` search stops, and splitting on ``\\n`` gives its ``\\n|\\r\\n`` split's
lines; a frame with a ``\\r`` there goes to stomp.py's own parser. A property test holds the
two equal on any bytes.

:func:`install` puts it where stomp.py's transport looks it up, only on the stomp.py major
version it was checked against, and only in place of stomp.py's own function.
"""

from __future__ import annotations

import stomp
import stomp.transport
import stomp.utils

from brokersync.broker.stomp_headers import checked_release, parse_headers

#: stomp.py's own parser: the fallback, and what the equivalence test compares with.
STOMP_PY_PARSE_FRAME = stomp.utils.parse_frame


def parse_frame(frame: bytes) -> stomp.utils.Frame | None:
    """A received frame (without its NUL) → ``Frame``, exactly as ``stomp.utils.parse_frame`` returns it."""
    blank = frame.find(b"\n\n")
    preamble = frame if blank < 0 else frame[:blank]
    if b"\r" in preamble:
        return STOMP_PY_PARSE_FRAME(frame)
    lines = preamble.decode("utf-8", errors="replace").split("\n")
    first = 0
    while first < len(lines) and not lines[first]:
        first += 1
    if first >= len(lines):
        return None
    body = frame[blank + 2 :] if blank >= 0 else b""
    return stomp.utils.Frame(lines[first], parse_headers(lines, first + 1), body)


def install() -> bool:
    """Use :func:`parse_frame` in stomp.py's transport; whether it is in place."""
    if stomp.transport.parse_frame is parse_frame:
        return True
    if not checked_release() or stomp.transport.parse_frame is not STOMP_PY_PARSE_FRAME:
        return False
    stomp.transport.parse_frame = parse_frame  # type: ignore[attr-defined]
    return True
