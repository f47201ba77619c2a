"""An old primary found back starts one failback per role epoch, however often the probe finds it."""

from __future__ import annotations

import json

import boto3

from brokersync.failover.auto_failback import start_failback_once

DEFINITION = json.dumps({"StartAt": "Done", "States": {"Done": {"Type": "Succeed"}}})


def test_the_failback_is_started_once_per_epoch(mocked_aws: None) -> None:
    sfn = boto3.client("stepfunctions")
    arn = sfn.create_state_machine(
        name="brokersync-failback-test", definition=DEFINITION, roleArn="arn:aws:iam::123456789012:role/sfn"
    )["stateMachineArn"]

    first = start_failback_once(sfn, arn, 4)
    again = start_failback_once(sfn, arn, 4)
    next_epoch = start_failback_once(sfn, arn, 5)

    assert first == again and first.endswith(":execution:brokersync-failback-test:auto-failback-epoch-4")
    assert next_epoch.endswith("auto-failback-epoch-5")
    assert len(sfn.list_executions(stateMachineArn=arn)["executions"]) == 2
