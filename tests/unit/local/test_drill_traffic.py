"""The drill's producer spreads its sends with receipts over as many connections as its rate needs;
the log counts only what the drill sent."""

from __future__ import annotations

import time
from typing import Any

from brokersync_local.drill_traffic import RATE_PER_CONNECTION, Producer, TrafficLog


class Connection:
    def __init__(self) -> None:
        self.sent: list[dict[str, str]] = []

    def send(self, destination: str, body: str, headers: dict[str, str]) -> None:
        self.sent.append(headers)

    def disconnect(self) -> None:
        pass


class Connector:
    """A broker that accepts every connection and keeps what each carried."""

    def __init__(self) -> None:
        self.connections: list[Connection] = []

    def connect(self, listener: Any, name: str) -> Connection:
        self.connections.append(Connection())
        return self.connections[-1]


def _produce(rate: float, seconds: float = 0.3) -> Connector:
    connector = Connector()
    producer = Producer("ORDERS", TrafficLog(), rate=rate)
    producer.start()
    producer.move_to("orders-use1", connector)  # type: ignore[arg-type]
    time.sleep(seconds)
    producer.stop()
    return connector


def test_a_drill_at_the_usual_rates_produces_over_one_connection() -> None:
    connector = _produce(RATE_PER_CONNECTION)

    assert len(connector.connections) == 1
    assert connector.connections[0].sent


def test_a_drill_at_1000_msg_s_spreads_its_sends_evenly_over_four_connections() -> None:
    connector = _produce(1000)

    counts = [len(c.sent) for c in connector.connections]
    assert len(counts) == 4
    assert min(counts) > 0
    assert max(counts) - min(counts) <= 1


def test_every_send_asks_for_a_receipt_named_after_its_key() -> None:
    connector = _produce(1000)

    sent = [headers for c in connector.connections for headers in c.sent]
    assert sent
    assert all(h["receipt"] == h["correlation-id"] and h["persistent"] == "true" for h in sent)


def test_a_caller_may_choose_the_connections() -> None:
    assert Producer("ORDERS", TrafficLog(), rate=1000, connections=2).connections == 2


def test_a_message_the_drill_did_not_send_is_not_counted_even_when_consumed_twice() -> None:
    log = TrafficLog()
    log.sent["01SENT"] = 1.0
    log.consumed["01SENT"] = [("orders-use1", 2.0)]
    log.consumed["01LEFT-BY-THE-WARM-UP"] = [("orders-use1", 2.0), ("orders-usw2", 3.0)]

    assert log.brokers_consumed_on() == {"01SENT": {"orders-use1"}}
