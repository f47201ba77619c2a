"""The local world's Step Functions names an unnamed execution as Step Functions does: afresh each time."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws
from moto.stepfunctions.parser.models import StepFunctionsParserBackend

from brokersync_local import stepfunctions_names

DEFINITION = json.dumps({"StartAt": "Done", "States": {"Done": {"Type": "Succeed"}}})
ROLE = "arn:aws:iam::123456789012:role/local"


@pytest.fixture
def sfn(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    monkeypatch.setattr(StepFunctionsParserBackend, "start_execution", StepFunctionsParserBackend.start_execution)
    monkeypatch.setenv("SF_EXECUTION_HISTORY_TYPE", "SUCCESS")
    stepfunctions_names.install()
    with mock_aws(config={"stepfunctions": {"execute_state_machine": True}}):
        yield boto3.client("stepfunctions", region_name="us-west-2")


def test_a_state_machine_started_twice_without_a_name_runs_two_executions(sfn: Any) -> None:
    machine = sfn.create_state_machine(name="loop", definition=DEFINITION, roleArn=ROLE)["stateMachineArn"]

    first = sfn.start_execution(stateMachineArn=machine, input="{}")["executionArn"]
    second = sfn.start_execution(stateMachineArn=machine, input='{"iteration": 0}')["executionArn"]

    assert first != second
    assert not first.endswith(":None") and not second.endswith(":None")


def test_a_named_execution_keeps_its_name_and_a_second_start_of_it_is_refused(sfn: Any) -> None:
    machine = sfn.create_state_machine(name="loop", definition=DEFINITION, roleArn=ROLE)["stateMachineArn"]

    arn = sfn.start_execution(stateMachineArn=machine, name="purge-loop-1", input="{}")["executionArn"]

    assert arn.endswith(":purge-loop-1")
    with pytest.raises(sfn.exceptions.ExecutionAlreadyExists):
        sfn.start_execution(stateMachineArn=machine, name="purge-loop-1", input='{"other": 1}')
