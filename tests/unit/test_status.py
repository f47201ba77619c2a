"""brokersync status: both regions' records read and judged, nothing written (AWS in moto, brokers unreachable)."""

from __future__ import annotations

from pathlib import Path

import boto3
import pytest

from brokersync.broker.stomp import BrokerCredentials
from brokersync.exceptions import BrokerUnavailableError
from brokersync.failover.steps import Transition, TransitionStore
from brokersync.health import HealthReport
from brokersync.ledger.control import ControlRecords, control_model
from brokersync.ledger.schema import create_ledger_table
from brokersync.roles import RoleAssignment, RoleStore
from brokersync.topology import Broker, Topology, load_topology
from brokersync_cli.status import BROKEN, PairStatus, RegionView, StatusReader, format_status

TABLE = "brokersync-orders-ledger"
ROOT = Path(__file__).resolve().parents[2]


def _unreachable_broker(broker: Broker) -> object:
    raise BrokerUnavailableError(f"no STOMP endpoint of {broker.name} accepted a connection")


@pytest.fixture
def topology(topology_path: Path, mocked_aws: None) -> Topology:
    for region in ("us-east-1", "us-west-2"):
        create_ledger_table(boto3.client("dynamodb", region_name=region), TABLE, ROOT / "template.yaml")
    return load_topology(topology_path)


def _records(region: str) -> ControlRecords:
    return ControlRecords(control_model(TABLE, region))


def _reader(topology: Topology) -> StatusReader:
    return StatusReader(topology, TABLE, credentials=_unreachable_broker)  # type: ignore[arg-type]


def test_the_newest_epoch_decides_and_a_replica_behind_is_reported(topology: Topology) -> None:
    initial = RoleAssignment.initial(topology)
    RoleStore(_records("us-east-1")).write(initial.next("seed"))
    store = RoleStore(_records("us-west-2"))
    store.write(initial.next("seed"))
    store.write(store.assignment(topology).swapped("FAILOVER exec-1"))  # us-east-1's replica has not heard

    status = _reader(topology).read()

    assert (status.primary, status.dr, status.epoch) == ("orders-usw2", "orders-use1", 2)
    assert "us-east-1's replica is at epoch 1, us-west-2's at 2" in status.warnings


def test_a_half_done_transition_is_broken_and_says_how_to_finish_it(topology: Topology) -> None:
    TransitionStore(_records("us-west-2")).write(Transition("FAILOVER", "orders-use1", "orders-usw2", "exec-7", 1))

    status = _reader(topology).read()

    assert status.code == BROKEN and status.verdict == "broken"
    assert any("FAILOVER to orders-usw2 is half done (exec-7): re-run it" in p for p in status.problems)


def test_a_primary_that_cannot_be_read_is_broken_and_the_table_says_why(topology: Topology) -> None:
    status = _reader(topology).read()

    assert any("the primary cannot be read" in p for p in status.problems)
    text = format_status(status)
    assert text.startswith("pair: broken   primary orders-use1   DR orders-usw2   epoch 0")
    assert "us-east-1" in text and "us-west-2" in text


def test_advisories_older_than_three_relay_schedules_mean_the_relay_is_stalled(topology: Topology) -> None:
    health = {"relay": {"advisories_waiting": 1200, "oldest_s": 400.0}, "queues": {}}
    status = PairStatus("orders-use1", "orders-usw2", 3, True, {}, health, [], [])

    _reader(topology)._judge_health(status)

    assert any(
        p.startswith("the relay is not draining BROKERSYNC.CONSUMED on orders-use1: 1,200") for p in status.problems
    )
    assert "relay: 1,200 advisories waiting, oldest 400.0s" in format_status(status)


def test_advisories_the_relay_will_take_on_its_next_run_are_not_a_problem(topology: Topology) -> None:
    health = {"relay": {"advisories_waiting": 40, "oldest_s": 35.0}, "queues": {}}
    status = PairStatus("orders-use1", "orders-usw2", 3, True, {}, health, [], [])

    _reader(topology)._judge_health(status)

    assert status.problems == []


