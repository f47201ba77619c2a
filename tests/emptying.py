"""Leaving a real pair empty between broker tests, sized by the brokers' own counts.

A drain that stops at the first receive that comes back empty waits out that receive's
timeout on every queue it looks at, full or not: half a second for each of eight queues after
every broker test, about six seconds, more than many of the tests themselves. Taking exactly
the number of messages the statistics plugin reports costs one query when a queue is empty.
"""

from __future__ import annotations

import time

from brokersync.broker.statistics import StatisticsClient
from brokersync.broker.stomp import StompConnector
from brokersync.topology import CONSUMED_QUEUE, PARKED_QUEUE, Topology
from tests.integration.stomp_helpers import receive

#: Advisories are read as the relay reads them: a raw advisory has no STOMP body to convert.
TRANSFORMATIONS = {CONSUMED_QUEUE: "jms-advisory-json"}
#: One take waits this long for the messages the statistics counted (they are already stored).
TAKE_TIMEOUT_S = 5.0


def empty_pair(
    topology: Topology,
    queues: list[str] | None = None,
    *,
    timeout_s: float = 60.0,
    copies_timeout_s: float = 10.0,
) -> None:
    """Take every message on ``queues`` (default: the topology's) on both brokers, and what taking them leaves.

    Passes repeat until one finds nothing anywhere: taking from a captured queue raises
    consumed advisories (on their queue once the take's acks are confirmed), and a copy still
    in an outflow reaches the other broker after the pass that emptied the queue it came from.
    Copies that have not crossed within ``copies_timeout_s`` (a bridge a test left down) are
    taken where they wait. Raises when the pair is not empty within ``timeout_s``: a consumer a
    test left open still holds its prefetched messages, and the next test would inherit them.
    """
    names = list(queues) if queues is not None else [q.name for q in topology.queues]
    copies = list(dict.fromkeys(copy for name in names for copy in topology.copy_names(name)))
    takeable = [*names, CONSUMED_QUEUE, PARKED_QUEUE]
    started = time.monotonic()
    while True:
        took, in_flight, left = False, 0, {}
        stuck = time.monotonic() - started > copies_timeout_s
        for broker in topology.brokers:
            connector = StompConnector(broker.stomp)
            sizes = {n: s.size for n, s in StatisticsClient(connector).queue_stats(takeable + copies).items()}
            for name in takeable + (copies if stuck else []):
                if sizes.get(name, 0) > 0:
                    transformation = TRANSFORMATIONS.get(name)
                    receive(connector, name, sizes[name], timeout_s=TAKE_TIMEOUT_S, transformation=transformation)
                    took = True
            in_flight += sum(sizes.get(copy, 0) for copy in copies)
            left |= {f"{broker.name}/{n}": size for n, size in sizes.items() if size}
        if not took and in_flight == 0:
            return
        if time.monotonic() - started > timeout_s:
            raise AssertionError(f"the pair still holds messages after {timeout_s:.0f}s of emptying: {left}")
        if not took:
            time.sleep(0.05)  # copies crossing the bridge
