"""A DR broker whose own memory is full stalls the purge with every queue below its mark; the probe sees it.

Each queue's memory limit is a share of the broker's, and ActiveMQ's store cursor stops paging
a queue in when the broker's memory is full, whatever the queue's own share. This runs a real
DR broker whose heap (so its memory limit, 70 % of it) is smaller than one synced queue's
limit, as a DR instance type chosen too small for its queues would be, and fills that queue.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from brokersync.broker.statistics import CURSOR_HIGH_WATER_PERCENT, StatisticsClient
from brokersync.broker.stomp import StompConnector
from brokersync.health import (
    DR_BROKER_MEMORY_ALARM_PERCENT,
    DR_QUEUE_MEMORY_ALARM_PERCENT,
)
from brokersync.topology import load_topology
from brokersync_local.world import LocalWorld, WorldPorts
from tests.integration.stomp_helpers import produce, receive
from tests.ports import shifted_ports

pytestmark = pytest.mark.broker

PORTS = shifted_ports(
    WorldPorts(primary_openwire=61886, primary_stomp=61883, dr_openwire=62886, dr_stomp=62883, aws=5285)
)
#: 70 % of it is about 45 MB, a third of the default topology's 128 MB queue limit.
SMALL_DR_HEAP = "64m"
BODY = "x" * 8192
QUEUE = "ORDERS"


@pytest.fixture(scope="module")
def small_dr(tmp_path_factory: pytest.TempPathFactory, topology_path: Path) -> Iterator[StompConnector]:
    world = LocalWorld(load_topology(topology_path), tmp_path_factory.mktemp("small-dr"), PORTS)
    world.brokers["dr"].heap = SMALL_DR_HEAP
    world.up(timeout_s=90, log=lambda _msg: None)
    try:
        yield StompConnector(world.topology.dr.stomp)
    finally:
        world.destroy()


def test_a_full_dr_broker_hides_a_queues_tail_from_selectors_while_the_queue_is_below_its_alarm(
    small_dr: StompConnector,
) -> None:
    statistics = StatisticsClient(small_dr)
    used = 0
    for _batch in range(20):  # at most 20 x 500 x 8 KB = 80 MB, well past the broker's 45 MB
        produce(small_dr, QUEUE, [(BODY, {"correlation-id": str(uuid.uuid4())}) for _ in range(500)])
        before, used = used, statistics.snapshot([QUEUE]).broker.memory_percent
        if used <= before:  # full: the cursor no longer pages new messages in (ActiveMQ reads 98-100 %)
            break
    tail = str(uuid.uuid4())
    produce(small_dr, QUEUE, [(BODY, {"correlation-id": tail})])

    snapshot = statistics.snapshot([QUEUE])

    assert snapshot.broker.memory_percent >= DR_BROKER_MEMORY_ALARM_PERCENT
    assert snapshot.queues[QUEUE].memory_percent < DR_QUEUE_MEMORY_ALARM_PERCENT < CURSOR_HIGH_WATER_PERCENT
    # What the broker alarm warns of: the purge's selector does not reach the tail, and what it
    # passes over is not delivered (the queue keeps every message).
    assert receive(small_dr, QUEUE, 1, timeout_s=3, selector=f"JMSCorrelationID = '{tail}'") == []
    assert statistics.snapshot([QUEUE]).queues[QUEUE].size == snapshot.queues[QUEUE].size
