"""Late copies on the real pair: a redelivered copy of a purged message leaves DR, nothing else does.

After a bridge reconnect the primary resends the copies whose acks it never got, with their
redelivery counter raised; when the purge already removed the first copy, the resent one is
stored, and the ledger says purged. The test builds that state directly (both copies on DR
marked redelivered, one of them consumed on the primary and already marked purged) and runs
the sweep: the consumed one goes, the unconsumed one stays and is not delivered to anyone.
"""

from __future__ import annotations

import time

import pytest
from ulid import ULID

from brokersync.broker.statistics import StatisticsClient
from brokersync.broker.stomp import StompConnector
from brokersync.failover.context import TransitionContext
from brokersync.failover.steps import FailoverEnvironment, FailoverSteps
from brokersync.ledger import memory_ledger
from brokersync.ledger.base import LedgerEntry
from brokersync.metrics import RecordingMetrics
from brokersync.purge.late_copies import LateCopySweep, consumed_at_head
from brokersync.purge.remover import SelectorRemover
from brokersync.topology import Topology
from brokersync_local.browsing import browse
from tests.integration.stomp_helpers import receive
from tests.integration.test_exact_removal import copies_settled, dr_state, produce

pytestmark = pytest.mark.broker


def test_a_redelivered_copy_of_a_purged_message_is_removed_and_an_unconsumed_one_stays_untouched(
    topology: Topology, primary: StompConnector, dr: StompConnector
) -> None:
    consumed_key, kept_key = str(ULID()), str(ULID())
    produce(primary, "ORDERS", [consumed_key, kept_key])
    copies_settled(primary, topology)
    [consumed] = receive(primary, "ORDERS", 1, selector=f"JMSCorrelationID = '{consumed_key}'")
    # Both copies on DR delivered once and not acked: marked redelivered, as the bridge's resends are.
    assert len(receive(dr, "ORDERS", 2, ack=False)) == 2
    on_dr, redelivered = dr_state(dr)
    assert on_dr == redelivered and len(on_dr) == 2
    ledger = memory_ledger()
    ledger.record("ORDERS", [LedgerEntry(consumed_key, int(time.time() * 1000), consumed.headers["message-id"])])
    ledger.mark_purged("ORDERS", ledger.pending("ORDERS"))  # the first copy's purge: the ledger says done
    dequeued_before = StatisticsClient(dr).queue_stats(["ORDERS"])["ORDERS"].dequeue_count
    metrics = RecordingMetrics()

    removed = LateCopySweep().sweep(ledger, SelectorRemover(dr), topology, metrics)

    on_dr_after, redelivered_after = dr_state(dr)
    assert removed == 1 and metrics.total("LateCopiesRemoved") == 1
    assert consumed.headers["message-id"] not in on_dr_after
    assert on_dr_after == redelivered_after == on_dr - {consumed.headers["message-id"]}
    # The unconsumed copy was browsed, never delivered: one dequeue, the removed copy's.
    assert StatisticsClient(dr).queue_stats(["ORDERS"])["ORDERS"].dequeue_count == dequeued_before + 1


def test_a_message_consumed_before_its_broker_was_lost_is_removed_from_the_head_and_nothing_else_is(
    topology: Topology, primary: StompConnector, dr: StompConnector
) -> None:
    """A failback's head sweep: the rejoining broker holds again a message consumed on it, its key
    already purged and the message not marked redelivered; a message whose key names another
    message id, and an unconsumed one, stay undelivered."""
    consumed_key, reused_key, kept_key = str(ULID()), str(ULID()), str(ULID())
    produce(primary, "ORDERS", [consumed_key, reused_key, kept_key])
    copies_settled(primary, topology)
    on_dr, redelivered = dr_state(dr)
    assert len(on_dr) == 3 and not redelivered
    by_key = {f.headers["correlation-id"]: f.headers["message-id"] for f in browse(dr, "ORDERS")}
    now_ms = int(time.time() * 1000)
    ledger = memory_ledger()
    ledger.record(
        "ORDERS",
        [
            LedgerEntry(consumed_key, now_ms, by_key[consumed_key]),
            LedgerEntry(reused_key, now_ms, "ID:another-broker-1-1700000000000-1:1:1:1:1"),
        ],
    )
    ledger.mark_purged("ORDERS", ledger.pending("ORDERS"))
    dequeued_before = StatisticsClient(dr).queue_stats(["ORDERS"])["ORDERS"].dequeue_count

    removed = consumed_at_head().sweep(ledger, SelectorRemover(dr), topology, RecordingMetrics())

    on_dr_after, redelivered_after = dr_state(dr)
    assert removed == 1
    assert on_dr_after == on_dr - {by_key[consumed_key]}
    assert not redelivered_after
    assert StatisticsClient(dr).queue_stats(["ORDERS"])["ORDERS"].dequeue_count == dequeued_before + 1


def test_a_failbacks_catch_up_removes_what_was_consumed_on_the_rejoining_broker_and_counts_it(
    topology: Topology, primary: StompConnector, dr: StompConnector
) -> None:
    """The step itself, on the real pair (``dr`` plays the rejoining broker): the head sweep runs
    after the pending-key rounds, and its removal is reported as ``removedAtHead``."""
    consumed_key, kept_key = str(ULID()), str(ULID())
    produce(primary, "ORDERS", [consumed_key, kept_key])
    copies_settled(primary, topology)
    by_key = {f.headers["correlation-id"]: f.headers["message-id"] for f in browse(dr, "ORDERS")}
    ledger = memory_ledger()
    ledger.record("ORDERS", [LedgerEntry(consumed_key, int(time.time() * 1000), by_key[consumed_key])])
    ledger.mark_purged("ORDERS", ledger.pending("ORDERS"))
    steps = FailoverSteps(
        FailoverEnvironment(
            topology=topology,
            ledger=ledger,
            statistics=lambda broker: StatisticsClient(primary),
            remover=lambda broker: SelectorRemover(dr),
            **dict.fromkeys(("roles", "transitions", "brokers", "sync", "s3", "bucket", "events")),  # type: ignore[arg-type]
        )
    )
    now_ms = int(time.time() * 1000)
    ctx = TransitionContext(
        nothing_to_do=False,
        mode="FAILBACK",
        source=topology.dr.name,
        target=topology.primary.name,
        crdr=False,
        transition_started_at_ms=now_ms,
        drain_deadline_ms=now_ms,
        running_deadline_ms=now_ms,
    )

    caught_up = steps.remove_consumed(ctx, max_seconds=2.0)

    assert (caught_up["done"], caught_up["removedAtHead"], caught_up["headsNotLookedUp"]) == (True, 1, [])
    assert dr_state(dr) == ({by_key[kept_key]}, set())
