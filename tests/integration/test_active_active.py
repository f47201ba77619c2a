"""An active-active queue on the real pair: produced to on both brokers, copied both ways once.

The pair runs ``examples/active-active.yaml`` as rendered: ``CARTS`` is active-active (consumed
on the primary), ``ORDERS`` beside it is a one-way sync queue. Every check counts message ids
and queue counters on both brokers, because a loop shows up as a second copy on a broker or as
copies parked in an outflow, never as an error.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from ulid import ULID

from brokersync.broker.statistics import StatisticsClient
from brokersync.broker.stomp import StompConnector
from brokersync.capture.relay import AdvisoryRelay, RelayReport
from brokersync.capture.writer import LedgerWriter
from brokersync.ledger import Ledger, memory_ledger
from brokersync.purge.remover import SelectorRemover
from brokersync.purge.service import PurgeService, PurgeSettings
from brokersync.roles import RoleAssignment
from brokersync.sides import Duty, capture_duties, purge_duties
from brokersync.topology import Topology, load_topology
from brokersync_local.browsing import browse
from brokersync_local.world import LocalWorld, WorldPorts
from tests.emptying import empty_pair
from tests.integration.stomp_helpers import produce, receive
from tests.integration.sync_helpers import FAST, capture_and_purge
from tests.ports import shifted_ports

pytestmark = pytest.mark.broker
ROOT = Path(__file__).resolve().parents[2]
PORTS = shifted_ports(
    WorldPorts(primary_openwire=61816, primary_stomp=61813, dr_openwire=62816, dr_stomp=62813, aws=5215)
)
QUEUE = "CARTS"


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalWorld]:
    world = LocalWorld(load_topology(ROOT / "examples" / "active-active.yaml"), tmp_path_factory.mktemp("aa"), PORTS)
    world.up(timeout_s=90, log=lambda _msg: None)
    try:
        yield world
    finally:
        world.destroy()


@pytest.fixture
def topology(pair: LocalWorld) -> Topology:
    return pair.topology


@pytest.fixture
def east(pair: LocalWorld) -> Iterator[StompConnector]:
    """The primary broker; every test leaves both brokers' queues empty."""
    connector = StompConnector(pair.topology.primary.stomp)
    yield connector
    _empty(pair)


@pytest.fixture
def west(pair: LocalWorld) -> StompConnector:
    return StompConnector(pair.topology.dr.stomp)


def _empty(world: LocalWorld) -> None:
    """Take what these tests use on both brokers: the two queues, CARTS's copies, the advisories."""
    empty_pair(world.topology, [QUEUE, "ORDERS"])


def _messages(count: int, origin: str) -> list[tuple[str, dict[str, str]]]:
    return [(f"{origin} {i}", {"correlation-id": str(ULID()), "origin": origin}) for i in range(count)]


