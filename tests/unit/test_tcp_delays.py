"""Connections that wait on each exchange (statistics reads, browses, removals) turn TCP's delays off.

Nagle's algorithm holds a small write while the one before is unacknowledged, and Linux delays
that acknowledgement up to 40 ms on a side with nothing to send: a statistics read took ~50 ms
instead of ~8, a removal call ~45 ms instead of ~2 (decision 0052).
"""

from __future__ import annotations

import socket
from typing import Any

import pytest

from brokersync.broker.statistics import StatisticsClient
from brokersync.exceptions import BrokerUnavailableError
from brokersync.snapshot.browser import QueueBrowser
from brokersync.topology import Queue
from tests.unit.test_stomp_receive import _OptionsSocket

NO_DELAY = (socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


class _SilentConnection:
    """Connected, takes every frame, and never answers: the callers time out, as on a dead broker."""

    def __init__(self) -> None:
        self.transport = type("Transport", (), {})()
        self.transport.socket = _OptionsSocket()

    def subscribe(self, *_args: Any, **_kwargs: Any) -> None: ...

    def send(self, *_args: Any, **_kwargs: Any) -> None: ...

    def disconnect(self) -> None: ...


class _Connector:
    def __init__(self) -> None:
        self.connections: list[_SilentConnection] = []

    def connect(self, *_args: Any, **_kwargs: Any) -> _SilentConnection:
        self.connections.append(_SilentConnection())
        return self.connections[-1]

    def describe(self) -> str:
        return "silent:61613"


def test_a_statistics_read_writes_its_queries_without_nagle() -> None:
    connector = _Connector()

    with pytest.raises(BrokerUnavailableError):
        StatisticsClient(connector, timeout_s=0.01).snapshot(["ORDERS", "PAYMENTS"])  # type: ignore[arg-type]

    assert NO_DELAY in connector.connections[0].transport.socket.options


def test_a_browse_takes_its_frames_without_the_delayed_ack() -> None:
    connector = _Connector()

    with pytest.raises(BrokerUnavailableError):
        list(QueueBrowser(connector, idle_timeout_s=0.01).lines(Queue(name="ORDERS", mode="sync")))  # type: ignore[arg-type]

    assert NO_DELAY in connector.connections[0].transport.socket.options
