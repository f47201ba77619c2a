"""Frames read over TLS, as every Amazon MQ connection reads them, arrive whole and in order.

stomp.py's TLS transport is non-blocking: a read can end mid-frame, and the receive loop
(decision 0035) must carry the rest over to the next. The broker here speaks plain STOMP on
loopback, so a TLS terminator with a certificate of its own stands in front of it.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import stomp

from brokersync.broker.inbox import DISCONNECTED, FrameInbox
from brokersync.broker.stomp import StompConnector
from brokersync_local.tls import TlsTerminator, local_tls
from tests.integration.stomp_helpers import produce

pytestmark = pytest.mark.broker

QUEUE = "ORDERS"


@pytest.fixture
def tls_proxy(tmp_path: Path, primary: StompConnector) -> Iterator[tuple[int, Path]]:
    """A TLS listener on loopback that forwards each connection to the primary's plain STOMP port."""
    tls = local_tls(tmp_path)
    with TlsTerminator(tls, primary.endpoints[0].port) as terminator:
        yield terminator.port, tls.certificate


def _bodies() -> list[bytes]:
    """Small, large (several TLS records) and NUL-holding bodies (cut by their content length)."""
    return [
        (f"message {i} ".encode() * (1 + (i * 37) % 400)) + (b"\x00tail\x00" if i % 5 == 0 else b"") for i in range(300)
    ]


def test_messages_read_over_tls_arrive_whole_and_in_order(tls_proxy: tuple[int, Path], primary: StompConnector) -> None:
    port, cert = tls_proxy
    bodies = _bodies()
    produce(primary, QUEUE, [(body, {}) for body in bodies])  # type: ignore[misc]
    inbox = FrameInbox()
    connection = stomp.Connection12([("127.0.0.1", port)], heartbeats=(10_000, 10_000), auto_decode=False)
    connection.set_ssl(for_hosts=[("127.0.0.1", port)], ca_certs=str(cert))
    connection.set_listener("tls-test", inbox)
    connection.connect(wait=True)
    assert connection.transport.blocking is False  # stomp.py's TLS transport: the path under test
    received: list[bytes] = []
    try:
        connection.subscribe(
            f"/queue/{QUEUE}", id="tls", ack="client-individual", headers={"activemq.prefetchSize": "500"}
        )
        deadline = time.monotonic() + 60
        while len(received) < len(bodies) and time.monotonic() < deadline:
            for frame in inbox.take(500, 1.0):
                assert frame is not DISCONNECTED, "the TLS connection dropped"
                assert isinstance(frame, stomp.utils.Frame)
                received.append(frame.body)
                connection.ack(frame.headers["ack"])
    finally:
        connection.disconnect()

    assert received == bodies
