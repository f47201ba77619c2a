"""The one invariant, as a property of the real pair under random interleavings.

Whatever the order of produce, consume, capture, purge and DR broker restarts, on either
sync key (ORDERS by ULID correlation id, PAYMENTS by message id), with producers that retry
(two messages, one correlation id), lower-case ULIDs, purge rounds spanning more than 16
selector batches (short selectors, so small rounds reach many groups) and sharing one kept
connection as a purge run's rounds do (a DR restart closes it under them), and one or two
parallel bridges (which do not keep order): once the copy settles and everything consumed
was captured and purged, each DR queue holds exactly the messages still on the primary
(by message id), and none of them was ever redelivered.

Profiles: ``ci`` (the default) runs 100 examples, split over the two bridge settings (about
3 s each on two cores; a DR restart adds a few seconds, as the bridge's reconnect backoff of
1, 2, 4 and then 5 s meets the restarted broker, decisions 0025 and 0053);
``BROKERSYNC_PROPERTY_PROFILE=long`` runs 2,000.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from ulid import ULID

from brokersync.broker.statistics import StatisticsClient
from brokersync.broker.stomp import StompConnector
from brokersync.capture.relay import AdvisoryRelay, RelaySettings
from brokersync.capture.writer import LedgerWriter
from brokersync.exceptions import BrokerUnavailableError
from brokersync.ledger import Ledger, memory_ledger
from brokersync.purge.remover import RemoverSettings, SelectorRemover
from brokersync.purge.service import PurgeService, PurgeSettings
from brokersync.topology import Topology, load_topology
from brokersync_local.browsing import browse
from brokersync_local.restarts import restart_dr
from brokersync_local.world import LocalWorld, WorldPorts
from tests.emptying import empty_pair
from tests.integration.stomp_helpers import produce, receive
from tests.ports import shifted_ports

pytestmark = pytest.mark.broker

# Shrinking replays plans on real brokers and can outlast any timeout, hiding the failure: CI
# reports the first failing plan as drawn (replay it with run_plan); the long profile shrinks.
_NO_SHRINK = (Phase.explicit, Phase.reuse, Phase.generate)
_COMMON = {"deadline": None, "suppress_health_check": list(HealthCheck), "print_blob": True}
settings.register_profile("smoke", max_examples=8, phases=_NO_SHRINK, **_COMMON)
settings.register_profile("ci", max_examples=50, phases=_NO_SHRINK, **_COMMON)
settings.register_profile("long", max_examples=1_000, **_COMMON)
PROFILE = os.environ.get("BROKERSYNC_PROPERTY_PROFILE", "ci")
QUEUES = ("ORDERS", "PAYMENTS")
TWO_BRIDGE_PORTS = shifted_ports(
    WorldPorts(primary_openwire=61736, primary_stomp=61733, dr_openwire=62736, dr_stomp=62733, aws=5125)
)
#: Short selectors: a round of 70+ ids spans more than 16 selector batches, so several groups.
REMOVER = RemoverSettings(selector_bytes=400, settle_s=0.2)
RELAY = RelaySettings(flush_interval_s=0.02, stall_timeout_s=5)

produce_step = st.tuples(
    st.just("produce"),
    st.sampled_from(QUEUES),
    st.integers(1, 30),
    st.sampled_from(["fresh", "retry", "lower"]),  # retry: every message sent twice with one key
)
consume_step = st.tuples(st.just("consume"), st.sampled_from(QUEUES), st.integers(1, 30), st.just(""))
# A DR restart costs seconds, so it is one "other" step in seven (about one example in six).
other_step = st.tuples(st.sampled_from(["capture", "purge"] * 3 + ["restart-dr"]), st.just(""), st.just(0), st.just(""))
steps = st.lists(st.one_of(produce_step, produce_step, consume_step, consume_step, other_step), min_size=3, max_size=9)


@pytest.fixture(scope="module")
def two_bridge_world(tmp_path_factory: pytest.TempPathFactory, topology_path: Path) -> Iterator[LocalWorld]:
    base = load_topology(topology_path)
    # Two bridges each back off on their own after a DR restart, and the copy settles only when
    # both are back, each within the shipped reconnect cap (decision 0053).
    bridge = base.tuning.bridge.model_copy(update={"parallel_bridges": 2})
    topology = base.model_copy(update={"tuning": base.tuning.model_copy(update={"bridge": bridge})})
    world = LocalWorld(topology, tmp_path_factory.mktemp("two-bridges"), TWO_BRIDGE_PORTS)
    world.up(timeout_s=90, log=lambda _msg: None)
    try:
        yield world
    finally:
        world.destroy()


@pytest.fixture(params=[1, 2], ids=["one-bridge", "two-bridges"])
def pair(request: pytest.FixtureRequest) -> LocalWorld:
    return request.getfixturevalue("world" if request.param == 1 else "two_bridge_world")


def _produce(connector: StompConnector, queue: str, count: int, how: str) -> None:
    messages: list[tuple[str, dict[str, str]]] = []
    for index in range(count):
        key = str(ULID())
        key = key.lower() if how == "lower" else key
        headers = {"correlation-id": key} if queue == "ORDERS" else {}
        messages.append((f"{queue} {index}", headers))
        if how == "retry":  # the producer's receipt was lost: it sends the same message again
            messages.append((f"{queue} {index} (retry)", headers))
    produce(connector, queue, messages)


def _restart_dr(world: LocalWorld) -> None:
    """A clean restart of the DR broker (its journal kept); the bridge reconnects by itself.

    The copy settles first: a DR broker that stops while the bridge has copies in flight gets
    them again with their redelivery counter raised by the *bridge* (its consumer on the
    primary closes with them unacked), which is the copy path's doing, not the purge's, and is
    documented (docs: "DR broker restarts"). The purge's rounds still meet the restart anywhere.
    """
    _settle(world)
    restart_dr(world)


def _settle(world: LocalWorld) -> None:
    stats = StatisticsClient(StompConnector(world.topology.primary.stomp))
    backlog_queues = [world.topology.dr_name(q) for q in QUEUES]
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        stats_now = stats.queue_stats(backlog_queues)
        if all(s.size == 0 for s in stats_now.values()):
            return
        time.sleep(0.1)
    raise AssertionError("the copy did not settle")


def _purge(purge: PurgeService, queue: str, errors: list[str] | None = None) -> None:
    """One round, as the loop runs it: a broker that is restarting is tried again later."""
    try:
        purge.purge_queue(queue)
    except BrokerUnavailableError as e:
        if errors is not None:
            errors.append(f"{time.monotonic():.1f} {e}")
        time.sleep(0.2)


def _finish(world: LocalWorld, relay: AdvisoryRelay, purge: PurgeService, ledger: Ledger) -> None:
    _settle(world)
    for _ in range(30):
        if relay.run(max_seconds=0.3).captured == 0:
            break
    errors: list[str] = []
    deadline = time.monotonic() + 90
    while any(ledger.pending(q) for q in QUEUES) and time.monotonic() < deadline:
        for queue in QUEUES:
            _purge(purge, queue, errors)
    left = {q: len(ledger.pending(q)) for q in QUEUES}
    assert not any(left.values()), f"consumed messages stayed pending: {left}; purge errors: {errors[-5:]}"


def _empty(world: LocalWorld) -> None:
    """Take what the last example left, with the advisories that taking it raises: left on
    their queue, a relay would take them for this example's consumption."""
    empty_pair(world.topology, list(QUEUES))