def test_a_stalled_relay_on_the_dr_broker_of_an_active_active_pair_is_broken(topology: Topology) -> None:
    health = {
        "relay": {"advisories_waiting": 0, "oldest_s": None},
        "dr_relay": {"advisories_waiting": 310, "oldest_s": 600.0},
        "queues": {},
    }
    status = PairStatus("orders-use1", "orders-usw2", 3, True, {}, health, [], [])

    _reader(topology)._judge_health(status)

    assert any(
        p.startswith("the relay on the DR broker orders-usw2 is not draining its BROKERSYNC.CONSUMED: 310")
        and "a switchover waits for it" in p
        for p in status.problems
    )
    text = format_status(status)
    assert "relay: 0 advisories waiting, oldest -" in text
    assert "DR relay: 310 advisories waiting, oldest 600.0s" in text


def test_a_dr_relay_with_advisories_it_will_take_on_its_next_run_is_not_a_problem(topology: Topology) -> None:
    health = {"relay": None, "dr_relay": {"advisories_waiting": 12, "oldest_s": 20.0}, "queues": {}}
    status = PairStatus("orders-use1", "orders-usw2", 3, True, {}, health, [], [])

    _reader(topology)._judge_health(status)

    assert not any("DR broker" in p for p in status.problems)


def test_a_pair_without_active_active_queues_shows_no_dr_relay(topology: Topology) -> None:
    health = {"relay": {"advisories_waiting": 3, "oldest_s": 1.0}, "queues": {}}
    status = PairStatus("orders-use1", "orders-usw2", 3, True, {}, health, [], [])

    assert "DR relay" not in format_status(status)


def test_only_an_active_active_pair_reads_the_dr_brokers_relay(mocked_aws: None) -> None:
    plain = load_topology(ROOT / "topology.yaml")
    both_ways = load_topology(ROOT / "examples" / "active-active.yaml")
    for region in ("us-east-1", "us-west-2"):
        create_ledger_table(boto3.client("dynamodb", region_name=region), TABLE, ROOT / "template.yaml")
    for topology, expected in ((plain, False), (both_ways, True)):
        health = _reader(topology).read().health or {}

        assert ("dr_relay" in health) is expected
        assert health.get("dr_relay") is None  # the brokers cannot be read here


def test_a_broker_with_no_consumed_queue_yet_has_no_advisory_waiting(
    topology: Topology, monkeypatch: pytest.MonkeyPatch
) -> None:
    class NoQueues:
        def __init__(self, _connector: object) -> None:
            pass

        def queue_stats(self, _names: list[str]) -> dict[str, object]:
            return {}  # a new DR broker: nothing has created BROKERSYNC.CONSUMED on it yet

    monkeypatch.setattr("brokersync_cli.status.StatisticsClient", NoQueues)
    reader = StatusReader(topology, TABLE, credentials=lambda _b: BrokerCredentials("u", "p"))
    report = HealthReport(None, 3, "orders-use1", "orders-usw2", True, [])

    relay = reader._relay(report, "orders-usw2", "drRelay")

    assert relay == {"advisories_waiting": 0, "oldest_s": None}
    assert report.unmeasured == {}


def test_a_dr_broker_that_cannot_be_read_is_not_said_again_for_its_relay(topology: Topology) -> None:
    unmeasured = {"drDepth": "connection refused", "drRelay": "connection refused"}
    health = {"unmeasured": unmeasured, "relay": None, "dr_relay": None, "queues": {}}
    status = PairStatus("orders-use1", "orders-usw2", 3, True, {}, health, [], [])

    _reader(topology)._judge_health(status)

    assert not any("drRelay" in w for w in status.warnings)


