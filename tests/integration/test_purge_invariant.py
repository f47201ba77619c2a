"""The one invariant: the purge never touches a message that was not consumed on the primary.

A property test over random interleavings of produce, consume, capture and purge on the
real pair: whatever the order, every message still on the primary is still on DR once the
copy has settled, nothing the purge received was outside its selector (it would raise),
and no DR message carries a redelivery flag.
"""

from __future__ import annotations

import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from brokersync.broker.statistics import StatisticsClient
from brokersync.broker.stomp import StompConnector
from brokersync.capture.relay import AdvisoryRelay, RelaySettings
from brokersync.capture.writer import LedgerWriter
from brokersync.client import send
from brokersync.ledger import memory_ledger
from brokersync.purge.remover import SelectorRemover
from brokersync.purge.service import PurgeService
from brokersync.topology import CONSUMED_QUEUE, Topology
from brokersync_local.browsing import browse
from tests.integration.stomp_helpers import drain, receive

pytestmark = pytest.mark.broker

operations = st.lists(
    st.one_of(
        st.tuples(st.just("produce"), st.integers(1, 15)),
        st.tuples(st.just("consume"), st.integers(1, 15)),
        st.tuples(st.just("capture"), st.just(0)),
        st.tuples(st.just("purge"), st.just(0)),
    ),
    min_size=3,
    max_size=10,
)


def _settle_copy(primary_stats: StatisticsClient, topology: Topology) -> None:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        backlog = primary_stats.queue_stats([topology.dr_name("ORDERS")]).get(topology.dr_name("ORDERS"))
        if backlog is None or backlog.size == 0:
            return
        time.sleep(0.1)
    raise AssertionError("the copy did not settle")


@settings(max_examples=5, deadline=None, suppress_health_check=list(HealthCheck))
@given(steps=operations)
def test_whatever_the_interleaving_nothing_unconsumed_leaves_dr(
    steps: list[tuple[str, int]], topology: Topology, primary: StompConnector, dr: StompConnector
) -> None:
    for connector in (primary, dr):
        drain(connector, "ORDERS")
    drain(primary, CONSUMED_QUEUE, transformation="jms-advisory-json")
    ledger = memory_ledger()
    relay = AdvisoryRelay(primary, LedgerWriter(ledger), topology, settings=RelaySettings(flush_interval_s=0.05))
    purge = PurgeService(ledger, SelectorRemover(dr), topology)
    connection = primary.connect(name="property-producer")
    try:
        for step, count in steps:
            if step == "produce":
                for _ in range(count):
                    send(connection, "ORDERS", "property")
            elif step == "consume":
                receive(primary, "ORDERS", count, timeout_s=0.5)
            elif step == "capture":
                relay.run(max_seconds=0.5)
            else:
                purge.purge_queue("ORDERS")
    finally:
        connection.disconnect()
    _settle_copy(StatisticsClient(primary), topology)
    relay.run(max_seconds=0.5)
    purge.purge_queue("ORDERS")

    on_primary = {f.headers["correlation-id"] for f in browse(primary, "ORDERS")}
    on_dr = browse(dr, "ORDERS")
    assert on_primary <= {f.headers["correlation-id"] for f in on_dr}
    assert all(f.headers.get("redelivered", "false") == "false" for f in on_dr)