def _settled(topology: Topology, timeout_s: float = 30) -> None:
    """Wait until neither broker holds a copy still to be bridged."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        waiting = 0
        for broker in topology.brokers:
            outflow = topology.copy_name(QUEUE, topology.peer(broker))
            stats = StatisticsClient(StompConnector(broker.stomp)).queue_stats([outflow])
            waiting += stats[outflow].size if outflow in stats else 0
        if waiting == 0:
            return
        time.sleep(0.1)
    raise AssertionError("copies were still waiting in an outflow")


def _ids(connector: StompConnector, queue: str = QUEUE) -> list[str]:
    return [frame.headers["message-id"] for frame in browse(connector, queue)]


def test_a_message_produced_on_either_broker_arrives_on_the_other_unchanged(
    topology: Topology, east: StompConnector, west: StompConnector
) -> None:
    key_east, key_west = str(ULID()), str(ULID())
    produce(east, QUEUE, [('{"cart": 1}', {"correlation-id": key_east, "tenant": "acme"})])
    produce(west, QUEUE, [('{"cart": 2}', {"correlation-id": key_west, "tenant": "globex"})])
    _settled(topology)

    on_east = {f.headers["correlation-id"]: f for f in browse(east, QUEUE)}
    on_west = {f.headers["correlation-id"]: f for f in browse(west, QUEUE)}

    assert set(on_east) == set(on_west) == {key_east, key_west}
    for key in (key_east, key_west):
        original, copy = (on_east[key], on_west[key]) if key == key_east else (on_west[key], on_east[key])
        assert copy.headers["message-id"] == original.headers["message-id"]
        assert copy.headers["timestamp"] == original.headers["timestamp"]
        assert copy.headers["tenant"] == original.headers["tenant"]
        assert copy.body == original.body


def test_a_burst_from_both_sides_leaves_each_message_once_on_each_broker(
    topology: Topology, east: StompConnector, west: StompConnector
) -> None:
    produce(east, QUEUE, _messages(150, "east"))
    produce(west, QUEUE, _messages(150, "west"))
    _settled(topology)
    time.sleep(1.0)  # a copy bounced back would arrive after the outflows drained

    ids_east, ids_west = _ids(east), _ids(west)

    assert len(ids_east) == len(set(ids_east)) == 300
    assert sorted(ids_east) == sorted(ids_west)


def test_no_copy_is_forwarded_back_towards_its_origin(
    topology: Topology, east: StompConnector, west: StompConnector
) -> None:
    """Each inflow received exactly the peer's messages, and each outflow carried only its own broker's."""
    produce(east, QUEUE, _messages(50, "east"))
    produce(west, QUEUE, _messages(70, "west"))
    _settled(topology)
    names = topology.copy_names(QUEUE)

    east_stats = StatisticsClient(east).queue_stats([QUEUE, *names])
    west_stats = StatisticsClient(west).queue_stats([QUEUE, *names])

    to_east, to_west = topology.copy_name(QUEUE, topology.primary), topology.copy_name(QUEUE, topology.dr)
    assert east_stats[QUEUE].size == west_stats[QUEUE].size == 120
    assert all(east_stats[name].size == 0 and west_stats[name].size == 0 for name in names if name in east_stats)
    assert to_east not in east_stats or east_stats[to_east].size == 0
    assert west_stats[to_east].enqueue_count - west_stats[to_east].dequeue_count == 0
    assert east_stats[to_west].size == 0


def test_the_sync_queue_beside_it_still_copies_one_way(
    topology: Topology, east: StompConnector, west: StompConnector
) -> None:
    produce(west, "ORDERS", _messages(5, "west"))
    time.sleep(1.5)

    assert receive(east, "ORDERS", 5, timeout_s=0.5) == []
    assert len(receive(west, "ORDERS", 5)) == 5


def test_a_message_produced_on_dr_and_consumed_on_the_primary_leaves_dr(
    topology: Topology, east: StompConnector, west: StompConnector
) -> None:
    """Consumption removes the other copy whichever broker the message was produced on; the rest stays unredelivered."""
    produce(west, QUEUE, _messages(40, "west"))
    produce(east, QUEUE, _messages(40, "east"))
    _settled(topology)
    consumed = {f.headers["message-id"] for f in receive(east, QUEUE, 50)}

    capture_and_purge(topology, east, west, memory_ledger(), QUEUE)

    left = browse(west, QUEUE)
    assert len(consumed) == 50
    assert {f.headers["message-id"] for f in left} == set(_ids(east))
    assert len(left) == 30
    assert [f for f in left if f.headers.get("redelivered", "false") != "false"] == []


def _relay_all(duty: Duty, ledger: Ledger) -> RelayReport:
    """Relay on the duty's broker until an empty pass; the totals of every pass."""
    relay = AdvisoryRelay(
        StompConnector(duty.broker.stomp), LedgerWriter(ledger), duty.whole, settings=FAST, passive=duty.passive
    )
    total = RelayReport()
    for _ in range(30):
        report = relay.run(max_seconds=1.0)
        total.captured += report.captured
        total.passive += report.passive
        if report.captured == 0 and report.passive == 0:
            break
    return total


def _purge_all(duty: Duty, ledger: Ledger) -> None:
    purge = PurgeService(
        ledger,
        SelectorRemover(StompConnector(duty.broker.stomp)),
        duty.view,
        settings=PurgeSettings(retry_not_found_s=0),
    )
    deadline = time.monotonic() + 30
    while ledger.pending(QUEUE) and time.monotonic() < deadline:
        purge.purge_queue(QUEUE)
    assert ledger.pending(QUEUE) == [], "consumed messages stayed pending"


