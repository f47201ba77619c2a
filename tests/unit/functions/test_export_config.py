"""Configuration export: each broker's current revision lands in the versioned bucket, by revision."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import boto3
import pytest
from moto import mock_aws

from brokersync.render import render_configuration
from brokersync.topology import load_topology
from tests.handlers import FakeContext, load_handler, set_lambda_environment

BUCKET = "brokersync-config-test"


@pytest.fixture
def world(project_root: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[ModuleType, dict[str, str], object]]:
    set_lambda_environment(
        monkeypatch,
        "us-east-1",
        BROKERSYNC_TOPOLOGY_FILE=str(project_root / "topology.yaml"),
        BROKERSYNC_CONFIG_BUCKET=BUCKET,
    )
    with mock_aws():
        s3 = boto3.client("s3")
        s3.create_bucket(Bucket=BUCKET)
        s3.put_bucket_versioning(Bucket=BUCKET, VersioningConfiguration={"Status": "Enabled"})
        mq = boto3.client("mq")
        topology = load_topology(project_root / "topology.yaml")
        configuration = mq.create_configuration(Name="primary", EngineType="ACTIVEMQ", EngineVersion="5.17.6")
        data = base64.b64encode(render_configuration(topology, "primary").encode()).decode()
        mq.update_configuration(ConfigurationId=configuration["Id"], Data=data)
        broker = mq.create_broker(
            BrokerName="orders-use1", DeploymentMode="SINGLE_INSTANCE", EngineType="ACTIVEMQ", EngineVersion="5.17.6",
            HostInstanceType="mq.m5.large", PubliclyAccessible=False, AutoMinorVersionUpgrade=False,
            Users=[{"Username": "admin", "Password": "admin-password"}],
            Configuration={"Id": configuration["Id"], "Revision": 2},
        )  # fmt: skip
        yield load_handler("export_config"), {"orders-use1": broker["BrokerId"]}, s3


def test_the_current_revision_and_the_topology_are_exported(world, project_root: Path) -> None:
    handler, broker_ids, s3 = world

    result = handler.lambda_handler({"brokerIds": broker_ids}, FakeContext())

    [exported] = result["exported"]
    assert exported["broker"] == "orders-use1"
    assert exported["revision"] == 2
    body = s3.get_object(Bucket=BUCKET, Key=exported["key"])["Body"].read().decode()
    assert body == render_configuration(load_topology(project_root / "topology.yaml"), "primary")
    assert s3.get_object(Bucket=BUCKET, Key="topology/topology.yaml")["ContentType"] == "application/yaml"


def test_every_export_is_a_new_version_of_current(world) -> None:
    handler, broker_ids, s3 = world

    handler.lambda_handler({"brokerIds": broker_ids}, FakeContext())
    handler.lambda_handler({"brokerIds": broker_ids}, FakeContext())

    versions = s3.list_object_versions(Bucket=BUCKET, Prefix="configurations/orders-use1/current.xml")["Versions"]
    assert len(versions) == 2


@pytest.mark.parametrize(
    ("broker_ids", "error"),
    [(["b-1"], "must map broker names"), ({"orders-use1": 7}, "must map broker names"), ({"nope": "b-1"}, "nope")],
    ids=["a-list", "an-id-not-text", "an-unknown-broker"],
)
def test_broker_ids_that_name_nothing_usable_are_refused_in_one_sentence(world, broker_ids: object, error: str) -> None:
    handler, _, s3 = world

    with pytest.raises(ValueError, match=error):
        handler.lambda_handler({"brokerIds": broker_ids}, FakeContext())
    assert "Contents" not in s3.list_objects_v2(Bucket=BUCKET)
