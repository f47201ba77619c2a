"""The control plane reaches each broker in its own region, as Amazon MQ requires."""

from __future__ import annotations

from pathlib import Path

import boto3

from brokersync.failover.control_plane import BrokerControl
from brokersync.topology import load_topology


def _broker(region: str, name: str) -> str:
    mq = boto3.client("mq", region_name=region)
    return mq.create_broker(
        BrokerName=name, DeploymentMode="SINGLE_INSTANCE", EngineType="ACTIVEMQ", EngineVersion="5.17.6",
        HostInstanceType="mq.m5.large", PubliclyAccessible=False, AutoMinorVersionUpgrade=False,
        Users=[{"Username": "u", "Password": "password-password"}],
    )["BrokerId"]  # fmt: skip


def test_each_broker_is_described_through_a_client_of_its_topology_region(
    topology_path: Path, mocked_aws: None
) -> None:
    topology = load_topology(topology_path)
    ids = {"orders-use1": _broker("us-east-1", "orders-use1"), "orders-usw2": _broker("us-west-2", "orders-usw2")}
    control = BrokerControl.for_topology(
        boto3.client("mq", region_name="us-west-2"),
        topology,
        ids,
        regional=lambda region: boto3.client("mq", region_name=region),
    )

    assert control.describe("orders-use1")["BrokerName"] == "orders-use1"
    assert control.describe("orders-usw2")["BrokerName"] == "orders-usw2"


def test_without_regional_clients_every_broker_goes_through_the_one_client(
    topology_path: Path, mocked_aws: None
) -> None:
    topology = load_topology(topology_path)
    ids = {"orders-use1": _broker("us-west-2", "orders-use1"), "orders-usw2": _broker("us-west-2", "orders-usw2")}
    control = BrokerControl.for_topology(boto3.client("mq", region_name="us-west-2"), topology, ids)

    assert {control.state(name) for name in ids} == {"RUNNING"}
