"""Moving an active-active queue's consumers through the command line, on a deployed two-region pair.

One pair for the module (``examples/active-active.yaml``), driven through ``brokersync`` as an
operator's shell runs it. The tests run in file order: a refused plan, a plan, the move to the
DR broker, consumption there removed from the primary by the primary region's purge loop,
then every queue consumed on DR moved back in one execution.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from ulid import ULID

from brokersync_local.browsing import browse
from brokersync_local.world import WorldPorts
from tests.e2e.operator_pair import OperatorPair, operator_pair
from tests.integration.stomp_helpers import produce, receive
from tests.ports import shifted_ports

pytestmark = pytest.mark.broker
ROOT = Path(__file__).resolve().parents[2]
PORTS = shifted_ports(
    WorldPorts(primary_openwire=61866, primary_stomp=61863, dr_openwire=62866, dr_stomp=62863, aws=5265)
)
HOME, AWAY = "us-east-1", "us-west-2"
EAST, WEST = "orders-use1", "orders-usw2"
QUEUE = "CARTS"


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[OperatorPair]:
    topology = ROOT / "examples" / "active-active.yaml"
    with operator_pair(topology, tmp_path_factory.mktemp("move"), PORTS) as running:
        yield running


def test_a_plan_to_move_a_sync_queue_is_refused_with_the_reason(pair: OperatorPair) -> None:
    code, planned = pair.cli(AWAY, "move-queue", "ORDERS", "--to", WEST, "--plan")

    assert code == 1 and "only active-active queues can move" in planned["refused"]


def test_a_plan_names_the_queue_the_sides_and_the_region_it_runs_in(pair: OperatorPair) -> None:
    code, planned = pair.cli(AWAY, "move-queue", QUEUE, "--to", WEST, "--plan")

    assert (code, planned["refused"], planned["would_run_in"]) == (0, None, AWAY)
    assert (planned["queues"], planned["from"], planned["to"]) == ([QUEUE], EAST, WEST)
    assert planned["steps"][:3] == ["Plan", "AlreadyThere", "DrainStatus"]


def test_status_reads_the_relay_on_the_dr_broker_too(pair: OperatorPair) -> None:
    _, status = pair.cli(AWAY, "status", "--json")

    health = status["health"]
    assert isinstance(health["dr_relay"]["advisories_waiting"], int), health.get("unmeasured")
    assert "drRelay" not in (health.get("unmeasured") or {})
    assert not [p for p in status["problems"] if "relay" in p]


def test_the_move_succeeds_and_status_names_the_queue_consumed_on_dr(pair: OperatorPair) -> None:
    code, outcome = pair.cli(AWAY, "move-queue", QUEUE, "--to", WEST)
    assert (code, outcome["status"]) == (0, "SUCCEEDED"), outcome

    _, status = pair.cli(AWAY, "status", "--json")
    assert status["active"] == {QUEUE: WEST}
    assert (status["primary"], status["dr"]) == (EAST, WEST)  # the pair's roles did not move
    assert not [p for p in status["problems"] if "purge loop" in p]  # the move started the primary region's


def test_what_dr_consumes_after_the_move_leaves_the_primary_and_nothing_else_does(pair: OperatorPair) -> None:
    east, west = pair.connectors[EAST], pair.connectors[WEST]
    produce(east, QUEUE, [(f"east {i}", {"correlation-id": str(ULID())}) for i in range(30)])
    produce(west, QUEUE, [(f"west {i}", {"correlation-id": str(ULID())}) for i in range(30)])
    _wait(lambda: len(browse(west, QUEUE)) == 60 and len(browse(east, QUEUE)) == 60, "the copies to arrive")

    consumed = {f.headers["message-id"] for f in receive(west, QUEUE, 40)}
    _wait(lambda: len(browse(east, QUEUE)) == 20, "the primary's purge to remove what DR consumed")

    left = browse(east, QUEUE)
    assert len(consumed) == 40
    assert {f.headers["message-id"] for f in left}.isdisjoint(consumed)
    assert [f for f in left if f.headers.get("redelivered", "false") != "false"] == []


def test_every_queue_consumed_on_dr_moves_back_in_one_execution(pair: OperatorPair) -> None:
    code, outcome = pair.cli(HOME, "move-queue", "--all-from", WEST, "--to", EAST)
    assert (code, outcome["status"]) == (0, "SUCCEEDED"), outcome

    _, status = pair.cli(HOME, "status", "--json")
    assert status["active"] == {}


def _wait(done: object, what: str, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not done():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.5)
