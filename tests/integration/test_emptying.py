"""The broker tests' clean-up itself: what it promises the next test, on the real pair."""

from __future__ import annotations

import pytest

from brokersync.broker.statistics import StatisticsClient
from brokersync.broker.stomp import StompConnector
from brokersync.topology import CONSUMED_QUEUE, Topology
from tests.emptying import empty_pair
from tests.integration.stomp_helpers import produce, receive

pytestmark = pytest.mark.broker


def _held(topology: Topology) -> dict[str, int]:
    names = [*(q.name for q in topology.queues), topology.dr_name("ORDERS"), CONSUMED_QUEUE]
    held = {}
    for broker in topology.brokers:
        for name, stats in StatisticsClient(StompConnector(broker.stomp)).queue_stats(names).items():
            if stats.size:
                held[f"{broker.name}/{name}"] = stats.size
    return held


def test_emptying_takes_the_messages_their_copies_and_the_advisories_taking_them_raised(
    topology: Topology, primary: StompConnector
) -> None:
    produce(primary, "ORDERS", [(f"order {n}", {"correlation-id": f"01JEMPTY{n:018d}"}) for n in range(5)])
    receive(primary, "ORDERS", 2)  # two consumed: their advisories wait in BROKERSYNC.CONSUMED

    empty_pair(topology)

    assert _held(topology) == {}


def test_a_read_the_broker_refuses_fails_rather_than_reading_as_an_empty_queue(primary: StompConnector) -> None:
    with pytest.raises(AssertionError, match="refused"):
        receive(primary, "ActiveMQ.DLQ", 1, timeout_s=0.2)  # no group of ours may read the customer's DLQ