def test_a_dr_broker_that_cannot_be_read_degrades_the_pair_and_says_copies_wait(topology: Topology) -> None:
    health = {"bridge_connected": False, "unmeasured": {"drDepth": "connection refused"}, "queues": {}}
    status = PairStatus("orders-use1", "orders-usw2", 3, True, {}, health, [], [])

    _reader(topology)._judge_health(status)

    assert status.problems == []
    assert status.warnings == [
        "the DR broker orders-usw2 cannot be read (connection refused): copies wait in the primary's outflow "
        "until it is back (the loss window grows)"
    ]


def test_a_bridge_down_while_the_dr_broker_answers_is_broken(topology: Topology) -> None:
    health = {"bridge_connected": False, "queues": {}}
    status = PairStatus("orders-use1", "orders-usw2", 3, True, {}, health, [], [])

    _reader(topology)._judge_health(status)

    assert any(
        p.startswith("the bridge to the DR broker is not connected though orders-usw2 answers") for p in status.problems
    )


def test_a_dr_queue_near_its_memory_limit_degrades_the_pair_and_says_what_to_raise(topology: Topology) -> None:
    health = {"bridge_connected": True, "queues": {"ORDERS": {"dr_memory_percent": 64}}}
    status = PairStatus("orders-use1", "orders-usw2", 3, True, {}, health, [], [])

    _reader(topology)._judge_health(status)

    assert status.problems == []
    assert len(status.warnings) == 1
    assert status.warnings[0].startswith("ORDERS: 64% of its memory limit in use on DR")
    assert "tuning.dr.memory_limit_mb" in status.warnings[0]


def test_a_dr_broker_near_its_own_memory_limit_degrades_the_pair_though_every_queue_is_below_its_mark(
    topology: Topology,
) -> None:
    health = {"bridge_connected": True, "dr_broker_memory_percent": 92, "queues": {"ORDERS": {"dr_memory_percent": 47}}}
    status = PairStatus("orders-use1", "orders-usw2", 3, True, {}, health, [], [])

    _reader(topology)._judge_health(status)

    assert status.problems == []
    assert len(status.warnings) == 1
    assert status.warnings[0].startswith("the DR broker uses 92% of its own memory")


def test_a_dr_broker_that_cannot_be_read_is_said_once_not_once_per_figure(topology: Topology) -> None:
    health = {"bridge_connected": None, "unmeasured": {"drDepth": "refused", "drMemory": "refused"}, "queues": {}}
    status = PairStatus("orders-use1", "orders-usw2", 3, True, {}, health, [], [])

    _reader(topology)._judge_health(status)

    assert len(status.warnings) == 1 and status.warnings[0].startswith("the DR broker orders-usw2 cannot be read")


def test_messages_produced_on_dr_to_an_active_active_queue_are_shown_until_they_reach_the_primary(
    topology: Topology,
) -> None:
    queues = {"ORDERS": {"copy_backlog": 0}, "CARTS": {"copy_backlog": 0, "return_backlog": 1234}}
    status = PairStatus("orders-use1", "orders-usw2", 3, True, {}, {"queues": queues}, [], [])

    assert "produced on DR, not yet copied to the primary (active-active): CARTS 1,234" in format_status(status)


def test_a_queue_consumed_on_dr_is_named_on_the_status_line(mocked_aws: None) -> None:
    topology = load_topology(ROOT / "examples" / "active-active.yaml")
    for region in ("us-east-1", "us-west-2"):
        create_ledger_table(boto3.client("dynamodb", region_name=region), TABLE, ROOT / "template.yaml")
    moved = RoleAssignment.initial(topology).moved("CARTS", "orders-usw2", "MOVE CARTS exec-1")
    for region in ("us-east-1", "us-west-2"):
        RoleStore(_records(region)).write(moved)

    status = _reader(topology).read()

    assert status.active == {"CARTS": "orders-usw2"}
    assert "consumed off the primary: CARTS on orders-usw2" in format_status(status)