def test_a_queue_consumed_on_dr_is_captured_there_and_its_copies_leave_the_primary(
    topology: Topology, east: StompConnector, west: StompConnector
) -> None:
    """The role record moves CARTS's consumption to DR: DR's relay records it, the primary's purge removes it."""
    moved = RoleAssignment.initial(topology).moved(QUEUE, topology.dr.name, "MOVE test")
    captures = {d.broker.name: d for d in capture_duties(topology, moved)}
    [purge_on_primary] = [d for d in purge_duties(topology, moved) if QUEUE in d.queues]
    assert purge_on_primary.broker.name == topology.primary.name
    produce(west, QUEUE, _messages(40, "west"))
    produce(east, QUEUE, _messages(40, "east"))
    _settled(topology)
    consumed = {f.headers["message-id"] for f in receive(west, QUEUE, 50)}
    ledger = memory_ledger()

    captured_on_dr = _relay_all(captures[topology.dr.name], ledger)
    _purge_all(purge_on_primary, ledger)
    drained_on_primary = _relay_all(captures[topology.primary.name], ledger)

    left = browse(east, QUEUE)
    assert len(consumed) == 50 and captured_on_dr.captured == 50
    assert {f.headers["message-id"] for f in left} == set(_ids(west))
    assert len(left) == 30
    assert [f for f in left if f.headers.get("redelivered", "false") != "false"] == []
    # The purge's 50 removals raised advisories on the primary: drained, none recorded again.
    assert (drained_on_primary.captured, drained_on_primary.passive) == (0, 50)


def test_while_the_primary_consumes_it_the_dr_broker_drains_the_purges_advisories_without_recording_them(
    topology: Topology, east: StompConnector, west: StompConnector
) -> None:
    assignment = RoleAssignment.initial(topology)
    primary_duty, dr_duty = capture_duties(topology, assignment)
    produce(east, QUEUE, _messages(20, "east"))
    _settled(topology)
    receive(east, QUEUE, 20)
    ledger = memory_ledger()

    assert _relay_all(primary_duty, ledger).captured == 20
    _purge_all(purge_duties(topology, assignment)[0], ledger)
    drained = _relay_all(dr_duty, ledger)

    assert (drained.captured, drained.passive) == (0, 20)
    assert StatisticsClient(west).queue_stats(["BROKERSYNC.CONSUMED"])["BROKERSYNC.CONSUMED"].size == 0


def test_a_relay_begun_before_a_queue_moved_records_the_consumption_that_follows_instead_of_draining_it(
    topology: Topology, east: StompConnector, west: StompConnector
) -> None:
    """A relay run on DR began while the primary consumed CARTS (so CARTS's advisories there were
    the purge's); the record then moved CARTS to DR and an application consumed it there. The
    advisories it finds are not drained under the roles it began with: they stay for the next
    run, which records them, and the primary's purge removes their copies."""
    before = RoleAssignment.initial(topology)
    moved = before.moved(QUEUE, topology.dr.name, "MOVE test")
    [stale_duty] = [d for d in capture_duties(topology, before) if d.broker.name == topology.dr.name]
    [moved_duty] = [d for d in capture_duties(topology, moved) if d.broker.name == topology.dr.name]
    assert QUEUE in stale_duty.passive
    produce(west, QUEUE, _messages(20, "west"))
    _settled(topology)
    consumed = {f.headers["message-id"] for f in receive(west, QUEUE, 20)}
    ledger = memory_ledger()

    stale = AdvisoryRelay(
        StompConnector(stale_duty.broker.stomp),
        LedgerWriter(ledger),
        stale_duty.whole,
        settings=FAST,
        passive=stale_duty.passive,
        roles_hold=lambda: False,  # the record moved after this run read it
    ).run(max_seconds=3.0)
    after = _relay_all(moved_duty, ledger)
    [purge_on_primary] = [d for d in purge_duties(topology, moved) if QUEUE in d.queues]
    _purge_all(purge_on_primary, ledger)

    assert (stale.passive, stale.captured) == (0, 0) and stale.passive_deferred > 0
    assert len(consumed) == 20 and after.captured == 20
    assert browse(east, QUEUE) == []  # every copy of what DR consumed left the primary
