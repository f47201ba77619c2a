"""template.yaml deploys into a real account next to other stacks, and its alarms reach someone."""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path
from typing import Any

import pytest

from brokersync.ledger.schema import load_template
from brokersync_local.template_model import resolve

#: Resource types whose name is unique per account (global) rather than per account and region.
GLOBAL_NAMES = {"AWS::CloudWatch::Dashboard": "DashboardName"}
#: Named resource types and the property that holds the name (unique per account and region).
REGIONAL_NAMES = {
    "AWS::Serverless::StateMachine": "Name",
    "AWS::Serverless::LayerVersion": "LayerName",
    "AWS::SNS::Topic": "TopicName",
    "AWS::CloudWatch::Alarm": "AlarmName",
    "AWS::Logs::LogGroup": "LogGroupName",
    "AWS::Glue::Job": "Name",
    "AWS::Glue::SecurityConfiguration": "Name",
    "AWS::SSM::Parameter": "Name",
    "AWS::KMS::Alias": "AliasName",
    "AWS::DynamoDB::GlobalTable": "TableName",
}


@pytest.fixture(scope="module")
def template(project_root: Path) -> dict[str, Any]:
    return load_template(project_root / "template.yaml")


def _stacks(project_root: Path) -> list[dict[str, str]]:
    """The samconfig.toml environments, and a second pair in the same account and regions."""
    config = tomllib.loads((project_root / "samconfig.toml").read_text())
    stacks = []
    for environment in ("primary", "dr", "single-region"):
        parameters = config[environment]["deploy"]["parameters"]
        overrides = dict(item.split("=", 1) for item in parameters["parameter_overrides"].split())
        stacks.append({**overrides, "AWS::StackName": parameters["stack_name"], "AWS::Region": parameters["region"]})
    stacks += [{**s, "PairName": "payments", "AWS::StackName": "brokersync-payments"} for s in stacks[:2]]
    return stacks


def _no_get_att(logical_id: str) -> str:
    raise AssertionError(f"a resource name takes {logical_id}'s attribute, unknown before deploy")


def _names(template: dict[str, Any], stack: dict[str, str], kinds: dict[str, str]) -> set[tuple[str, str]]:
    refs = {"AWS::AccountId": "111122223333", "AWS::Partition": "aws", **stack}
    names = set()
    for resource in template["Resources"].values():
        if (prop := kinds.get(resource["Type"])) and prop in resource["Properties"]:
            condition = resource.get("Condition")
            if condition == "IsPrimary" and stack["Role"] != "primary":
                continue
            if condition == "IsDr" and stack["Role"] != "dr":
                continue
            if condition == "IsSingleRegion" and stack["PeerRegion"] != stack["AWS::Region"]:
                continue
            if condition == "IsLedgerHome" and stack["Role"] != "primary":
                continue
            names.add((resource["Type"], resolve(resource["Properties"][prop], _no_get_att, refs)))
    return names


def test_no_two_stacks_claim_the_same_global_name(template: dict[str, Any], project_root: Path) -> None:
    seen: dict[tuple[str, str], str] = {}
    for stack in _stacks(project_root):
        for name in _names(template, stack, GLOBAL_NAMES):
            assert name not in seen, f"{name} claimed by {seen.get(name)} and {stack['AWS::StackName']}"
            seen[name] = f"{stack['AWS::StackName']}@{stack['AWS::Region']}"


def test_no_two_stacks_in_one_region_claim_the_same_name(template: dict[str, Any], project_root: Path) -> None:
    seen: dict[tuple[str, str, str], str] = {}
    for stack in _stacks(project_root):
        for kind, name in _names(template, stack, REGIONAL_NAMES):
            key = (stack["AWS::Region"], kind, name)
            assert key not in seen, f"{key} claimed twice"
            seen[key] = stack["AWS::StackName"]


def test_every_brokersync_metric_an_alarm_or_the_dashboard_reads_carries_the_pairs_service_dimension(
    template: dict[str, Any],
) -> None:
    expected = {"Fn::Sub": "brokersync-${PairName}"}
    assert template["Globals"]["Function"]["Environment"]["Variables"]["POWERTOOLS_SERVICE_NAME"] == expected
    for logical_id, resource in template["Resources"].items():
        if resource["Type"] == "AWS::CloudWatch::Alarm" and resource["Properties"].get("Namespace") == "BrokerSync":
            assert {"Name": "service", "Value": expected} in resource["Properties"]["Dimensions"], logical_id
    body = template["Resources"]["SyncDashboard"]["Properties"]["DashboardBody"]["Fn::Sub"][0]
    for row in re.findall(r'\["BrokerSync", "(\w+)"([^\]]*)\]', body):
        assert '"service", "brokersync-${PairName}"' in row[1], row[0]


