"""Frames read over TLS, as every Amazon MQ connection reads them, and by a paced reader, arrive whole and in order.

stomp.py's TLS transport is non-blocking: a read can end mid-frame, and the receive loop
(decision 0035) must carry the rest over to the next. The broker here speaks plain STOMP on
loopback, so a TLS terminator with a certificate of its own stands in front of it. A paced
reader (the relay's, decision 0050) sleeps after each read that emptied its socket, and must
then take everything that came meanwhile, on either kind of socket.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import stomp

from brokersync.broker.inbox import DISCONNECTED, FrameInbox
from brokersync.broker.stomp import StompConnector
from brokersync.broker.stomp_receive import pace_reads
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


def _connection(
    kind: str, tls_proxy: tuple[int, Path], primary: StompConnector, inbox: FrameInbox
) -> stomp.Connection12:
    """A connection to the primary, bodies left as bytes: plain, or TLS through the terminator."""
    if kind == "plain":
        connection = stomp.Connection12(
            [(e.host, e.port) for e in primary.endpoints], heartbeats=(10_000, 10_000), auto_decode=False
        )
    else:
        port, cert = tls_proxy
        connection = stomp.Connection12([("127.0.0.1", port)], heartbeats=(10_000, 10_000), auto_decode=False)
        connection.set_ssl(for_hosts=[("127.0.0.1", port)], ca_certs=str(cert))
    connection.set_listener("test", inbox)
    connection.connect(wait=True)
    # stomp.py's TLS transport is the non-blocking one: the path under test there
    assert connection.transport.blocking is (kind == "plain")
    return connection


def _receive(connection: stomp.Connection12, inbox: FrameInbox, count: int, timeout_s: float) -> list[bytes]:
    """Up to ``count`` bodies from the queue, acked one by one, within ``timeout_s``."""
    received: list[bytes] = []
    connection.subscribe(
        f"/queue/{QUEUE}", id="read", ack="client-individual", headers={"activemq.prefetchSize": "500"}
    )
    deadline = time.monotonic() + timeout_s
    while len(received) < count and time.monotonic() < deadline:
        for frame in inbox.take(500, 1.0):
            assert frame is not DISCONNECTED, "the connection dropped"
            assert isinstance(frame, stomp.utils.Frame)
            received.append(frame.body)
            connection.ack(frame.headers["ack"])
    return received


def _read_back(
    kind: str, tls_proxy: tuple[int, Path], primary: StompConnector, bodies: list[bytes], pause_s: float | None = None
) -> tuple[list[bytes], float]:
    """Send ``bodies`` to the queue, read them back over a ``kind`` connection (paced by ``pause_s``,
    if given): what was read, and how long the reading took."""
    produce(primary, QUEUE, [(body, {}) for body in bodies])  # type: ignore[misc]
    inbox = FrameInbox()
    connection = _connection(kind, tls_proxy, primary, inbox)
    if pause_s is not None:
        pace_reads(connection, pause_s)
    started = time.monotonic()
    try:
        return _receive(connection, inbox, len(bodies), timeout_s=60), time.monotonic() - started
    finally:
        connection.disconnect()


def test_messages_read_over_tls_arrive_whole_and_in_order(tls_proxy: tuple[int, Path], primary: StompConnector) -> None:
    bodies = _bodies()

    received, _ = _read_back("tls", tls_proxy, primary, bodies)

    assert received == bodies


@pytest.mark.parametrize("kind", ["plain", "tls"])
def test_a_paced_reader_gets_every_frame_whole_and_in_order(
    kind: str, tls_proxy: tuple[int, Path], primary: StompConnector
) -> None:
    bodies = _bodies()

    received, _ = _read_back(kind, tls_proxy, primary, bodies, pause_s=0.05)

    assert received == bodies


@pytest.mark.parametrize("kind", ["plain", "tls"])
def test_a_paced_reader_behind_its_broker_is_not_held_to_a_read_per_pause(
    kind: str, tls_proxy: tuple[int, Path], primary: StompConnector
) -> None:
    """8 MB waiting: at one 16 KB receive per 0.2 s pause that would take 100 s; reads that empty
    the socket, and no pause after one that stopped at its bound, take it in seconds."""
    bodies = [f"{i:08d}".encode() * 1024 for i in range(1000)]

    received, took_s = _read_back(kind, tls_proxy, primary, bodies, pause_s=0.2)

    assert received == bodies
    assert took_s < 30
