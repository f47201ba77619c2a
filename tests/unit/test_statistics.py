"""The statistics plugin's reply, as a real ActiveMQ 5.17 broker sends it, read into QueueStats."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from brokersync.broker.statistics import StatisticsClient, _broker_from_map, _stats_from_map
from brokersync.exceptions import BrokerUnavailableError

#: Fields of one reply for a DR queue holding 32,662 1 KB messages under a 384 MB limit.
REPLY = {
    "dequeueCount": 14998,
    "averageMessageSize": 2048,
    "brokerId": "ID:vm-40085-1795569497406-0:1",
    "memoryUsage": 66891776,
    "consumerCount": 0,
    "memoryPercentUsage": 16,
    "expiredCount": 0,
    "inflightCount": 0,
    "dispatchCount": 14998,
    "size": 32662,
    "destinationName": "queue://BENCH.SYNC",
    "memoryLimit": 402653184,
    "brokerName": "orders-usw2",
    "enqueueCount": 47660,
}


def test_a_queues_memory_use_is_read_in_percent_of_its_limit() -> None:
    stats = _stats_from_map(REPLY)

    assert (stats.name, stats.size, stats.memory_percent) == ("BENCH.SYNC", 32662, 16)


def test_a_reply_without_memory_figures_reads_as_no_memory_in_use() -> None:
    reply = {k: v for k, v in REPLY.items() if not k.startswith("memory")}

    assert _stats_from_map(reply).memory_percent == 0


#: Fields of the broker-level reply (ActiveMQ.Statistics.Broker): no destinationName, the broker's usage.
BROKER_REPLY = {
    "brokerId": "ID:vm-40085-1795569497406-0:1",
    "brokerName": "orders-usw2",
    "size": 100000,
    "memoryPercentUsage": 101,
    "memoryUsage": 188743680,
    "memoryLimit": 187904819,
    "storePercentUsage": 3,
    "tempPercentUsage": 0,
}


def test_the_broker_level_reply_is_read_as_the_brokers_own_usage() -> None:
    broker = _broker_from_map(BROKER_REPLY)

    assert (broker.broker_name, broker.memory_percent, broker.store_percent, broker.temp_percent) == (
        "orders-usw2",
        101,
        3,
        0,
    )


def test_a_broker_that_closes_under_a_statistics_query_is_unavailable_not_a_crash() -> None:
    """A reboot closes the socket between CONNECTED and the query's frames; the caller retries."""

    def reset(*_args: object, **_kwargs: object) -> None:
        raise BrokenPipeError(32, "Broken pipe")

    connection = SimpleNamespace(transport=SimpleNamespace(socket=None), subscribe=reset, send=reset, disconnect=reset)
    client = StatisticsClient(SimpleNamespace(connect=lambda *_a, **_k: connection, describe=lambda: "dr"))  # type: ignore[arg-type]

    with pytest.raises(BrokerUnavailableError, match="statistics were asked for"):
        client.queue_stats(["ORDERS"])
