"""Exactly the messages consumed on the primary leave DR, on the real pair.

Each test ends by reading DR with a browse (which changes nothing) and checking the exact
set of message ids left there, and that none of them was redelivered.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest
from ulid import ULID

from brokersync.broker.statistics import StatisticsClient
from brokersync.broker.stomp import StompConnector
from brokersync.capture.relay import AdvisoryRelay
from brokersync.capture.writer import LedgerWriter
from brokersync.ledger import memory_ledger
from brokersync.purge import remover as remover_module
from brokersync.purge.remover import PurgeInvariantError, SelectorRemover
from brokersync.purge.service import PurgeService, PurgeSettings
from brokersync.topology import Topology
from brokersync_local.browsing import browse
from tests.integration.stomp_helpers import produce as produce_messages
from tests.integration.stomp_helpers import receive
from tests.integration.sync_helpers import FAST, capture_and_purge

pytestmark = pytest.mark.broker


def produce(connector: StompConnector, queue: str, correlation_ids: list[str]) -> None:
    produce_messages(connector, queue, [(f"body {key}", {"correlation-id": key}) for key in correlation_ids])


def wait_for(condition: Callable[[], bool], timeout_s: float = 30, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def copies_settled(primary: StompConnector, topology: Topology, queue: str = "ORDERS") -> None:
    stats = StatisticsClient(primary)

    def drained() -> bool:
        backlog = stats.queue_stats([topology.dr_name(queue)]).get(topology.dr_name(queue))
        return backlog is None or backlog.size == 0

    wait_for(drained, what="the copy backlog to drain")


def dr_state(dr: StompConnector, queue: str = "ORDERS") -> tuple[set[str], set[str]]:
    """(message ids on DR, those of them marked redelivered)."""
    frames = browse(dr, queue)
    ids = {f.headers["message-id"] for f in frames}
    redelivered = {f.headers["message-id"] for f in frames if f.headers.get("redelivered", "false") != "false"}
    return ids, redelivered


def primary_ids(primary: StompConnector, queue: str = "ORDERS") -> set[str]:
    return {f.headers["message-id"] for f in browse(primary, queue)}


def test_one_consumed_of_two_messages_with_one_key_leaves_the_other_on_dr(
    topology: Topology, primary: StompConnector, dr: StompConnector
) -> None:
    """A producer's retry after a lost receipt: two messages, one correlation id, one consumed."""
    key = str(ULID())
    produce(primary, "ORDERS", [key, key])
    [consumed] = receive(primary, "ORDERS", 1)
    copies_settled(primary, topology)

    capture_and_purge(topology, primary, dr, memory_ledger())

    on_dr, redelivered = dr_state(dr)
    assert on_dr == primary_ids(primary) == on_dr - {consumed.headers["message-id"]}
    assert len(on_dr) == 1
    assert redelivered == set()


def test_both_consumed_messages_with_one_key_leave_dr(
    topology: Topology, primary: StompConnector, dr: StompConnector
) -> None:
    key = str(ULID())
    produce(primary, "ORDERS", [key, key])
    assert len(receive(primary, "ORDERS", 2)) == 2
    copies_settled(primary, topology)

    capture_and_purge(topology, primary, dr, memory_ledger())

    assert dr_state(dr) == (set(), set())


def test_a_message_with_a_lower_case_ulid_consumed_on_the_primary_leaves_dr(
    topology: Topology, primary: StompConnector, dr: StompConnector
) -> None:
    keys = [str(ULID()).lower() for _ in range(20)]
    produce(primary, "ORDERS", keys)
    assert len(receive(primary, "ORDERS", 15)) == 15
    copies_settled(primary, topology)

    capture_and_purge(topology, primary, dr, memory_ledger())

    on_dr, redelivered = dr_state(dr)
    assert on_dr == primary_ids(primary)
    assert len(on_dr) == 5
    assert redelivered == set()


def test_a_round_of_more_selector_groups_than_run_at_once_reports_no_false_violation(
    topology: Topology, primary: StompConnector, dr: StompConnector
) -> None:
    """4,000 message ids make 18 selectors, two groups of 16: frames must be matched to their own group."""
    produce(primary, "ORDERS", [str(ULID()) for _ in range(4_500)])
    consumed = {f.headers["message-id"] for f in receive(primary, "ORDERS", 4_000, timeout_s=60)}
    copies_settled(primary, topology)

    capture_and_purge(topology, primary, dr, memory_ledger())

    on_dr, redelivered = dr_state(dr)
    assert len(consumed) == 4_000
    assert len(on_dr) == 500  # 4,500 produced: every unconsumed one is still there ...
    assert not on_dr & consumed  # ... and no consumed one
    assert redelivered == set()


