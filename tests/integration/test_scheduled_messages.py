"""Messages the primary's scheduler holds are copied to DR when it releases them, and then synced.

With ``schedulerSupport`` on (a customer's own setting that rendering keeps), a producer can
ask the broker to deliver a message later (``AMQ_SCHEDULED_DELAY``) or again and again
(``AMQ_SCHEDULED_PERIOD`` and ``AMQ_SCHEDULED_REPEAT``). The scheduler holds the message
outside the queue, so the composite forward, and with it the copy to DR, happens only at
release. These tests pin that on a pair whose brokers both run the scheduler: while held,
the message is on neither queue; once released, its copy reaches DR and is not held there a
second time (the copy carries the job id, which the DR broker's scheduler leaves alone); each
repetition is its own message with its own id; and consumption removes exactly what was
consumed. What it means for a switchover or a failover is in docs/design/modes.md.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from ulid import ULID

from brokersync.broker.statistics import StatisticsClient
from brokersync.broker.stomp import StompConnector
from brokersync.ledger import memory_ledger
from brokersync.render import render_configuration
from brokersync.render.document import CORE_NS
from brokersync.topology import load_topology
from brokersync_local.browsing import browse
from brokersync_local.world import LocalWorld, WorldPorts
from tests.integration.own_pairs import Pair, emptied_after, ids_once_there, own_pair, restart_with
from tests.integration.stomp_helpers import receive, send
from tests.integration.sync_helpers import capture_and_purge
from tests.integration.test_exact_removal import copies_settled, dr_state, primary_ids

pytestmark = pytest.mark.broker
PORTS = WorldPorts(primary_openwire=61896, primary_stomp=61893, dr_openwire=62896, dr_stomp=62893, aws=5295)
#: The customer's own configuration: the scheduler on, on both brokers.
SCHEDULER_ON = f'<broker xmlns="{CORE_NS}" schedulerSupport="true"/>'
#: Long enough that a copy the DR broker's scheduler held again would still be held when read.
DELAY_MS = 5_000


@pytest.fixture(scope="module")
def scheduling_pair(topology_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalWorld]:
    with own_pair(load_topology(topology_path), tmp_path_factory.mktemp("scheduling"), PORTS, SCHEDULER_ON) as world:
        yield world


@pytest.fixture
def pair(scheduling_pair: LocalWorld) -> Iterator[Pair]:
    with emptied_after(scheduling_pair) as pair:
        yield pair


def schedule(primary: StompConnector, headers: dict[str, str]) -> str:
    key = str(ULID())
    send(primary, "ORDERS", f"scheduled {key}", {"correlation-id": key, "persistent": "true", **headers})
    return key


def released(primary: StompConnector, count: int) -> set[str]:
    """The ids on the primary's ORDERS once the scheduler has released ``count`` messages there."""
    return ids_once_there(primary, "ORDERS", count)


def test_a_delayed_message_is_on_neither_broker_until_released_then_copied_once(
    pair: Pair,
) -> None:
    topology, primary, dr = pair
    schedule(primary, {"AMQ_SCHEDULED_DELAY": str(DELAY_MS)})

    assert (primary_ids(primary), browse(dr, "ORDERS")) == (set(), [])
    ids = released(primary, 1)
    copies_settled(primary, topology)

    [copy] = browse(dr, "ORDERS")
    assert {copy.headers["message-id"]} == ids
    assert copy.headers["scheduledJobId"]


def test_a_released_delayed_message_leaves_dr_once_consumed_and_an_unconsumed_one_stays(
    pair: Pair,
) -> None:
    topology, primary, dr = pair
    for _ in range(2):
        schedule(primary, {"AMQ_SCHEDULED_DELAY": "1000"})
    released(primary, 2)
    copies_settled(primary, topology)

    [consumed] = receive(primary, "ORDERS", 1)
    capture_and_purge(topology, primary, dr, memory_ledger())

    on_dr, redelivered = dr_state(dr)
    assert on_dr == primary_ids(primary)
    assert len(on_dr) == 1 and consumed.headers["message-id"] not in on_dr
    assert redelivered == set()


def test_each_repetition_of_a_repeated_message_is_its_own_message_on_dr(
    pair: Pair,
) -> None:
    topology, primary, dr = pair
    schedule(primary, {"AMQ_SCHEDULED_DELAY": "500", "AMQ_SCHEDULED_PERIOD": "500", "AMQ_SCHEDULED_REPEAT": "2"})
    repetitions = released(primary, 3)
    copies_settled(primary, topology)

    consumed = {f.headers["message-id"] for f in receive(primary, "ORDERS", 2)}
    capture_and_purge(topology, primary, dr, memory_ledger())

    on_dr, redelivered = dr_state(dr)
    assert len(repetitions) == 3
    assert on_dr == primary_ids(primary) == repetitions - consumed
    assert redelivered == set()


def test_a_message_still_held_when_the_primary_turns_dr_is_released_into_the_dr_queue(
    scheduling_pair: LocalWorld, pair: Pair
) -> None:
    """A switchover in miniature: the old primary restarts with the DR role's configuration
    while its scheduler holds a message. The job survives the restart and releases the message
    into the broker's own queue, now a DR queue that no application may read, and it is copied
    nowhere. (Last in this module: the pair's primary is left playing DR.)"""
    topology, primary, _ = pair
    schedule(primary, {"AMQ_SCHEDULED_DELAY": str(DELAY_MS)})
    restart_with(scheduling_pair, "primary", render_configuration(topology.swapped(), "dr", base=SCHEDULER_ON))

    [message] = released(primary, 1)
    time.sleep(1)

    assert primary_ids(primary) == {message}
    outflow = StatisticsClient(primary).queue_stats([topology.dr_name("ORDERS")]).get(topology.dr_name("ORDERS"))
    assert outflow is None or outflow.enqueue_count == 0  # (the counters start again at the restart)
