"""A message a JMS application read but did not acknowledge stays on DR; an acknowledged one leaves.

The consumed advisory that feeds the ledger must follow the acknowledgement, not the delivery:
a QueueBrowser, a CLIENT_ACKNOWLEDGE session that closes unacknowledged, one that calls
``Session.recover()``, and an INDIVIDUAL_ACKNOWLEDGE session that acknowledges only some of
what it received. Each is the real ActiveMQ JMS client over OpenWire
(tests/integration/java/ReadsWithoutConsuming.java) on the primary; then capture and purge
run to the end and DR is read with a browse.
"""

from __future__ import annotations

import pytest
from ulid import ULID

from brokersync.broker.stomp import StompConnector
from brokersync.ledger import memory_ledger
from brokersync.topology import Topology
from brokersync_local.world import LocalWorld
from tests.integration.java_clients import run_java_client
from tests.integration.sync_helpers import capture_and_purge
from tests.integration.test_exact_removal import copies_settled, dr_state, primary_ids, produce


def read_on_primary(world: LocalWorld, mode: str, count: int) -> list[str]:
    """Run ``ReadsWithoutConsuming`` in ``mode`` on ORDERS; the ids it printed."""
    return run_java_client("ReadsWithoutConsuming", world.ports.primary_openwire, "ORDERS", mode, str(count)).split()


pytestmark = pytest.mark.broker


@pytest.mark.parametrize("mode", ["browse", "unacked", "recover"])
def test_messages_read_without_an_acknowledgement_stay_on_dr(
    world: LocalWorld, topology: Topology, primary: StompConnector, dr: StompConnector, mode: str
) -> None:
    produce(primary, "ORDERS", [str(ULID()) for _ in range(6)])
    copies_settled(primary, topology)
    before = primary_ids(primary)

    read = read_on_primary(world, mode, 4)
    capture_and_purge(topology, primary, dr, memory_ledger())

    on_dr, redelivered = dr_state(dr)
    assert set(read) <= before
    assert primary_ids(primary) == before
    assert on_dr == before
    assert redelivered == set()


def test_of_messages_received_individually_only_the_acknowledged_leave_dr(
    world: LocalWorld, topology: Topology, primary: StompConnector, dr: StompConnector
) -> None:
    produce(primary, "ORDERS", [str(ULID()) for _ in range(6)])
    copies_settled(primary, topology)
    before = primary_ids(primary)

    acknowledged = set(read_on_primary(world, "individual", 6))
    capture_and_purge(topology, primary, dr, memory_ledger())

    on_dr, redelivered = dr_state(dr)
    assert len(acknowledged) == 3
    assert on_dr == primary_ids(primary) == before - acknowledged
    assert redelivered == set()