def test_the_alarm_topic_is_encrypted_with_a_key_whose_policy_lets_cloudwatch_publish(template: dict[str, Any]) -> None:
    topic = template["Resources"]["AlarmTopic"]["Properties"]
    key_id = topic["KmsMasterKeyId"]["Fn::GetAtt"].split(".")[0]
    key = template["Resources"][key_id]

    assert key["Type"] == "AWS::KMS::Key"
    assert key["Properties"]["EnableKeyRotation"] is True
    grants = [
        s
        for s in key["Properties"]["KeyPolicy"]["Statement"]
        if s["Effect"] == "Allow" and s["Principal"].get("Service") == "cloudwatch.amazonaws.com"
    ]
    assert grants, "CloudWatch cannot use the key: alarms would reach no one"
    actions = {a for s in grants for a in s["Action"]}
    assert {"kms:Decrypt", "kms:GenerateDataKey*"} <= actions
    assert not any("Condition" in s for s in grants), "a condition CloudWatch's request does not carry denies it"


def test_every_alarm_notifies_the_encrypted_topic(template: dict[str, Any]) -> None:
    for logical_id, resource in template["Resources"].items():
        if resource["Type"] == "AWS::CloudWatch::Alarm":
            assert {"Ref": "AlarmTopic"} in resource["Properties"]["AlarmActions"], logical_id


def test_every_function_logs_to_a_group_of_its_own_with_retention(template: dict[str, Any]) -> None:
    groups = {k for k, r in template["Resources"].items() if r["Type"] == "AWS::Logs::LogGroup"}
    for logical_id, resource in template["Resources"].items():
        if resource["Type"] == "AWS::Serverless::Function":
            group = resource["Properties"]["LoggingConfig"]["LogGroup"]["Ref"]
            assert group in groups, logical_id
    for group in groups:
        properties = template["Resources"][group]["Properties"]
        assert properties["RetentionInDays"] == {"Ref": "LogRetentionDays"}, group
        assert "KmsKeyId" in properties, group


def test_every_state_machine_logs_traces_and_ends(template: dict[str, Any], project_root: Path) -> None:
    for logical_id, resource in template["Resources"].items():
        if resource["Type"] != "AWS::Serverless::StateMachine":
            continue
        properties = resource["Properties"]
        assert properties["Tracing"] == {"Enabled": True}, logical_id
        assert properties["Logging"]["Destinations"][0]["CloudWatchLogsLogGroup"]["LogGroupArn"], logical_id
        text = re.sub(r"\$\{[^}]+\}", "1", (project_root / properties["DefinitionUri"]).read_text())
        assert 0 < json.loads(text)["TimeoutSeconds"] <= 86400, logical_id


def _tasks(states: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    found = []
    for name, state in states.items():
        if state["Type"] == "Task":
            found.append((name, state))
        for branch in state.get("Branches", []):
            found += _tasks(branch["States"])
    return found


THROTTLING = {"States.ALL", "States.TaskFailed", "Lambda.TooManyRequestsException", "Glue.ThrottlingException"}


def test_every_task_that_calls_an_aws_api_retries_when_throttled(project_root: Path) -> None:
    for path in sorted((project_root / "statemachines").glob("*.asl.json")):
        text = re.sub(r"\$\{[^}]+\}", "1", path.read_text())
        for name, state in _tasks(json.loads(text)["States"]):
            retried = {e for r in state.get("Retry", []) if r.get("MaxAttempts", 3) > 0 for e in r["ErrorEquals"]}
            assert retried & THROTTLING, f"{path.name}: {name} has no Retry for throttling"


def test_functions_run_on_a_supported_python_on_arm64_and_the_layer_is_built_for_it(template: dict[str, Any]) -> None:
    function = template["Globals"]["Function"]
    layer = template["Resources"]["BrokerSyncLayer"]

    assert function["Runtime"] == "python3.13"
    assert function["Architectures"] == ["arm64"]
    assert function["Tracing"] == "Active"
    assert layer["Metadata"]["BuildMethod"] == function["Runtime"]
    assert layer["Properties"]["CompatibleRuntimes"] == [function["Runtime"]]


def test_the_purge_runs_one_instance_at_a_time_and_the_relay_two_to_hand_over(template: dict[str, Any]) -> None:
    resources = template["Resources"]
    assert resources["PurgeDrFunction"]["Properties"]["ReservedConcurrentExecutions"] == 1
    assert resources["RelayAdvisoriesFunction"]["Properties"]["ReservedConcurrentExecutions"] == 2


def test_no_arn_names_the_aws_partition_literally(project_root: Path) -> None:
    text = (project_root / "template.yaml").read_text()
    literal = [line for line in text.splitlines() if "arn:aws:" in line and "Description" not in line]
    assert all(line.strip().startswith(("ConstraintDescription", "#")) for line in literal), literal


def test_no_handler_needs_the_xray_sdk_which_the_layer_does_not_ship(project_root: Path) -> None:
    for handler in sorted((project_root / "functions").glob("*/app.py")):
        assert "Tracer" not in handler.read_text(), f"{handler}: powertools' Tracer imports aws_xray_sdk"
