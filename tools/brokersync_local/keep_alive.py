"""Stand-in fix: the local AWS endpoint keeps HTTP connections open between requests, as AWS does.

moto's server is werkzeug's development server, which answers every request with
``Connection: close``. Every boto3 call of the relay, the purge and the functions therefore
opened a new TCP connection, and the endpoint started a thread for each: a wait AWS does
not have (botocore keeps its connections to a service endpoint open and reuses them). In
the sync bench at 500 msg/s, keeping them open left the relay's and the purge's CPU within
the runs' spread; lag p99 was lower in 5 of 6 runs (decision 0019).

werkzeug closes because Python's ``http.server`` cannot skip a request body the application
left unread before the next request line; after each response it also reads whatever else
arrives on the socket within 10 ms and discards it, which on a kept connection would be the
client's next request. This handler reads each body whole first (its ``Content-Length`` says
how long it is) and hands the application that copy, so nothing is left to discard: for that
request the discarding is skipped, and HTTP/1.1 keeps the connection. A request without a
length (chunked), or whose body was not read whole, is answered as before: discarded after,
and the connection closed. An idle connection is closed
after ``IDLE_TIMEOUT_S``. werkzeug's minor release is pinned in ``pyproject.toml``, and
``tests/integration/test_local_endpoint_keep_alive.py`` holds the behaviour.
"""

from __future__ import annotations

import io
import selectors
import threading
from types import SimpleNamespace
from typing import Any

import moto.server
import werkzeug.serving
from moto.moto_server.werkzeug_app import MotoRequestHandler

#: How long an idle kept-alive connection holds its server thread (botocore reconnects after).
IDLE_TIMEOUT_S = 120
#: Whether the request this server thread is answering had its body read whole. werkzeug looks
#: up its discard step's selector on the same thread, after the response.
_this_request = threading.local()


def _body_read_whole() -> bool:
    return getattr(_this_request, "body_read_whole", False)


class KeepAliveRequestHandler(MotoRequestHandler):
    """moto's request handler, keeping the connection when the request body was read whole."""

    timeout = IDLE_TIMEOUT_S
    #: werkzeug writes a response's headers and body apart; on a kept connection Nagle's
    #: algorithm would hold the body until the client's delayed ACK (some 40 ms a request).
    disable_nagle_algorithm = True

    def make_environ(self) -> dict[str, Any]:
        environ = super().make_environ()
        _this_request.body_read_whole = False
        if "chunked" in environ.get("HTTP_TRANSFER_ENCODING", "").lower():
            return environ
        try:
            length = int(environ.get("CONTENT_LENGTH") or 0)
        except ValueError:
            return environ
        body = self.rfile.read(length) if length > 0 else b""
        environ["wsgi.input"] = io.BytesIO(body)
        environ["CONTENT_LENGTH"] = str(len(body))
        _this_request.body_read_whole = length >= 0 and len(body) == length
        return environ

    def send_header(self, keyword: str, value: str) -> None:
        # werkzeug sends "Connection: close" on every response; keep the connection instead when
        # the body was consumed and the client did not ask to close (HTTP/1.1's default).
        closing = keyword.lower() == "connection" and value.lower() == "close"
        if closing and _body_read_whole() and not self.close_connection:
            return
        super().send_header(keyword, value)


class _NothingToDiscard:
    """What werkzeug's post-response discard loop sees after a body read whole: never any data."""

    def register(self, *_: object) -> None:
        pass

    def select(self, timeout: float | None = None) -> list[object]:
        return []

    def close(self) -> None:
        pass


def _discard_selector() -> _NothingToDiscard | selectors.BaseSelector:
    """werkzeug's own selector, unless this thread's request body was read whole (nothing left)."""
    if _body_read_whole():
        return _NothingToDiscard()
    return selectors.DefaultSelector()


def install() -> None:
    """Make ``moto.server.main`` serve with :class:`KeepAliveRequestHandler`."""
    werkzeug.serving.selectors = SimpleNamespace(  # type: ignore[attr-defined]
        DefaultSelector=_discard_selector, EVENT_READ=selectors.EVENT_READ
    )
    moto.server.MotoRequestHandler = KeepAliveRequestHandler  # type: ignore[misc]
