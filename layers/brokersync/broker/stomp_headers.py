"""stomp.py's header parsing without a regular-expression call per header that needs none.

Why: stomp.py 9 unescapes every header key and every value with ``re.sub``, escapes or not,
and an ActiveMQ advisory carries some twenty headers. Sampled with py-spy in the sync bench
(500 msg/s), that was about a quarter of the relay's CPU and an eighth of the purge's: the
largest single cost either has (decision 0016). Unescaping only a text that holds a
backslash gives the same result, since ``\\\\.`` cannot match without one; a property test
holds this parser equal to stomp.py's own on any input.

:func:`install` puts it in place of ``stomp.utils.parse_headers``, which stomp.py's frame
parser looks up on each call. It does so only on the stomp.py major version it was checked
against (the one ``pyproject.toml`` pins); on any other it leaves stomp.py as it is. The
right home for this is stomp.py itself.
"""

from __future__ import annotations

import re

import stomp
import stomp.utils

#: The stomp.py release line this parser was checked against (``pyproject.toml`` pins it).
CHECKED_MAJOR = "9"
#: stomp.py's own parser, kept for the equivalence test.
STOMP_PY_PARSE_HEADERS = stomp.utils.parse_headers

#: STOMP 1.2's header escapes, the backslash first (escaping in this order never escapes twice).
HEADER_ESCAPES = {"\\": "\\\\", "\n": "\\n", "\r": "\\r", ":": "\\c"}
_UNESCAPES = {escaped: char for char, escaped in HEADER_ESCAPES.items()}
_ESCAPE = re.compile(r"\\.")


def _unescape(match: re.Match[str]) -> str:
    escaped = match.group(0)
    return _UNESCAPES.get(escaped, escaped)  # stomp.py keeps an unknown escape as it came


def _unescaped(text: str) -> str:
    """``text`` with its STOMP escapes undone, as stomp.py's ``re.sub`` undoes them.

    ActiveMQ escapes the colons of every id it puts in a header, so most advisory frames have
    four or five such values. Without an escaped backslash, each backslash starts exactly one
    escape and no replacement makes a new one, so three ``str.replace`` give the same text as
    the regular expression with a Python call per match (decision 0020).
    """
    if "\\\\" in text:
        return _ESCAPE.sub(_unescape, text)
    return text.replace("\\c", ":").replace("\\n", "\n").replace("\\r", "\r")


def parse_headers(lines: list[str], offset: int = 0) -> dict[str, str]:
    """STOMP header lines → dict, as ``stomp.utils.parse_headers`` returns it (the first of a repeated key wins)."""
    headers: dict[str, str] = {}
    for line in lines[offset:]:
        # stomp.py's HEADER_LINE_RE, ``(?P<key>[^:]+)[:](?P<value>.*)``, without a regex: the
        # key runs to the first colon and may not be empty, the value to the end of the line
        # or a newline (``.``), which the frame parser's lines never hold. One ``partition``
        # per line is 40 % quicker than finding the colon and slicing twice.
        key, colon, value = line.partition(":")
        if not key or not colon:
            continue
        if "\\" in key:
            key = _unescaped(key)
        if key not in headers:
            if "\n" in value:
                value = value[: value.index("\n")]
            if "\\" in value:
                value = _unescaped(value)
            headers[key] = value
    return headers


def checked_release() -> bool:
    """Whether the stomp.py in use is the release line this module's replacements were checked against."""
    return stomp.__version__.split(".")[0] == CHECKED_MAJOR


def install() -> bool:
    """Use :func:`parse_headers` in stomp.py's frame parser; whether it is in place."""
    if stomp.utils.parse_headers is parse_headers:
        return True
    if not checked_release() or stomp.utils.parse_headers is not STOMP_PY_PARSE_HEADERS:
        return False
    stomp.utils.parse_headers = parse_headers
    return True
