"""Starting and stopping sync: the purge loop runs exactly once after a start."""

from __future__ import annotations

from typing import Any

from brokersync.failover.sync_control import SyncControl, SyncSwitches

LOOP = "arn:aws:states:us-west-2:123456789012:stateMachine:brokersync-purge-loop-dr"


class StepFunctions:
    """Step Functions as seen through an eventually consistent ListExecutions."""

    def __init__(self, listed_running: list[str], status: dict[str, str]) -> None:
        self.listed_running = listed_running
        self.status = status
        self.started: list[str] = []

    def get_paginator(self, _name: str) -> Any:
        listed = self.listed_running

        class Pages:
            def paginate(self, **_kwargs: Any) -> list[dict[str, Any]]:
                return [{"executions": [{"executionArn": arn} for arn in listed]}]

        return Pages()

    def describe_execution(self, executionArn: str) -> dict[str, str]:  # noqa: N803 (boto3's name)
        return {"status": self.status[executionArn]}

    def start_execution(self, stateMachineArn: str, name: str, input: str) -> dict[str, str]:  # noqa: N803
        self.started.append(name)
        return {"executionArn": f"{stateMachineArn}:{name}"}


def _control(sfn: StepFunctions) -> SyncControl:
    return SyncControl(SyncSwitches(relay_rule=None, receipts_function=None, purge_loop_arn=LOOP), None, None, sfn)


def test_start_starts_a_purge_loop_when_the_one_still_listed_as_running_was_stopped() -> None:
    stopped = f"{LOOP}:purge-loop-old"
    sfn = StepFunctions(listed_running=[stopped], status={stopped: "ABORTED"})

    result = _control(sfn).start()

    assert len(sfn.started) == 1
    assert result["purgeLoopStarted"] is not None


def test_start_does_not_start_a_second_purge_loop_while_one_runs() -> None:
    running = f"{LOOP}:purge-loop-now"
    sfn = StepFunctions(listed_running=[running], status={running: "RUNNING"})

    result = _control(sfn).start()

    assert sfn.started == []
    assert result["purgeLoopStarted"] is None


class Unreachable(StepFunctions):
    def get_paginator(self, _name: str) -> Any:
        from botocore.exceptions import EndpointConnectionError  # noqa: PLC0415

        raise EndpointConnectionError(endpoint_url="https://states.us-east-1.amazonaws.com")


def test_start_starts_the_purge_loop_in_the_region_of_the_broker_playing_dr() -> None:
    local, peer = StepFunctions([], {}), StepFunctions([], {})
    control = SyncControl(SyncSwitches(None, None, LOOP), None, None, local, regional_sfn=lambda _region: peer)

    result = control.start(dr_region="us-east-1")

    assert (local.started, len(peer.started)) == ([], 1)
    assert result["purgeLoopStarted"].startswith("arn:aws:states:us-east-1:123456789012:stateMachine:")


def test_start_reports_a_dr_region_it_cannot_reach_instead_of_failing() -> None:
    control = SyncControl(
        SyncSwitches(None, None, LOOP), None, None, StepFunctions([], {}), regional_sfn=lambda _r: Unreachable([], {})
    )

    result = control.start(dr_region="us-east-1")

    assert result["purgeLoopStarted"] is None
    assert result["purgeLoopRegion"] == "us-east-1" and "purgeLoopUnreachable" in result


def test_a_failover_leaves_the_lost_dr_regions_loop_to_the_failback_without_calling_there() -> None:
    local, peer = StepFunctions([], {}), StepFunctions([], {})
    asked: list[str] = []

    def regional(region: str) -> StepFunctions:
        asked.append(region)
        return peer

    control = SyncControl(SyncSwitches(None, None, LOOP), None, None, local, regional_sfn=regional)

    result = control.start(dr_region="us-east-1", remote_loop=False)

    assert (asked, local.started, peer.started) == ([], [], [])
    assert result["purgeLoopStarted"] is None and "failback" in result["purgeLoopDeferred"]


def test_a_failover_still_starts_a_loop_in_its_own_region_for_a_pair_in_one_region() -> None:
    local = StepFunctions([], {})
    control = SyncControl(SyncSwitches(None, None, LOOP), None, None, local, regional_sfn=lambda _r: local)

    result = control.start(dr_region=LOOP.split(":")[3], remote_loop=False)

    assert len(local.started) == 1 and result["purgeLoopStarted"] is not None
