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

#: Each purge invocation's budget here: short, so a test sees several invocations.
BUDGET_S = 2


@pytest.mark.parametrize(
    "started_with",
    [{"iteration": 0}, {"Comment": "Insert your JSON here"}],
    ids=["as-the-stack-starts-it", "by-hand-from-the-console-sample"],
)
def test_the_state_machine_removes_exactly_the_recorded_messages_from_dr(
    started_with: dict[str, Any], world: LocalWorld, dr: StompConnector, monkeypatch: pytest.MonkeyPatch
) -> None:
    endpoint, region, machines = _deploy(world, monkeypatch)
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
        _stop_loop(sfn, execution["executionArn"])

    remaining = browse(dr, "ORDERS")
    assert {f.headers["correlation-id"] for f in remaining} == unconsumed
    assert all(f.headers.get("redelivered", "false") == "false" for f in remaining)
    assert _purged_reported(sfn, execution["executionArn"]) == 25


def _purged_reported(sfn: Any, execution_arn: str) -> int:
    """What the execution's finished purge tasks say they removed."""
    return sum(o["purged"] for o in _purge_outputs(sfn, execution_arn))


def test_an_invocation_that_used_its_whole_time_is_followed_by_the_next_without_a_wait(
    world: LocalWorld, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The short wait is for an invocation that returned early with nothing to do. After one that
    looped through its whole budget, a wait would leave every key consumed during it on DR a
    second longer at each invocation's end: a lag p99 over a second at any steady rate."""
    endpoint, region, machines = _deploy(world, monkeypatch)
    sfn = boto3.client("stepfunctions", endpoint_url=endpoint, region_name=region)

    execution = sfn.start_execution(stateMachineArn=machines["PurgeLoopStateMachine"], input="{}")
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and len(_purge_outputs(sfn, execution["executionArn"])) < 2:
            time.sleep(0.5)
        events = _history(sfn, execution["executionArn"])
    finally:
        _stop_loop(sfn, execution["executionArn"])

    outputs = _outputs(events)
    assert len(outputs) >= 2
    assert all(o["pending"] == 0 and o["idle"] is False for o in outputs)
    entered = [e["stateEnteredEventDetails"]["name"] for e in events if "stateEnteredEventDetails" in e]
    assert "ShortWait" not in entered


def _history(sfn: Any, execution_arn: str) -> list[dict[str, Any]]:
    pages = sfn.get_paginator("get_execution_history").paginate(executionArn=execution_arn)
    return [event for page in pages for event in page["events"]]


def _outputs(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What each finished purge task returned."""
    succeeded = [e for e in events if e["type"] == "TaskSucceeded"]
    return [json.loads(e["taskSucceededEventDetails"]["output"])["Payload"] for e in succeeded]


def _purge_outputs(sfn: Any, execution_arn: str) -> list[dict[str, Any]]:
    return _outputs(_history(sfn, execution_arn))


def _stop_loop(sfn: Any, execution_arn: str) -> None:
    """Stop the loop, and let its last invocation end, as Step Functions does not stop it.

    The loop repeats an invocation that used its whole time at once, so a stop always lands on
    one; left running, it would purge what the next test records, in that test's place.
    """
    sfn.stop_execution(executionArn=execution_arn)
    time.sleep(BUDGET_S + 2)


def _deploy(world: LocalWorld, monkeypatch: pytest.MonkeyPatch) -> tuple[str, str, dict[str, str]]:
    """What sam deploy creates, into the world's moto, with the purge invocation's budget short."""
    env = world.read_env()
    endpoint, region = env["aws"]["endpoint"], env["aws"]["region"]
    machines = deploy(
        world.topology,
        world.state_dir,
        endpoint,
        region,
        overrides={"PurgeDrFunction": {"BROKERSYNC_PURGE_MAX_SECONDS": str(BUDGET_S)}},
    )
    for name, value in {"AWS_ACCESS_KEY_ID": "local", "AWS_SECRET_ACCESS_KEY": "local"}.items():
        monkeypatch.setenv(name, value)
    return endpoint, region, machines
