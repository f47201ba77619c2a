"""Queue counters over STOMP, through ActiveMQ's statistics plugin.

Amazon MQ exposes neither JMX nor Jolokia to us, but it allows ``<statisticsBrokerPlugin/>``,
which answers a message sent to ``ActiveMQ.Statistics.Destination.<name>`` with a map of
that destination's counters. The relay uses the primary's dequeue counters to detect lost
advisories, the purge loop reads DR depth, and ``sync status`` shows both.

Unknown destinations get no reply at all. So the queries are followed by one broker-level
query on the same connection: the broker answers in order, and when that last reply
arrives every queue that exists has answered. That last reply carries the broker's own
memory, store and temp usage, which the health probe reads (``snapshot``).
"""

from __future__ import annotations

import contextlib
import json
import queue as queue_mod
import time
from dataclasses import dataclass
from typing import Any

import stomp

from brokersync.broker.stomp import CONNECTION_LOST, StompConnector, unavailable_if_lost, without_tcp_delays
from brokersync.exceptions import BrokerUnavailableError

DESTINATION_PREFIX = "ActiveMQ.Statistics.Destination."
BROKER_DESTINATION = "ActiveMQ.Statistics.Broker"
_REPLY_TO = "/temp-queue/brokersync.statistics"
#: ActiveMQ's store cursor high-water mark: at this much of its memory limit a queue stops paging in.
CURSOR_HIGH_WATER_PERCENT = 70
#: At this much of the broker's memory limit every queue on it stops paging in (and producers block).
BROKER_MEMORY_FULL_PERCENT = 100


@dataclass(frozen=True, slots=True)
class QueueStats:
    """A queue's counters since the broker started (``broker_id`` changes at every start)."""

    name: str
    size: int
    enqueue_count: int
    dequeue_count: int
    dispatch_count: int
    expired_count: int
    inflight_count: int
    consumer_count: int
    broker_id: str
    broker_name: str
    #: How full the queue's memory limit is, in percent. ActiveMQ stops paging the queue in from
    #: its store at the cursor's high-water mark (70 %): messages behind that point are
    #: invisible to consumers, the purge's selectors included.
    memory_percent: int = 0


@dataclass(frozen=True, slots=True)
class BrokerStats:
    """The broker's own usage, from the broker-level reply that ends every query.

    Each queue's memory limit is a child of the broker's: a queue stops paging in from its
    store when the broker's memory is full (100 %), whatever its own share, so a deep
    backlog can stall the purge with every queue under its own high-water mark.
    """

    broker_id: str
    broker_name: str
    memory_percent: int
    store_percent: int
    temp_percent: int


@dataclass(frozen=True, slots=True)
class StatisticsSnapshot:
    """One query's answer: the named queues that exist, and the broker they are on."""

    queues: dict[str, QueueStats]
    broker: BrokerStats


def parse_map_message(body: str) -> dict[str, Any]:
    """Flatten the ``jms-map-json`` (XStream) encoding of a MapMessage into a dict."""
    document = json.loads(body)
    entries = document.get("map", {}).get("entry", [])
    if isinstance(entries, dict):
        entries = [entries]
    result: dict[str, Any] = {}
    for entry in entries:
        key = entry.get("string")
        if isinstance(key, list):  # a string value: {"string": [key, value]}
            result[key[0]] = key[1] if len(key) > 1 else ""
            continue
        values = [v for k, v in entry.items() if k != "string"]
        result[str(key)] = values[0] if values else None
    return result


def _stats_from_map(values: dict[str, Any]) -> QueueStats:
    return QueueStats(
        name=str(values["destinationName"]).removeprefix("queue://"),
        size=int(values.get("size", 0)),
        enqueue_count=int(values.get("enqueueCount", 0)),
        dequeue_count=int(values.get("dequeueCount", 0)),
        dispatch_count=int(values.get("dispatchCount", 0)),
        expired_count=int(values.get("expiredCount", 0)),
        inflight_count=int(values.get("inflightCount", 0)),
        consumer_count=int(values.get("consumerCount", 0)),
        broker_id=str(values.get("brokerId", "")),
        broker_name=str(values.get("brokerName", "")),
        memory_percent=int(values.get("memoryPercentUsage", 0)),
    )


