"""Before the purge gives up on a key, a browse of the real DR broker must find no copy of it.

A removal that finds nothing within its settle time may only have met a DR broker slow to
dispatch; these tests pin what the browse that decides instead sees, and that it delivers
and counts nothing.
"""

from __future__ import annotations

import time
from datetime import timedelta

import pytest
from ulid import ULID

from brokersync.broker.statistics import StatisticsClient
from brokersync.broker.stomp import StompConnector
from brokersync.ledger import memory_ledger
from brokersync.ledger.base import LedgerEntry
from brokersync.purge.absence import AbsenceCheck
from brokersync.purge.remover import RemovalResult, SelectorRemover
from brokersync.purge.service import PurgeService, PurgeSettings
from brokersync.topology import Topology
from brokersync_local.browsing import browse
from brokersync_local.ports import free_port
from tests.integration.test_exact_removal import copies_settled, dr_state, produce

pytestmark = pytest.mark.broker

#: A message id no broker holds.
NOWHERE = "ID:nowhere-40000-1795340000000-1:1:1:1:1"


def _copy_on_dr(primary: StompConnector, dr: StompConnector, topology: Topology) -> tuple[str, str]:
    """(key, message id) of a message produced on the primary whose copy is on DR."""
    key = str(ULID())
    produce(primary, "ORDERS", [key])
    copies_settled(primary, topology)
    [copy] = [f for f in browse(dr, "ORDERS") if f.headers.get("correlation-id") == key]
    return key, copy.headers["message-id"]


def test_a_copy_on_dr_is_never_confirmed_absent_and_is_neither_delivered_nor_counted(
    topology: Topology, primary: StompConnector, dr: StompConnector
) -> None:
    _key, on_dr = _copy_on_dr(primary, dr, topology)
    dequeued = StatisticsClient(dr).queue_stats(["ORDERS"])["ORDERS"].dequeue_count
    check = AbsenceCheck(dr, topology.tuning.dr.max_browse_page_size)

    assert check.absent(topology.queue("ORDERS"), [on_dr, NOWHERE]) == {NOWHERE}
    ids, redelivered = dr_state(dr)
    assert on_dr in ids and on_dr not in redelivered
    assert StatisticsClient(dr).queue_stats(["ORDERS"])["ORDERS"].dequeue_count == dequeued


def test_a_queue_as_deep_as_a_browse_reaches_confirms_nothing(
    topology: Topology, primary: StompConnector, dr: StompConnector
) -> None:
    _copy_on_dr(primary, dr, topology)
    depth = StatisticsClient(dr).queue_stats(["ORDERS"])["ORDERS"].size

    assert AbsenceCheck(dr, browse_limit=depth).absent(topology.queue("ORDERS"), [NOWHERE]) == set()


def test_a_broker_that_does_not_answer_confirms_nothing(topology: Topology) -> None:
    silent = StompConnector([f"stomp://127.0.0.1:{free_port()}"], timeout_s=1.0)

    assert AbsenceCheck(silent, 200_000, idle_timeout_s=1.0).absent(topology.queue("ORDERS"), [NOWHERE]) == set()


class _TooSlowToDispatch(SelectorRemover):
    """A removal that ends before the DR broker dispatched anything: every id "not found"."""

    def remove(self, queue: str, message_ids: list[str], *, deadline: float | None = None) -> RemovalResult:
        return RemovalResult(not_found=list(message_ids))


def test_an_old_consumed_key_whose_copy_dr_dispatched_too_late_is_kept_and_then_removed(
    topology: Topology, primary: StompConnector, dr: StompConnector
) -> None:
    """The dr-region-loss drill's case: the copy path has drained past the key, the key is past the
    missing cutoff, and the removal found nothing only because DR was busy."""
    key, message_id = _copy_on_dr(primary, dr, topology)
    ledger = memory_ledger()
    ledger.record("ORDERS", [LedgerEntry(key, int(time.time() * 1000) - 11 * 60_000, message_id)])
    settings = PurgeSettings(missing_after=timedelta(minutes=10), retry_not_found_s=0)

    def service(remover: SelectorRemover) -> PurgeService:
        return PurgeService(ledger, remover, topology, settings=settings, primary_statistics=StatisticsClient(primary))

    busy = service(_TooSlowToDispatch(dr)).purge_queue("ORDERS")
    later = service(SelectorRemover(dr)).purge_queue("ORDERS")

    assert (busy.missing, busy.pending) == (0, 1)
    assert (later.purged, later.missing) == (1, 0)
    assert message_id not in dr_state(dr)[0]


def test_an_old_consumed_key_with_no_copy_on_dr_is_still_given_up(
    topology: Topology, primary: StompConnector, dr: StompConnector
) -> None:
    ledger = memory_ledger()
    ledger.record("ORDERS", [LedgerEntry(str(ULID()), int(time.time() * 1000) - 11 * 60_000, NOWHERE)])
    service = PurgeService(
        ledger,
        SelectorRemover(dr),
        topology,
        settings=PurgeSettings(missing_after=timedelta(minutes=10), retry_not_found_s=0),
        primary_statistics=StatisticsClient(primary),
    )

    assert service.purge_queue("ORDERS").missing == 1
    assert ledger.pending("ORDERS") == []