@pytest.mark.timeout(3_600)
@settings(settings.get_profile(PROFILE))
@given(plan=steps)
def test_whatever_the_interleaving_dr_ends_holding_exactly_what_the_primary_holds(
    pair: LocalWorld, plan: list[tuple[str, str, int, str]]
) -> None:
    run_plan(pair, plan)


def run_plan(pair: LocalWorld, plan: list[tuple[str, str, int, str]]) -> None:
    """Play ``plan`` on ``pair``, finish, and check both DR queues (a falsifying plan replays here)."""
    topology: Topology = pair.topology
    primary, dr = StompConnector(topology.primary.stomp), StompConnector(topology.dr.stomp)
    _empty(pair)
    ledger = memory_ledger()
    relay = AdvisoryRelay(primary, LedgerWriter(ledger), topology, settings=RELAY)
    purge = PurgeService(ledger, SelectorRemover(dr, REMOVER), topology, settings=PurgeSettings(retry_not_found_s=0))
    consumed: set[str] = set()
    # As in a purge run, the rounds share the remover's connection, across DR restarts too.
    with purge.remover.keeping_connections():
        for step, queue, count, how in plan:
            if step == "produce":
                _produce(primary, queue, count, how)
            elif step == "consume":
                consumed |= {f.headers["message-id"] for f in receive(primary, queue, count, timeout_s=0.3)}
            elif step == "capture":
                relay.run(max_seconds=0.2)
            elif step == "purge":
                for name in QUEUES:
                    _purge(purge, name)
            else:
                _restart_dr(pair)

        _finish(pair, relay, purge, ledger)

    for queue in QUEUES:
        on_primary = {f.headers["message-id"] for f in browse(primary, queue)}
        on_dr = browse(dr, queue)
        assert {f.headers["message-id"] for f in on_dr} == on_primary, queue
        assert not on_primary & consumed
        assert [f.headers["message-id"] for f in on_dr if f.headers.get("redelivered", "false") != "false"] == []
