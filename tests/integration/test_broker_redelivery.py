"""The broker's redelivery plugin, and why a render refuses its policies over captured queues.

Amazon MQ lets a configuration hold ActiveMQ's ``redeliveryPlugin``: on a poison ack (a STOMP
NACK, or an OpenWire client's own redeliveries exhausted) the broker takes the message off
the queue and its scheduler sends it back after a delay, instead of dead-lettering it. Taking
it off raises the consumed advisory, so BrokerSync records the message as consumed. These
tests run a pair whose brokers have the scheduler and the plugin:

* with policies for other queues only (what a render accepts), a NACK'd message on a synced
  queue is dead-lettered, a departure like any other, and leaves DR;
* with a policy over the synced queue (rendered past the refusal, as a failover would), the
  purge removes the DR copy while the message waits in the scheduler, and when it returns the
  DR broker drops its new copy as a duplicate: the message is on the primary and not on DR.
  That is the fact ``brokersync.render.safety`` refuses the setting for.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import stomp
from ulid import ULID

from brokersync.broker.statistics import StatisticsClient
from brokersync.broker.stomp import StompConnector
from brokersync.ledger import memory_ledger
from brokersync.render import render_configuration
from brokersync.render.document import CORE_NS
from brokersync.topology import Topology, load_topology
from brokersync_local.world import LocalWorld, WorldPorts
from tests.integration.own_pairs import Pair, emptied_after, ids_once_there, own_pair, restart_with
from tests.integration.stomp_helpers import send
from tests.integration.sync_helpers import capture_and_purge
from tests.integration.test_exact_removal import copies_settled, dr_state, primary_ids

pytestmark = pytest.mark.broker
PORTS = WorldPorts(primary_openwire=61926, primary_stomp=61923, dr_openwire=62926, dr_stomp=62923, aws=5325)
#: Seconds the plugin holds a NACK'd message before sending it back.
REDELIVERY_DELAY_S = 4


def _with_redelivery(policies: str) -> str:
    return (
        f'<broker xmlns="{CORE_NS}" schedulerSupport="true"><plugins>'
        '<redeliveryPlugin fallbackToDeadLetter="true" sendToDlqIfMaxRetriesExceeded="true">'
        f"<redeliveryPolicyMap><redeliveryPolicyMap>{policies}</redeliveryPolicyMap></redeliveryPolicyMap>"
        "</redeliveryPlugin></plugins></broker>"
    )


_DELAY_MS = REDELIVERY_DELAY_S * 1000
POLICY = f'maximumRedeliveries="3" initialRedeliveryDelay="{_DELAY_MS}" redeliveryDelay="{_DELAY_MS}"'
#: What a render accepts: policies for the applications' other queues only.
OTHER_QUEUES_ONLY = _with_redelivery(
    f'<redeliveryPolicyEntries><redeliveryPolicy queue="APP.>" {POLICY}/></redeliveryPolicyEntries>'
)
#: What a render refuses: a default policy, which covers the synced queues too.
EVERY_QUEUE = _with_redelivery(f"<defaultEntry><redeliveryPolicy {POLICY}/></defaultEntry>")


@pytest.fixture(scope="module")
def redelivering_pair(topology_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalWorld]:
    topology = load_topology(topology_path)
    with own_pair(topology, tmp_path_factory.mktemp("redelivery"), PORTS, OTHER_QUEUES_ONLY) as world:
        yield world


@pytest.fixture
def pair(redelivering_pair: LocalWorld) -> Iterator[Pair]:
    with emptied_after(redelivering_pair) as pair:
        yield pair


def nack_one(primary: StompConnector, queue: str = "ORDERS") -> str:
    """Receive one message and NACK it (ActiveMQ's poison ack); its id."""
    frames: list[stomp.utils.Frame] = []

    class Collect(stomp.ConnectionListener):
        def on_message(self, frame: stomp.utils.Frame) -> None:
            frames.append(frame)

    connection = primary.connect(Collect(), name="nacker")
    try:
        connection.subscribe(f"/queue/{queue}", id="n", ack="client-individual")
        deadline = time.monotonic() + 10
        while not frames and time.monotonic() < deadline:
            time.sleep(0.05)
        assert frames, "nothing to NACK"
        connection.nack(frames[0].headers["ack"])
        return frames[0].headers["message-id"]
    finally:
        connection.disconnect(receipt="bye")


def produce_one(topology: Topology, primary: StompConnector) -> None:
    key = str(ULID())
    send(primary, "ORDERS", f"order {key}", {"correlation-id": key, "persistent": "true"})
    copies_settled(primary, topology)


def test_without_a_policy_for_the_synced_queue_a_nacked_message_is_dead_lettered_and_leaves_dr(
    pair: Pair,
) -> None:
    topology, primary, dr = pair
    produce_one(topology, primary)

    nacked = nack_one(primary)
    capture_and_purge(topology, primary, dr, memory_ledger())
    time.sleep(REDELIVERY_DELAY_S + 1)

    # (The rendered authorization lets none of our groups read the customer's DLQ: count it.)
    assert StatisticsClient(primary).queue_stats(["ActiveMQ.DLQ"])["ActiveMQ.DLQ"].size == 1
    assert nacked not in primary_ids(primary)
    assert primary_ids(primary) == set() == dr_state(dr)[0]


def test_with_a_policy_over_the_synced_queue_a_nacked_message_comes_back_without_its_dr_copy(
    redelivering_pair: LocalWorld, pair: Pair
) -> None:
    """Last in this module: the primary is left running the refused configuration."""
    topology, primary, dr = pair
    refused = render_configuration(topology, "primary", base=EVERY_QUEUE, refuse_unsafe_base=False)
    restart_with(redelivering_pair, "primary", refused)
    produce_one(topology, primary)

    nacked = nack_one(primary)
    capture_and_purge(topology, primary, dr, memory_ledger())
    returned = ids_once_there(primary, "ORDERS", 1, timeout_s=REDELIVERY_DELAY_S + 20)
    copies_settled(primary, topology)

    assert returned == primary_ids(primary) == {nacked}, "the plugin sent the message back"
    assert (
        StatisticsClient(primary).queue_stats([topology.dr_name("ORDERS")])[topology.dr_name("ORDERS")].enqueue_count
        == 2
    )
    assert dr_state(dr)[0] == set(), "and the DR broker dropped its second copy"
