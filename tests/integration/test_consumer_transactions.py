"""A consumer's transaction that does not commit consumes nothing, so its messages stay on DR.

ActiveMQ raises a queue's consumed advisory when it processes an acknowledgement, and a
transacted acknowledgement reaches the broker before the transaction ends: a STOMP ``ACK``
with a ``transaction`` header at once, a JMS transacted session's with its commit, an XA
session's at ``XAResource.end``, before the transaction manager decides. Were the advisory
dispatched then, an aborted transaction, a rolled-back XA branch or a client that died before
its ``COMMIT`` would leave a key in the ledger for a message still on the primary, and the
purge would remove its only other copy. ActiveMQ sends the advisory in the acknowledgement's
transaction (its AdvisoryBroker sits inside its TransactionBroker), and a topic dispatches a
transacted send only after the commit. These tests pin that on the real pair, with
BrokerSync's capture and purge run to the end, for clients that are not ours as much as for
STOMP ones.
"""

from __future__ import annotations

import socket
from collections.abc import Callable

import pytest
import stomp
from ulid import ULID

from brokersync.broker.stomp import StompConnector
from brokersync.ledger import memory_ledger
from brokersync.topology import Topology
from brokersync_local.backlog import wait_until
from brokersync_local.world import LocalWorld
from tests.integration.java_clients import run_java_client
from tests.integration.stomp_helpers import RECEIPT_TIMEOUT_S, produce
from tests.integration.sync_helpers import capture_and_purge
from tests.integration.test_exact_removal import copies_settled, dr_state, primary_ids
from tests.integration.test_openwire_producers import produce_over_openwire

pytestmark = pytest.mark.broker


class _Frames(stomp.ConnectionListener):
    def __init__(self) -> None:
        self.messages: list[stomp.utils.Frame] = []
        self.receipts: list[str] = []

    def on_message(self, frame: stomp.utils.Frame) -> None:
        self.messages.append(frame)

    def on_receipt(self, frame: stomp.utils.Frame) -> None:
        self.receipts.append(frame.headers["receipt-id"])


def _wait(condition: Callable[[], bool], what: str) -> None:
    wait_until(condition, RECEIPT_TIMEOUT_S, what, poll_s=0.02)


def _ack_in_a_transaction(primary: StompConnector, queue: str, count: int, ack_mode: str, end: str) -> set[str]:
    """Receive ``count`` messages over STOMP, ACK each in one transaction, then end it by ``end``:
    ``commit``, ``abort``, or ``connection-lost`` (the socket cut after the ACKs, no frame
    more). Returns the ids the transaction acknowledged."""
    frames = _Frames()
    connection = primary.connect(frames, name="test-transacted-consumer")
    connection.subscribe(f"/queue/{queue}", id="t", ack=ack_mode, headers={"activemq.prefetchSize": str(count)})
    _wait(lambda: len(frames.messages) >= count, f"{count} messages on {queue}")
    connection.begin("tx")
    taken = frames.messages[:count]
    for index, frame in enumerate(taken):
        receipt = "acked" if index == len(taken) - 1 else None
        connection.ack(frame.headers["ack"], transaction="tx", receipt=receipt)
    # The broker handles a connection's frames in order: the last ACK's receipt says it has
    # processed them all, so the consumed advisories, were they raised now, are out.
    _wait(lambda: "acked" in frames.receipts, "the broker to process the transacted ACKs")
    if end == "connection-lost":
        connection.transport.socket.shutdown(socket.SHUT_RDWR)
    else:
        (connection.commit if end == "commit" else connection.abort)("tx", receipt="ended")
        _wait(lambda: "ended" in frames.receipts, f"the transaction's {end.upper()}")
        connection.disconnect()
    return {frame.headers["message-id"] for frame in frames.messages[:count]}


def _produce(primary: StompConnector, queue: str, count: int) -> set[str]:
    """``count`` persistent messages, each with its own correlation id: their message ids."""
    produce(primary, queue, [("body", {"correlation-id": str(ULID())}) for _ in range(count)])
    return primary_ids(primary, queue)


@pytest.mark.parametrize("end", ["abort", "connection-lost"])
@pytest.mark.parametrize("ack_mode", ["client-individual", "client"])
def test_stomp_acks_in_a_transaction_that_does_not_commit_leave_every_copy_on_dr(
    topology: Topology, primary: StompConnector, dr: StompConnector, ack_mode: str, end: str
) -> None:
    sent = _produce(primary, "PAYMENTS", 5)
    acked = _ack_in_a_transaction(primary, "PAYMENTS", 5, ack_mode, end)
    copies_settled(primary, topology, "PAYMENTS")

    capture_and_purge(topology, primary, dr, memory_ledger(), queue="PAYMENTS")

    on_dr, redelivered = dr_state(dr, "PAYMENTS")
    assert acked == sent
    assert on_dr == primary_ids(primary, "PAYMENTS") == sent
    assert redelivered == set()


@pytest.mark.parametrize("ack_mode", ["client-individual", "client"])
def test_stomp_acks_in_a_committed_transaction_remove_exactly_those_copies(
    topology: Topology, primary: StompConnector, dr: StompConnector, ack_mode: str
) -> None:
    sent = _produce(primary, "ORDERS", 5)
    committed = _ack_in_a_transaction(primary, "ORDERS", 3, ack_mode, "commit")
    copies_settled(primary, topology)

    capture_and_purge(topology, primary, dr, memory_ledger())

    on_dr, redelivered = dr_state(dr)
    assert len(committed) == 3
    assert on_dr == primary_ids(primary) == sent - committed
    assert redelivered == set()


@pytest.mark.parametrize("mode", ["local", "xa"])
@pytest.mark.parametrize("queue", ["ORDERS", "PAYMENTS"])
def test_a_jms_client_whose_transactions_roll_back_then_commit_removes_only_what_it_committed(
    world: LocalWorld, topology: Topology, primary: StompConnector, dr: StompConnector, mode: str, queue: str
) -> None:
    """ActiveMQ's own JMS client: a transacted session that rolls back twice before it commits
    (a listener that failed and was retried), and an XA branch prepared, then rolled back by
    its transaction manager, before the next one commits."""
    sent = set(produce_over_openwire(world, queue, "java", [str(ULID()) for _ in range(6)]))
    printed = run_java_client("TransactedConsumer", world.ports.primary_openwire, queue, mode, "4", "2")
    committed = set(printed.split())
    copies_settled(primary, topology, queue)

    capture_and_purge(topology, primary, dr, memory_ledger(), queue=queue)

    on_dr, redelivered = dr_state(dr, queue)
    assert len(committed) == 2
    assert committed < sent
    assert on_dr == primary_ids(primary, queue) == sent - committed
    assert redelivered == set()
