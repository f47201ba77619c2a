"""The purge loop as deployed: statemachines/purge_loop.asl.json run by moto's Step Functions
engine with the template's substitutions, its Lambda task routed to functions/purge_dr."""

from __future__ import annotations

import json
import time
from typing import Any

import boto3
import pytest
from ulid import ULID

from brokersync.broker.stomp import StompConnector
from brokersync.ledger import LedgerEntry, dynamodb_ledger
from brokersync_local.browsing import browse
from brokersync_local.deploy import LEDGER_TABLE, deploy
from brokersync_local.world import LocalWorld
from tests.integration.stomp_helpers import produce

pytestmark = pytest.mark.broker


@pytest.mark.parametrize(
    "started_with",
    [{"iteration": 0}, {"Comment": "Insert your JSON here"}],
    ids=["as-the-stack-starts-it", "by-hand-from-the-console-sample"],
)
def test_the_state_machine_removes_exactly_the_recorded_messages_from_dr(
    started_with: dict[str, Any], world: LocalWorld, dr: StompConnector, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = world.read_env()
    endpoint, region = env["aws"]["endpoint"], env["aws"]["region"]
    machines = deploy(
        world.topology,
        world.state_dir,
        endpoint,
        region,
        overrides={"PurgeDrFunction": {"BROKERSYNC_PURGE_MAX_SECONDS": "2"}},
    )
    for name, value in {"AWS_ACCESS_KEY_ID": "local", "AWS_SECRET_ACCESS_KEY": "local"}.items():
        monkeypatch.setenv(name, value)
    keys = [str(ULID()) for _ in range(40)]
    produce(dr, "ORDERS", [("on DR", {"correlation-id": key}) for key in keys])
    ids = {f.headers["correlation-id"]: f.headers["message-id"] for f in browse(dr, "ORDERS")}
    consumed, unconsumed = keys[:25], set(keys[25:])
    dynamodb_ledger(LEDGER_TABLE, region=region, host=endpoint).record(
        "ORDERS", [LedgerEntry(key, int(time.time() * 1000), ids[key]) for key in consumed]
    )
    sfn = boto3.client("stepfunctions", endpoint_url=endpoint, region_name=region)

    execution = sfn.start_execution(stateMachineArn=machines["PurgeLoopStateMachine"], input=json.dumps(started_with))
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            left = {f.headers["correlation-id"] for f in browse(dr, "ORDERS")}
            status = sfn.describe_execution(executionArn=execution["executionArn"])["status"]
            assert status == "RUNNING", status
            if left == unconsumed:
                break
            time.sleep(0.5)
        # The task loops through idle rounds for its whole budget: wait for it to report.
        while time.monotonic() < deadline and _purged_reported(sfn, execution["executionArn"]) < 25:
            time.sleep(0.5)
    finally:
        sfn.stop_execution(executionArn=execution["executionArn"])

    remaining = browse(dr, "ORDERS")
    assert {f.headers["correlation-id"] for f in remaining} == unconsumed
    assert all(f.headers.get("redelivered", "false") == "false" for f in remaining)
    assert _purged_reported(sfn, execution["executionArn"]) == 25


def _purged_reported(sfn: Any, execution_arn: str) -> int:
    """What the execution's finished purge tasks say they removed."""
    pages = sfn.get_paginator("get_execution_history").paginate(executionArn=execution_arn)
    events = [event for page in pages for event in page["events"]]
    outputs = [json.loads(e["taskSucceededEventDetails"]["output"]) for e in events if e["type"] == "TaskSucceeded"]
    return sum(o["Payload"]["purged"] for o in outputs)
