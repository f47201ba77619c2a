"""The purge dies, or its connection does, at every bad moment; a re-run ends with DR exact.

Each test consumes part of a batch on the primary, captures it, breaks one purge round at a
chosen point, then runs a fresh purge (a restarted function) and checks the DR queue holds
exactly the messages not consumed on the primary, none of them redelivered.
"""

from __future__ import annotations

import time
from unittest import mock

import pytest
import stomp
from ulid import ULID

from brokersync.broker.stomp import StompConnector
from brokersync.capture.relay import AdvisoryRelay, RelaySettings
from brokersync.capture.writer import LedgerWriter
from brokersync.exceptions import BrokerUnavailableError
from brokersync.ledger import Ledger, memory_ledger
from brokersync.purge.remover import RemovalResult, RemoverSettings, SelectorRemover
from brokersync.purge.service import PurgeService, PurgeSettings
from brokersync.topology import Topology
from tests.integration.stomp_helpers import receive
from tests.integration.test_exact_removal import copies_settled, dr_state, produce

pytestmark = pytest.mark.broker
RETRY_AT_ONCE = PurgeSettings(retry_not_found_s=0)


def _consume_some(topology: Topology, primary: StompConnector, produced: int, consumed: int) -> tuple[Ledger, set[str]]:
    """Produce, consume on the primary, capture; return the ledger and the consumed ids."""
    produce(primary, "ORDERS", [str(ULID()) for _ in range(produced)])
    ids = {f.headers["message-id"] for f in receive(primary, "ORDERS", consumed, timeout_s=60)}
    copies_settled(primary, topology)
    ledger = memory_ledger()
    relay = AdvisoryRelay(primary, LedgerWriter(ledger), topology, settings=RelaySettings(flush_interval_s=0.05))
    for _ in range(20):
        if relay.run(max_seconds=1.0).captured == 0:
            break
    return ledger, ids


def _rerun_until_done(topology: Topology, dr: StompConnector, ledger: Ledger) -> None:
    purge = PurgeService(ledger, SelectorRemover(dr), topology, settings=RETRY_AT_ONCE)
    deadline = time.monotonic() + 60
    while ledger.pending("ORDERS") and time.monotonic() < deadline:
        purge.purge_queue("ORDERS")


def _assert_dr_exact(dr: StompConnector, consumed: set[str], left: int) -> None:
    on_dr, redelivered = dr_state(dr)
    assert len(on_dr) == left
    assert not on_dr & consumed
    assert redelivered == set()


class _KilledBeforeMarkingError(Exception):
    """The function is killed after the broker confirmed the acks, before the ledger was marked."""


def test_killed_after_the_acks_were_confirmed_but_before_marking(
    topology: Topology, primary: StompConnector, dr: StompConnector
) -> None:
    ledger, consumed = _consume_some(topology, primary, 300, 200)

    class Dying:
        pending = staticmethod(ledger.pending)

        @staticmethod
        def mark_purged(_queue: str, _keys: object) -> None:
            raise _KilledBeforeMarkingError

    doomed = PurgeService(Dying(), SelectorRemover(dr), topology, settings=RETRY_AT_ONCE)  # type: ignore[arg-type]
    with pytest.raises(_KilledBeforeMarkingError):
        doomed.purge_queue("ORDERS")

    _rerun_until_done(topology, dr, ledger)  # what it removed is gone: the re-run finds nothing to touch

    _assert_dr_exact(dr, consumed, 100)


class _SecondGroupLosesItsConnection(SelectorRemover):
    """The DR broker drops the connection while the second selector group runs."""

    def _remove_group(self, connection: stomp.Connection12, *args: object, **kwargs: object) -> None:
        self.groups = getattr(self, "groups", 0) + 1
        if self.groups == 2:
            connection.disconnect()
        super()._remove_group(connection, *args, **kwargs)  # type: ignore[arg-type]


def test_a_later_selector_group_failing_keeps_the_earlier_groups_removals(
    topology: Topology, primary: StompConnector, dr: StompConnector
) -> None:
    ledger, consumed = _consume_some(topology, primary, 1_200, 1_000)  # 5 selectors: groups of 2
    remover = _SecondGroupLosesItsConnection(dr, RemoverSettings(parallel_subscriptions=2))
    purge = PurgeService(ledger, remover, topology, settings=RETRY_AT_ONCE)

    with pytest.raises(BrokerUnavailableError):
        purge.purge_queue("ORDERS")

    assert 0 < len(ledger.pending("ORDERS")) < 1_000  # the first group's removals were marked
    _rerun_until_done(topology, dr, ledger)
    _assert_dr_exact(dr, consumed, 200)


class _DropsMidRound(SelectorRemover):
    """The connection dies after some acks were sent and before the receipt that confirms them."""

    def _close(self, connection: stomp.Connection12, *args: object, **kwargs: object) -> None:
        # The ACK reaches the broker; the UNSUBSCRIBE behind it in the same write, which asks for
        # the receipt, never does: the connection dies between the two frames.
        def ack_then_die(conn: stomp.Connection12, frames: list[tuple[str, dict[str, str]]]) -> None:
            for command, headers in frames:
                if command != "ACK":
                    conn.disconnect()
                    return
                conn.ack(headers["id"])

        with mock.patch("brokersync.purge.remover.send_in_one_write", ack_then_die):
            super()._close(connection, *args, **kwargs)  # type: ignore[arg-type]


def test_a_connection_lost_before_the_acks_were_confirmed_removes_nothing_twice(
    topology: Topology, primary: StompConnector, dr: StompConnector
) -> None:
    ledger, consumed = _consume_some(topology, primary, 150, 100)
    purge = PurgeService(ledger, _DropsMidRound(dr), topology, settings=RETRY_AT_ONCE)

    with pytest.raises(BrokerUnavailableError):
        purge.purge_queue("ORDERS")

    assert len(ledger.pending("ORDERS")) == 100  # nothing confirmed, nothing marked
    _rerun_until_done(topology, dr, ledger)
    _assert_dr_exact(dr, consumed, 50)


def test_a_round_started_too_close_to_the_invocations_end_touches_nothing(
    topology: Topology, primary: StompConnector, dr: StompConnector
) -> None:
    """The cut between groups is scripted in tests/unit/purge/test_remover_frames.py; here, on the
    real broker, a round with less time left than a group needs leaves DR exactly as it was."""
    ledger, consumed = _consume_some(topology, primary, 1_200, 1_000)
    remover = SelectorRemover(dr, RemoverSettings(parallel_subscriptions=1, min_group_s=1.0))
    ids = [p.message_id for p in ledger.pending("ORDERS", limit=2_000) if p.message_id]

    result: RemovalResult = remover.remove("ORDERS", ids, deadline=time.monotonic() + 0.5)

    assert (result.deferred, result.removed, result.error) == (5, [], None)
    assert len(dr_state(dr)[0]) == 1_200
    _rerun_until_done(topology, dr, ledger)
    _assert_dr_exact(dr, consumed, 200)
