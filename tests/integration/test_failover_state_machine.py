"""The failover state machine as deployed (moto's Step Functions engine, the template's ASL and
substitutions, handlers routed locally) against a real pair of its own, rebooted through the
local Amazon MQ stand-in: a failure injected mid-execution, a re-run that resumes, and a
switchover back after which copies flow in the original direction again."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from ulid import ULID

from brokersync.broker.stomp import StompConnector
from brokersync.ledger.control import ControlRecords, control_model
from brokersync.roles import RoleStore
from brokersync.topology import load_topology
from brokersync_local.deploy import CONFIG_BUCKET, LEDGER_TABLE, deploy, register_brokers
from brokersync_local.world import LocalWorld, WorldPorts
from tests.integration.stomp_helpers import receive
from tests.ports import shifted_ports

pytestmark = pytest.mark.broker
PORTS = shifted_ports(
    WorldPorts(primary_openwire=61666, primary_stomp=61663, dr_openwire=62666, dr_stomp=62663, aws=5065)
)


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory, topology_path: Path) -> Iterator[dict[str, Any]]:
    world = LocalWorld(load_topology(topology_path), tmp_path_factory.mktemp("failover-world"), PORTS)
    world.up(timeout_s=90, log=lambda _m: None)
    credentials = pytest.MonkeyPatch()
    for name, value in {"AWS_ACCESS_KEY_ID": "local", "AWS_SECRET_ACCESS_KEY": "local"}.items():
        credentials.setenv(name, value)  # the role record is read through pynamodb, which takes them from here
    try:
        env = world.read_env()
        endpoint, region = env["aws"]["endpoint"], env["aws"]["region"]
        ids = register_brokers(world.topology, endpoint, region)
        machines = deploy(world.topology, world.state_dir, endpoint, region, broker_ids=ids)
        session = boto3.session.Session(aws_access_key_id="l", aws_secret_access_key="l", region_name=region)
        yield {
            "world": world,
            "machines": machines,
            "sfn": session.client("stepfunctions", endpoint_url=endpoint),
            "s3": session.client("s3", endpoint_url=endpoint),
            "roles": RoleStore(ControlRecords(control_model(LEDGER_TABLE, region, endpoint))),
        }
    finally:
        credentials.undo()
        world.destroy()


def _run(pair: dict[str, Any], payload: dict[str, Any], timeout_s: float = 180) -> dict[str, Any]:
    sfn = pair["sfn"]
    arn = sfn.start_execution(
        stateMachineArn=pair["machines"]["FailoverStateMachine"], name=f"test-{ULID()}", input=json.dumps(payload)
    )["executionArn"]
    deadline = time.monotonic() + timeout_s
    while (described := sfn.describe_execution(executionArn=arn))["status"] == "RUNNING":
        assert time.monotonic() < deadline, "execution did not finish"
        time.sleep(0.5)
    pages = sfn.get_paginator("get_execution_history").paginate(executionArn=arn)
    described["entered"] = [
        e["stateEnteredEventDetails"]["name"]
        for page in pages
        for e in page["events"]
        if "stateEnteredEventDetails" in e
    ]
    return described


def _empty_and_delete(s3: Any, bucket: str) -> None:
    versions = s3.list_object_versions(Bucket=bucket)
    for entry in versions.get("Versions", []) + versions.get("DeleteMarkers", []):
        s3.delete_object(Bucket=bucket, Key=entry["Key"], VersionId=entry["VersionId"])
    s3.delete_bucket(Bucket=bucket)


def test_a_failed_failover_can_be_rerun_and_resumes_the_same_transition(pair: dict[str, Any]) -> None:
    _empty_and_delete(pair["s3"], CONFIG_BUCKET)  # the injected failure: saving the DR configuration fails

    failed = _run(pair, {"mode": "FAILOVER"})

    assert failed["status"] == "FAILED"
    assert "NoSuchBucket" in (failed.get("cause") or "")
    assert "StopSync" in failed["entered"] and "SwapRoles" not in failed["entered"]
    stopped = pair["roles"].read()
    assert (stopped.primary, stopped.sync_running) == ("orders-use1", False)  # sync stopped, nothing swapped yet

    pair["s3"].create_bucket(Bucket=CONFIG_BUCKET, CreateBucketConfiguration={"LocationConstraint": "us-west-2"})
    rerun = _run(pair, {"mode": "FAILOVER"})

    assert rerun["status"] == "SUCCEEDED", rerun.get("cause")
    output = json.loads(rerun["output"])
    assert (output["primary"], output["previous"]) == ("orders-usw2", "orders-use1")
    record = pair["roles"].read()
    assert (record.primary, record.sync_running) == ("orders-usw2", True)


def test_a_switchover_back_restores_copying_in_the_original_direction(pair: dict[str, Any]) -> None:
    done = _run(pair, {"mode": "SWITCHOVER", "target": "orders-use1"})

    assert done["status"] == "SUCCEEDED", done.get("cause")
    assert "CheckDrained" in done["entered"] and "RebootBoth" in done["entered"]
    assert pair["roles"].read().primary == "orders-use1"
    world: LocalWorld = pair["world"]
    assert world.brokers["primary"].bridges_established() >= 1 or _bridge_within(world, 30)
    key = str(ULID())
    primary = StompConnector(world.topology.primary.stomp)
    connection = primary.connect(name="test-producer")
    connection.send("/queue/ORDERS", "after two transitions", headers={"correlation-id": key, "persistent": "true"})
    connection.disconnect()
    copies = receive(StompConnector(world.topology.dr.stomp), "ORDERS", 1, timeout_s=30)
    assert [f.headers["correlation-id"] for f in copies] == [key]
    receive(primary, "ORDERS", 1, timeout_s=5)


def test_a_switchover_to_the_broker_already_primary_has_nothing_to_do(pair: dict[str, Any]) -> None:
    done = _run(pair, {"mode": "SWITCHOVER", "target": "orders-use1"})

    assert done["status"] == "SUCCEEDED"
    assert "AlreadyPrimary" in done["entered"]


def _bridge_within(world: LocalWorld, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if world.brokers["primary"].bridges_established() >= 1:
            return True
        time.sleep(0.5)
    return False