def _broker_from_map(values: dict[str, Any]) -> BrokerStats:
    return BrokerStats(
        broker_id=str(values.get("brokerId", "")),
        broker_name=str(values.get("brokerName", "")),
        memory_percent=int(values.get("memoryPercentUsage", 0)),
        store_percent=int(values.get("storePercentUsage", 0)),
        temp_percent=int(values.get("tempPercentUsage", 0)),
    )


class _Replies(stomp.ConnectionListener):
    def __init__(self) -> None:
        self.frames: queue_mod.Queue[stomp.utils.Frame] = queue_mod.Queue()

    def on_message(self, frame: stomp.utils.Frame) -> None:
        self.frames.put(frame)


class StatisticsClient:
    """Reads queue counters from one broker; needs ``statisticsBrokerPlugin`` in its configuration."""

    def __init__(self, connector: StompConnector, timeout_s: float = 5.0) -> None:
        self.connector = connector
        self.timeout_s = timeout_s

    def queue_stats(self, names: list[str]) -> dict[str, QueueStats]:
        """Counters of each named queue that exists on the broker (absent ones are simply missing)."""
        return self._query(names, set(names)).queues

    def snapshot(self, names: list[str]) -> StatisticsSnapshot:
        """The named queues' counters and the broker's own usage, from one connection."""
        return self._query(names, set(names))

    def all_queue_stats(self) -> dict[str, QueueStats]:
        """Counters of every queue on the broker (``>`` matches them all)."""
        return self._query([">"], None).queues

    def _query(self, patterns: list[str], wanted: set[str] | None) -> StatisticsSnapshot:
        replies = _Replies()
        connection = self.connector.connect(replies, name="brokersync-statistics")
        # A SUBSCRIBE and a SEND per pattern, written apart: with Nagle on, each waited for the
        # broker's delayed ACK of the one before, and a read took ~50 ms instead of ~8 (decision 0052).
        without_tcp_delays(connection)
        try:
            with unavailable_if_lost("statistics were asked for"):  # a broker rebooting under the query
                connection.subscribe(_REPLY_TO, id="stats", ack="auto", headers={"transformation": "jms-map-json"})
                for pattern in patterns:
                    connection.send(DESTINATION_PREFIX + pattern, "", headers={"reply-to": _REPLY_TO})
                connection.send(BROKER_DESTINATION, "", headers={"reply-to": _REPLY_TO})
            return self._collect(replies, wanted)
        finally:
            with contextlib.suppress(*CONNECTION_LOST):  # closed already: nothing to say goodbye to
                connection.disconnect()

    def _collect(self, replies: _Replies, wanted: set[str] | None) -> StatisticsSnapshot:
        found: dict[str, QueueStats] = {}
        deadline = time.monotonic() + self.timeout_s
        while (remaining := deadline - time.monotonic()) > 0:
            try:
                frame = replies.frames.get(timeout=remaining)
            except queue_mod.Empty:
                break
            values = parse_map_message(frame.body)
            destination = str(values.get("destinationName", ""))
            if not destination:  # the broker-level reply: every existing queue has answered
                return StatisticsSnapshot(found, _broker_from_map(values))
            if destination.startswith("queue://"):
                stats = _stats_from_map(values)
                if wanted is None or stats.name in wanted:
                    found[stats.name] = stats
        raise BrokerUnavailableError(
            f"{self.connector.describe()} did not answer statistics queries within {self.timeout_s}s "
            "(is statisticsBrokerPlugin in its configuration?)"
        )
