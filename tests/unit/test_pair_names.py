"""The CLI finds the pair it was named, and no other, when several pairs share an account and region."""

from __future__ import annotations

import json
from typing import Any

import boto3
import pytest

from brokersync.topology import Topology, load_topology
from brokersync_cli.names import alarm_names, ledger_table, pair_of_table
from brokersync_cli.status import StatusReader
from brokersync_cli.transitions import TransitionRefused, find_machine

REGION = "us-west-2"
ROLE = "arn:aws:iam::123456789012:role/sfn"
DEFINITION = json.dumps({"StartAt": "Done", "States": {"Done": {"Type": "Succeed"}}})


def _machines(*names: str) -> Any:
    sfn = boto3.client("stepfunctions", region_name=REGION)
    for name in names:
        sfn.create_state_machine(name=name, definition=DEFINITION, roleArn=ROLE)
    return sfn


def test_a_table_name_says_its_pair_and_one_the_template_would_not_give_says_none() -> None:
    assert pair_of_table(ledger_table("orders-eu")) == "orders-eu"
    assert pair_of_table("my-own-ledger") is None
    assert pair_of_table("brokersync-Orders-ledger") is None


def test_a_transition_starts_the_named_pairs_machine_beside_a_pair_whose_name_begins_the_same(mocked_aws: None) -> None:
    sfn = _machines("brokersync-orders-eu-failover", "brokersync-orders-failover", "brokersync-billing-failover")

    assert find_machine(sfn, "failover", ledger_table("orders"))["name"] == "brokersync-orders-failover"
    assert find_machine(sfn, "switchover", ledger_table("orders-eu"))["name"] == "brokersync-orders-eu-failover"


def test_a_pair_without_its_machine_in_the_region_is_refused_by_the_name_it_looked_for(mocked_aws: None) -> None:
    sfn = _machines("brokersync-billing-failback")

    with pytest.raises(TransitionRefused, match=r"expected brokersync-orders-failback .* found none"):
        find_machine(sfn, "failback", ledger_table("orders"))


def test_a_table_of_another_shape_takes_the_regions_one_machine_of_the_kind_and_refuses_two(mocked_aws: None) -> None:
    sfn = _machines("brokersync-orders-move-queue")
    assert find_machine(sfn, "move-queue", "my-own-ledger")["name"] == "brokersync-orders-move-queue"

    _machines("brokersync-billing-move-queue")
    with pytest.raises(TransitionRefused, match=r"found \[.brokersync-billing-move-queue., .brokersync-orders-move"):
        find_machine(sfn, "move-queue", "my-own-ledger")


def test_the_machine_is_found_on_a_later_page_of_the_regions_state_machines(mocked_aws: None) -> None:
    sfn = _machines(*(f"brokersync-team{i:03d}-failover" for i in range(120)), "brokersync-orders-failover")

    assert find_machine(sfn, "failover", ledger_table("orders"))["name"] == "brokersync-orders-failover"


@pytest.fixture
def topology(topology_path: Any) -> Topology:
    return load_topology(topology_path)


def _alarm(cloudwatch: Any, name: str, state: str) -> None:
    cloudwatch.put_metric_alarm(
        AlarmName=name,
        Namespace="BrokerSync",
        MetricName="CopyBacklogTotal",
        Statistic="Maximum",
        Period=60,
        EvaluationPeriods=1,
        Threshold=1,
        ComparisonOperator="GreaterThanThreshold",
    )
    cloudwatch.set_alarm_state(AlarmName=name, StateValue=state, StateReason="test")


def test_status_shows_the_pairs_alarms_in_alarm_and_not_another_pairs(mocked_aws: None, topology: Topology) -> None:
    cloudwatch = boto3.client("cloudwatch", region_name=REGION)
    orders, orders_eu = alarm_names("orders"), alarm_names("orders-eu")
    _alarm(cloudwatch, orders[0], "ALARM")
    _alarm(cloudwatch, orders[1], "OK")
    _alarm(cloudwatch, orders_eu[0], "ALARM")

    reader = StatusReader(topology, ledger_table("orders"))

    assert reader._alarms(REGION) == [orders[0]]


def test_status_counts_the_running_executions_of_the_pairs_own_purge_loop(mocked_aws: None, topology: Topology) -> None:
    sfn = _machines("brokersync-orders-purge-loop", "brokersync-orders-eu-purge-loop")
    machines = {m["name"]: m["stateMachineArn"] for m in sfn.list_state_machines()["stateMachines"]}
    sfn.start_execution(stateMachineArn=machines["brokersync-orders-eu-purge-loop"])

    assert StatusReader(topology, ledger_table("orders"))._purge_loops(REGION) == 0
    assert StatusReader(topology, ledger_table("orders-eu"))._purge_loops(REGION) == 1
    assert StatusReader(topology, ledger_table("billing"))._purge_loops(REGION) is None
