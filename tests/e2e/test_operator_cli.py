"""The operator's command line against a deployed two-region pair: status, a plan that touches nothing, a switchover.

One pair for the module, driven only through ``brokersync`` as an operator's shell runs it
(an AWS endpoint, a region, the stack's topology). The tests run in file order, each leaving
the pair as the next expects: healthy, then the plan, then a switchover through the command
line, then the DR broker stopped.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from brokersync_local.world import WorldPorts
from tests.e2e.operator_pair import OperatorPair, operator_pair
from tests.integration.stomp_helpers import produce
from tests.ports import shifted_ports

pytestmark = pytest.mark.broker
PORTS = shifted_ports(
    WorldPorts(primary_openwire=61806, primary_stomp=61803, dr_openwire=62806, dr_stomp=62803, aws=5205)
)
HOME, AWAY = "us-east-1", "us-west-2"
#: Messages left unconsumed on the primary: copied to DR, so both brokers hold something the plan could touch.
WAITING = 25


@pytest.fixture(scope="module")
def pair(topology_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[OperatorPair]:
    with operator_pair(topology_path, tmp_path_factory.mktemp("operator"), PORTS) as running:
        queue = running.queue
        produce(
            running.connectors["orders-use1"],
            queue,
            [(f"waiting-{i}", {"correlation-id": f"w-{i}"}) for i in range(WAITING)],
        )
        yield running


def test_status_of_a_healthy_pair_exits_0_and_names_the_roles(pair: OperatorPair) -> None:
    code, status = pair.status_until(AWAY, 0)

    assert (code, status["verdict"], status["problems"], status["warnings"]) == (0, "healthy", [], [])
    assert (status["primary"], status["dr"]) == ("orders-use1", "orders-usw2")
    assert status["health"]["relay"]["advisories_waiting"] == 0


def test_a_queue_added_to_the_topology_and_not_applied_is_named_as_not_copied_with_the_commands(
    pair: OperatorPair, tmp_path: Path
) -> None:
    """The operator edited the topology and has not run apply-config: neither broker runs what it says."""
    grown = pair.topology.model_dump(mode="json")
    grown["queues"].append({**grown["queues"][0], "name": "INVOICES"})
    edited = tmp_path / "topology.yaml"
    edited.write_text(yaml.safe_dump(grown), encoding="utf-8")

    code, status = pair.cli(AWAY, "status", "--json", "--topology", str(edited))

    assert code == 1, status
    assert any(
        p.startswith("INVOICES is not copied: the primary orders-use1 has no outflow") for p in status["problems"]
    )
    behind = [w for w in status["warnings"] if " runs a configuration behind the topology " in w]
    assert sorted(w.split(" ")[0] for w in behind) == ["orders-use1", "orders-usw2"], status["warnings"]
    assert all("INVOICES" in w for w in behind), behind
    assert any(w.endswith("brokersync apply-config --role primary --reboot") for w in behind), behind


def test_a_failover_plan_changes_nothing_on_either_broker_or_in_either_regions_records(pair: OperatorPair) -> None:
    pair.status_until(AWAY, 0)  # the copies of the waiting messages have arrived
    before = {name: pair.broker_state(name) for name in ("orders-use1", "orders-usw2")}, pair.records()

    code, planned = pair.cli(AWAY, "failover", "--plan")

    after = {name: pair.broker_state(name) for name in ("orders-use1", "orders-usw2")}, pair.records()
    assert after[1] == before[1]  # the role and transition records, in both regions
    for name in ("orders-use1", "orders-usw2"):
        assert after[0][name]["ids"] == before[0][name]["ids"], name
        assert after[0][name]["counters"] == before[0][name]["counters"], name
    assert (code, planned["refused"], planned["would_run_in"]) == (0, None, AWAY)
    assert (planned["from"], planned["to"]) == ("orders-use1", "orders-usw2")
    assert planned["now"]["lost_at_most"] == 0  # every waiting message is already copied
    assert len(before[0]["orders-usw2"]["ids"][pair.queue]) == WAITING


def test_a_switchover_plan_runs_the_state_machines_drain_check(pair: OperatorPair) -> None:
    code, planned = pair.cli(AWAY, "switchover", "--plan")

    assert (code, planned["refused"], planned["resumes"], planned["nothing_to_do"]) == (0, None, None, False)
    assert planned["drain_now"]["drained"] is True and planned["drain_waits_for"] == []


def test_a_switchover_through_the_command_line_swaps_the_roles_and_keeps_every_message(pair: OperatorPair) -> None:
    code, outcome = pair.cli(AWAY, "switchover")

    assert (code, outcome["status"], outcome["region"]) == (0, "SUCCEEDED", AWAY), outcome
    code, status = pair.status_until(AWAY, 0)
    assert (code, status["primary"], status["dr"]) == (0, "orders-usw2", "orders-use1"), status
    on_both = [pair.broker_state(name)["ids"][pair.queue] for name in ("orders-usw2", "orders-use1")]
    assert [len(ids) for ids in on_both] == [WAITING, WAITING]


def test_status_with_the_dr_broker_stopped_is_degraded_and_says_why(pair: OperatorPair) -> None:
    pair.stop_broker("orders-use1")

    code, status = pair.cli(AWAY, "status", "--json")
    text_code, text = pair.text_cli(AWAY, "status")

    assert (code, status["verdict"]) == (3, "degraded"), status
    assert any(w.startswith("the DR broker orders-use1 cannot be read") for w in status["warnings"]), status
    assert text_code == 3 and "~ the DR broker orders-use1 cannot be read" in text