def test_a_queue_consumed_on_dr_without_a_purge_loop_in_the_primarys_region_is_broken(topology: Topology) -> None:
    views = {
        "us-east-1": RegionView("us-east-1", purge_loops_running=0),
        "us-west-2": RegionView("us-west-2", purge_loops_running=1),
    }
    health = {"queues": {}}
    status = PairStatus("orders-use1", "orders-usw2", 4, True, views, health, [], [], active={"CARTS": "orders-usw2"})

    _reader(topology)._judge_health(status)

    expected = "no purge loop runs in the primary's region us-east-1, yet CARTS is consumed on DR"
    assert any(expected in p for p in status.problems)


def test_an_old_primary_running_its_primary_configuration_is_broken_and_says_to_fail_back(topology: Topology) -> None:
    health = {"stale_primaries": ["orders-use1"], "queues": {}}
    status = PairStatus("orders-usw2", "orders-use1", 4, True, {}, health, [], [])

    _reader(topology)._judge_health(status)

    assert status.problems == [
        "orders-use1 runs the primary configuration though the role record calls it DR (an old primary back): "
        "it copies to its peer; run the failback, which rejoins it as DR"
    ]


def test_a_configuration_behind_the_topology_degrades_the_pair_and_names_the_command(topology: Topology) -> None:
    drift = {"orders-use1": ['+        <compositeQueue name="INVOICES" forwardOnly="false">', "+  <forwardTo>"]}
    health = {"configuration_drift": drift, "queues": {}}
    status = PairStatus("orders-use1", "orders-usw2", 3, True, {}, health, [], [])

    _reader(topology)._judge_health(status)

    assert status.problems == []
    (warning,) = status.warnings
    assert warning.startswith("orders-use1 runs a configuration behind the topology (2 lines differ, first: +")
    assert 'name="INVOICES"' in warning
    assert warning.endswith("brokersync apply-config --role primary --reboot")


def test_configurations_that_cannot_be_read_are_one_warning(topology: Topology) -> None:
    unread = {"stalePrimary": "orders-use1: AccessDenied", "forwardingConnectors": "orders-use1: AccessDenied"}
    health = {"unmeasured": unread, "queues": {}}
    status = PairStatus("orders-use1", "orders-usw2", 3, True, {}, health, [], [])

    _reader(topology)._judge_health(status)

    assert status.warnings == ["broker configurations not read: orders-use1: AccessDenied"]


def test_a_drifted_broker_with_a_revision_applied_and_not_rebooted_onto_says_so(topology: Topology) -> None:
    drift = {"orders-usw2": ['+        <compositeQueue name="INVOICES.DR" forwardOnly="true">']}
    health = {"configuration_drift": drift, "pending_revisions": {"orders-usw2": 7}, "queues": {}}
    status = PairStatus("orders-use1", "orders-usw2", 3, True, {}, health, [], [])

    _reader(topology)._judge_health(status)

    (warning,) = status.warnings
    assert "; revision 7 is applied and waits for a reboot): brokersync apply-config --role dr --reboot" in warning


def test_a_queue_the_primary_has_no_outflow_for_is_broken_as_not_copied_not_as_a_bridge_down(
    topology: Topology,
) -> None:
    health = {"bridge_connected": False, "missing_outflows": ["INVOICES"], "queues": {}}
    status = PairStatus("orders-use1", "orders-usw2", 3, True, {}, health, [], [])

    _reader(topology)._judge_health(status)

    assert status.problems == [
        "INVOICES is not copied: the primary orders-use1 has no outflow for it, so its configuration is behind the "
        "topology (brokersync apply-config --role dr --reboot, then --role primary --reboot)"
    ]


def test_a_configuration_the_render_refuses_is_said_as_unchecked_drift_not_as_unread(topology: Topology) -> None:
    unmeasured = {"configurationDrift": "orders-usw2: <fooPlugin> is not allowed by Amazon MQ"}
    health = {"unmeasured": unmeasured, "queues": {}}
    status = PairStatus("orders-use1", "orders-usw2", 3, True, {}, health, [], [])

    _reader(topology)._judge_health(status)

    assert status.warnings == ["configuration drift not checked: orders-usw2: <fooPlugin> is not allowed by Amazon MQ"]