def test_a_frame_no_selector_asked_for_stops_the_purge_unacked(
    topology: Topology, primary: StompConnector, dr: StompConnector, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Make a real violation happen: a selector wider than the ids the remover expects.

    The broker then delivers a message nobody consumed; the remover must not ack it, must
    stop the round with PurgeInvariantError, and the message must still be on DR.
    """
    first, second = str(ULID()), str(ULID())
    produce(primary, "ORDERS", [first, second])
    assert len(receive(primary, "ORDERS", 1, selector=f"JMSCorrelationID = '{second}'")) == 1
    copies_settled(primary, topology)
    [unconsumed] = primary_ids(primary)  # the first: ahead of the consumed one on DR too
    ledger = memory_ledger()
    AdvisoryRelay(primary, LedgerWriter(ledger), topology, settings=FAST).run(max_seconds=1.5)
    real_batches = remover_module.selector_batches

    def widened(ids: list[str], kind: str, **options: int) -> list[tuple[list[str], str]]:
        return [
            (batch, f"{selector} OR JMSMessageID = '{unconsumed}'")
            for batch, selector in real_batches(ids, kind, **options)
        ]

    monkeypatch.setattr(remover_module, "selector_batches", widened)
    purge = PurgeService(ledger, SelectorRemover(dr), topology)

    with pytest.raises(PurgeInvariantError, match="did not select"):
        for _ in range(5):
            purge.purge_queue("ORDERS")

    on_dr, _ = dr_state(dr)
    assert unconsumed in on_dr  # delivered to the purge (so its counter rose), but never acked


def test_a_purge_never_redelivers_what_it_leaves(
    topology: Topology, primary: StompConnector, dr: StompConnector
) -> None:
    """Half consumed, in a shuffled order, with several purge rounds racing the copy."""
    keys = [str(ULID()) for _ in range(300)]
    produce(primary, "ORDERS", keys)
    ledger = memory_ledger()
    relay = AdvisoryRelay(primary, LedgerWriter(ledger), topology, settings=FAST)
    purge = PurgeService(ledger, SelectorRemover(dr), topology, settings=PurgeSettings(retry_not_found_s=0))
    for _ in range(3):
        receive(primary, "ORDERS", 50)
        relay.run(max_seconds=0.3)
        purge.purge_queue("ORDERS")
    copies_settled(primary, topology)

    capture_and_purge(topology, primary, dr, ledger)

    on_dr, redelivered = dr_state(dr)
    assert on_dr == primary_ids(primary)
    assert len(on_dr) == 150
    assert redelivered == set()


class CountingConnector:
    """The DR broker's connector, counting the connections opened through it."""

    def __init__(self, inner: StompConnector) -> None:
        self.inner = inner
        self.opened = 0

    def connect(self, listener: object, name: str = "") -> object:
        self.opened += 1
        return self.inner.connect(listener, name=name)  # type: ignore[arg-type]

    def __getattr__(self, name: str) -> object:
        return getattr(self.inner, name)


def test_the_rounds_of_a_purge_run_share_one_dr_connection_and_remove_exactly_what_was_consumed(
    topology: Topology, primary: StompConnector, dr: StompConnector
) -> None:
    """Kept from round to round (decision 0051), frames of earlier rounds' subscriptions included."""
    produce(primary, "ORDERS", [str(ULID()) for _ in range(200)])
    ledger = memory_ledger()
    relay = AdvisoryRelay(primary, LedgerWriter(ledger), topology, settings=FAST)
    counting = CountingConnector(dr)
    remover = SelectorRemover(counting)  # type: ignore[arg-type]
    purge = PurgeService(ledger, remover, topology, settings=PurgeSettings(retry_not_found_s=0))
    copies_settled(primary, topology)
    with remover.keeping_connections():
        for _ in range(4):
            receive(primary, "ORDERS", 40)
            relay.run(max_seconds=0.5)
            assert purge.purge_queue("ORDERS").purged > 0
        opened_in_the_run = counting.opened

    on_dr, redelivered = dr_state(dr)
    assert opened_in_the_run == 1
    assert on_dr == primary_ids(primary)
    assert len(on_dr) == 40
    assert redelivered == set()
