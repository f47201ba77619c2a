"""template.yaml keeps the promises the docs make about it: least privilege, alarms that
reach someone, a dashboard CloudWatch accepts, a role parameter that a stack update leaves
alone, and a samconfig.toml whose two environments deploy it."""

from __future__ import annotations

import json
import re
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from brokersync import health
from brokersync.broker.statistics import BROKER_MEMORY_FULL_PERCENT, CURSOR_HIGH_WATER_PERCENT
from brokersync.config import (
    DEFAULT_RELAY_HAND_OVER_S,
    DEFAULT_RELAY_MAX_SECONDS,
    RELAY_SCHEDULE_PERIOD_S,
    RELAY_WRAP_UP_S,
)
from brokersync.ledger.control import CONTROL_PREFIX
from brokersync.ledger.schema import LEDGER_RESOURCE, load_template
from brokersync_cli import names
from brokersync_cli.argtypes import PAIR_NAME_PATTERN

#: Actions IAM offers no resource-level permissions for: "*" is the only resource they take.
NO_RESOURCE_LEVEL = {
    "lambda:ListEventSourceMappings",
    "cloudwatch:PutMetricData",
    # Step Functions' log delivery and X-Ray tracing.
    "logs:CreateLogDelivery",
    "logs:GetLogDelivery",
    "logs:UpdateLogDelivery",
    "logs:DeleteLogDelivery",
    "logs:ListLogDeliveries",
    "logs:PutResourcePolicy",
    "logs:DescribeResourcePolicies",
    "logs:DescribeLogGroups",
    "xray:PutTraceSegments",
    "xray:PutTelemetryRecords",
    "xray:GetSamplingRules",
    "xray:GetSamplingTargets",
}


@pytest.fixture(scope="module")
def template(project_root: Path) -> dict[str, Any]:
    return load_template(project_root / "template.yaml")


def _statements(template: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    for logical_id, resource in template["Resources"].items():
        policies = resource.get("Properties", {}).get("Policies", [])
        for policy in policies if isinstance(policies, list) else [policies]:
            if isinstance(policy, dict):
                for statement in policy.get("Statement", []):
                    yield logical_id, statement
        if resource["Type"] == "AWS::IAM::Role":
            for policy in resource["Properties"].get("Policies", []):
                for statement in policy["PolicyDocument"]["Statement"]:
                    yield logical_id, statement


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def test_no_statement_grants_a_wildcard_action(template: dict[str, Any]) -> None:
    for logical_id, statement in _statements(template):
        for action in _as_list(statement["Action"]):
            assert "*" not in action, f"{logical_id} grants {action}"


def test_only_actions_without_resource_level_permissions_get_every_resource(template: dict[str, Any]) -> None:
    for logical_id, statement in _statements(template):
        if "*" in _as_list(statement.get("Resource")):
            assert set(_as_list(statement["Action"])) <= NO_RESOURCE_LEVEL, logical_id


def test_amazon_mq_permissions_name_the_two_brokers(template: dict[str, Any]) -> None:
    for logical_id, statement in _statements(template):
        if any(str(a).startswith("mq:") for a in _as_list(statement["Action"])):
            resources = _as_list(statement["Resource"])
            assert {"Ref": "PrimaryBrokerArn"} in resources, logical_id
            assert {"Ref": "DrBrokerArn"} in resources, logical_id
            assert not any("broker:*" in json.dumps(r) for r in resources), logical_id


def test_every_alarm_notifies_the_alarm_topic(template: dict[str, Any]) -> None:
    alarms = {k: v for k, v in template["Resources"].items() if v["Type"] == "AWS::CloudWatch::Alarm"}

    assert len(alarms) >= 8
    for logical_id, alarm in alarms.items():
        assert {"Ref": "AlarmTopic"} in alarm["Properties"]["AlarmActions"], logical_id


def test_the_issue_alarms_are_all_there(template: dict[str, Any]) -> None:
    names = set(template["Resources"])

    assert {
        "LossRiskAlarm",
        "LossWindowAlarm",
        "StalePrimaryAlarm",
        "DuplicateRiskAlarm",
        "OldestPendingAgeAlarm",
        "RelayStalledAlarm",
        "PurgeErrorsAlarm",
        "NetworkBridgeDownAlarm",
    } <= names


@pytest.mark.parametrize(
    ("alarm", "metric"),
    [
        ("LossRiskAlarm", "COPY_BACKLOG_TOTAL"),
        ("LossWindowAlarm", "LOSS_WINDOW_SECONDS"),
        ("DuplicateRiskAlarm", "PENDING_PURGE_TOTAL"),
        ("OldestPendingAgeAlarm", "DUPLICATE_WINDOW_SECONDS"),
        ("NetworkBridgeDownAlarm", "BRIDGE_CONNECTED"),
    ],
)
def test_the_risk_alarms_watch_what_the_health_probe_emits_and_read_silence_as_breaching(
    template: dict[str, Any], alarm: str, metric: str
) -> None:
    properties = template["Resources"][alarm]["Properties"]

    assert properties["MetricName"] == getattr(health, metric)
    assert properties["TreatMissingData"] == "breaching"


def test_the_broker_alarms_watch_this_regions_broker_in_either_role(template: dict[str, Any]) -> None:
    alarm = template["Resources"]["RelayStalledAlarm"]

    assert "Condition" not in alarm
    assert "PrimaryBrokerArn" in json.dumps(alarm) and "DrBrokerArn" in json.dumps(alarm)


def test_the_window_alarms_compare_seconds_with_the_rpo_target(template: dict[str, Any]) -> None:
    for alarm in ("LossWindowAlarm", "OldestPendingAgeAlarm"):
        assert template["Resources"][alarm]["Properties"]["Threshold"] == {"Ref": "RpoTargetSeconds"}


def test_a_purge_loop_missing_where_the_dr_role_is_raises_an_alarm_in_either_stack(template: dict[str, Any]) -> None:
    alarm = template["Resources"]["PurgeLoopSilentAlarm"]
    properties = alarm["Properties"]

    assert "Condition" not in alarm
    assert properties["MetricName"] == health.PURGE_LOOP_HEALTHY
    assert properties["TreatMissingData"] == "breaching"


def test_the_dashboard_body_is_json_once_cloudformation_substitutes_it(template: dict[str, Any]) -> None:
    body, _variables = template["Resources"]["SyncDashboard"]["Properties"]["DashboardBody"]["Fn::Sub"]
    substituted = re.sub(r"\$\{[^}]+\}", "1", body)

    widgets = json.loads(substituted)["widgets"]

    assert {w["type"] for w in widgets} == {"text", "metric", "alarm"}


def test_one_dashboard_per_pair_shows_both_regions_health_probes_side_by_side(template: dict[str, Any]) -> None:
    dashboard = template["Resources"]["SyncDashboard"]
    body = dashboard["Properties"]["DashboardBody"]["Fn::Sub"][0]

    assert dashboard["Condition"] == "IsLedgerHome"
    assert dashboard["Properties"]["DashboardName"] == {"Fn::Sub": "brokersync-${PairName}"}
    for metric in (health.LOSS_WINDOW_SECONDS, health.DUPLICATE_WINDOW_SECONDS, health.ROLE_EPOCH):
        rows = re.findall(rf'\["BrokerSync", "{metric}"[^\]]*\]', body)
        assert {'"region": "${AWS::Region}"' in r for r in rows} == {True, False}, metric
        assert any('"region": "${PeerRegion}"' in r for r in rows), metric


def test_the_roles_live_in_the_ledger_table_both_regions_read_not_in_a_regional_parameter(
    template: dict[str, Any],
) -> None:
    assert not [r for r in template["Resources"].values() if r["Type"] == "AWS::SSM::Parameter"]
    assert "BROKERSYNC_ROLES_PARAMETER" not in template["Globals"]["Function"]["Environment"]["Variables"]


@pytest.mark.parametrize(
    ("function", "actions"),
    [
        ("RelayAdvisoriesFunction", {"dynamodb:GetItem"}),
        ("RecordReceiptsFunction", {"dynamodb:GetItem"}),
        ("PurgeDrFunction", {"dynamodb:GetItem"}),
        ("SnapshotQueuesFunction", {"dynamodb:GetItem"}),
        ("HealthProbeFunction", {"dynamodb:GetItem"}),
        ("FailoverStepsFunction", {"dynamodb:GetItem", "dynamodb:PutItem"}),
    ],
)
def test_each_function_reaches_the_role_record_and_no_other_item_through_its_grant(
    template: dict[str, Any], function: str, actions: set[str]
) -> None:
    grants = [
        s
        for logical_id, s in _statements(template)
        if logical_id == function and s.get("Condition", {}).get("ForAllValues:StringLike")
    ]
    assert {a for s in grants for a in _as_list(s["Action"])} == actions
    for grant in grants:
        assert grant["Condition"]["ForAllValues:StringLike"]["dynamodb:LeadingKeys"] == [f"{CONTROL_PREFIX}*"]


def test_the_receipts_trigger_exists_in_both_stacks_on_the_broker_of_its_own_region(template: dict[str, Any]) -> None:
    function = template["Resources"]["RecordReceiptsFunction"]
    broker = function["Properties"]["Events"]["Receipts"]["Properties"]["Broker"]

    assert "Condition" not in function
    assert broker == {"Fn::If": ["IsPrimary", {"Ref": "PrimaryBrokerArn"}, {"Ref": "DrBrokerArn"}]}


def test_the_purge_loop_has_the_same_name_in_both_regions_so_a_failover_can_start_it_in_the_other(
    template: dict[str, Any],
) -> None:
    name = template["Resources"]["PurgeLoopStateMachine"]["Properties"]["Name"]

    assert name == {"Fn::Sub": "brokersync-${PairName}-purge-loop"}


def test_the_ledger_keeps_point_in_time_recovery_for_exports_in_every_replica(template: dict[str, Any]) -> None:
    ledger = template["Resources"]["Ledger"]

    assert ledger["DeletionPolicy"] == "Retain"
    assert ledger["Properties"]["SSESpecification"]["SSEEnabled"] is True
    _, one_region, two_regions = ledger["Properties"]["Replicas"]["Fn::If"]
    for replica in one_region + two_regions:
        assert replica["PointInTimeRecoverySpecification"]["PointInTimeRecoveryEnabled"] is True


def test_every_function_carries_the_powertools_environment(template: dict[str, Any]) -> None:
    variables = template["Globals"]["Function"]["Environment"]["Variables"]

    assert {"POWERTOOLS_SERVICE_NAME", "POWERTOOLS_METRICS_NAMESPACE", "POWERTOOLS_LOG_LEVEL"} <= set(variables)


def _overrides(environment: dict[str, Any]) -> dict[str, str]:
    text = environment["deploy"]["parameters"]["parameter_overrides"]
    return dict(item.split("=", 1) for item in text.split())


@pytest.mark.parametrize(("environment", "role"), [("primary", "primary"), ("dr", "dr"), ("single-region", "primary")])
def test_samconfig_environment_sets_every_required_parameter(
    template: dict[str, Any], project_root: Path, environment: str, role: str
) -> None:
    config = tomllib.loads((project_root / "samconfig.toml").read_text())
    overrides = _overrides(config[environment])
    parameters = template["Parameters"]
    required = {name for name, spec in parameters.items() if "Default" not in spec}

    assert overrides["Role"] == role
    assert set(overrides) <= set(parameters)
    assert required <= set(overrides)
    for name, value in overrides.items():
        if pattern := parameters[name].get("AllowedPattern"):
            assert re.match(pattern, value), f"{environment}: {name}={value}"


def test_the_two_samconfig_environments_deploy_to_each_others_peer_region(project_root: Path) -> None:
    config = tomllib.loads((project_root / "samconfig.toml").read_text())
    primary, dr = config["primary"]["deploy"]["parameters"], config["dr"]["deploy"]["parameters"]

    assert _overrides(config["primary"])["PeerRegion"] == dr["region"]
    assert _overrides(config["dr"])["PeerRegion"] == primary["region"]


def test_a_pair_in_one_region_is_one_stack_with_one_ledger_replica_reading_both_brokers_receipts(
    template: dict[str, Any], project_root: Path
) -> None:
    config = tomllib.loads((project_root / "samconfig.toml").read_text())
    single = config["single-region"]["deploy"]["parameters"]
    overrides = _overrides(config["single-region"])
    replicas = template["Resources"]["Ledger"]["Properties"]["Replicas"]["Fn::If"]
    peer_mapping = template["Resources"]["ReceiptsFromDrBroker"]

    assert overrides["PeerRegion"] == single["region"]
    assert all(f":mq:{single['region']}:" in overrides[n] for n in ("PrimaryBrokerArn", "DrBrokerArn"))
    assert replicas[0] == "IsSingleRegion" and len(replicas[1]) == 1 and len(replicas[2]) == 2
    assert peer_mapping["Condition"] == "IsSingleRegion"
    assert peer_mapping["Properties"]["EventSourceArn"] == {"Ref": "DrBrokerArn"}


def test_the_glue_job_runs_the_same_script_on_glue_5_1_which_is_spark_3_5_6(
    template: dict[str, Any], project_root: Path
) -> None:
    job = template["Resources"]["ReconcileJob"]["Properties"]

    assert (project_root / job["Command"]["ScriptLocation"]).exists()
    assert job["GlueVersion"] == "5.1"
    pyproject = (project_root / "pyproject.toml").read_text()
    assert '"pyspark==3.5.6"' in pyproject


def test_the_reconcile_state_machine_passes_the_arguments_the_job_reads(project_root: Path) -> None:
    asl = json.loads(re.sub(r"\$\{[^}]+\}", "x", (project_root / "statemachines/reconcile.asl.json").read_text()))
    job_script = (project_root / "jobs/reconcile/reconcile.py").read_text()

    arguments = asl["States"]["RunReconcileJob"]["Parameters"]["Arguments"]
    for name in (a.removesuffix(".$").removeprefix("--") for a in arguments):
        assert f'"{name}"' in job_script, name


def test_an_invariant_violation_is_never_retried_is_counted_stops_the_loop_and_alarms(
    template: dict[str, Any], project_root: Path
) -> None:
    """The purge raises PurgeInvariantError; the loop must not retry it (States.TaskFailed in a
    retrier would match it too), must count it, end failed, and the alarm must watch that count."""
    from brokersync.purge.remover import PurgeInvariantError  # noqa: PLC0415
    from brokersync_local.template_model import default_refs, substituted_definition  # noqa: PLC0415

    machine = substituted_definition(
        template["Resources"]["PurgeLoopStateMachine"]["Properties"],
        project_root,
        lambda name: f"arn:aws:lambda:us-west-2:111122223333:function:{name}",
        default_refs(template, "us-west-2", "111122223333", "brokersync"),
    )
    purge = machine["States"]["Purge"]
    first_matching = next(
        r
        for r in purge["Retry"]
        if PurgeInvariantError.__name__ in r["ErrorEquals"]
        or {"States.ALL", "States.TaskFailed"} & set(r["ErrorEquals"])
    )
    assert PurgeInvariantError.__name__ in first_matching["ErrorEquals"]
    assert first_matching["MaxAttempts"] == 0
    assert not PurgeInvariantError.retryable
    catch = next(c for c in purge["Catch"] if PurgeInvariantError.__name__ in c["ErrorEquals"])
    counted = machine["States"][catch["Next"]]
    assert counted["Parameters"]["MetricData"][0]["MetricName"] == "PurgeInvariantViolations"
    assert machine["States"][counted["Next"]]["Type"] == "Fail"
    alarms = [r["Properties"] for r in template["Resources"].values() if r["Type"] == "AWS::CloudWatch::Alarm"]
    assert any(a.get("MetricName") == "PurgeInvariantViolations" for a in alarms)


def test_the_dr_queue_memory_alarm_fires_below_where_activemq_stops_paging_and_is_silent_when_unmeasured(
    template: dict[str, Any],
) -> None:
    properties = template["Resources"]["DrQueueMemoryAlarm"]["Properties"]

    assert properties["MetricName"] == health.DR_QUEUE_MEMORY_PERCENT
    assert properties["Threshold"] == health.DR_QUEUE_MEMORY_ALARM_PERCENT < CURSOR_HIGH_WATER_PERCENT == 70
    assert properties["ComparisonOperator"] == "GreaterThanOrEqualToThreshold"
    assert properties["TreatMissingData"] == "notBreaching"


def test_the_dr_broker_memory_alarm_fires_before_the_broker_is_full_and_is_silent_when_unmeasured(
    template: dict[str, Any],
) -> None:
    properties = template["Resources"]["DrBrokerMemoryAlarm"]["Properties"]

    assert properties["MetricName"] == health.DR_BROKER_MEMORY_PERCENT
    assert properties["Threshold"] == health.DR_BROKER_MEMORY_ALARM_PERCENT < BROKER_MEMORY_FULL_PERCENT
    assert properties["ComparisonOperator"] == "GreaterThanOrEqualToThreshold"
    assert properties["TreatMissingData"] == "notBreaching"


def test_the_return_backlog_alarm_watches_the_probes_figure_and_is_silent_for_pairs_without_active_active_queues(
    template: dict[str, Any],
) -> None:
    properties = template["Resources"]["ReturnBacklogAlarm"]["Properties"]

    assert properties["MetricName"] == health.RETURN_BACKLOG_TOTAL
    assert properties["Threshold"] == {"Ref": "CopyBacklogAlarmThreshold"}
    assert properties["TreatMissingData"] == "notBreaching"


def test_the_relay_waits_for_the_next_minutes_invocation_within_its_timeout(template: dict[str, Any]) -> None:
    """An invocation relays its time, then on until the next one consumes too (decision 0039):
    the next one must be able to start meanwhile, and the wait must fit the timeout with the
    wrap-up's room left, or the gap between invocations comes back."""
    relay = template["Resources"]["RelayAdvisoriesFunction"]["Properties"]
    variables = relay["Environment"]["Variables"]
    relays_for = float(variables["BROKERSYNC_RELAY_MAX_SECONDS"])
    hand_over = float(variables["BROKERSYNC_RELAY_HAND_OVER_S"])
    schedule = relay["Events"]["EveryMinute"]["Properties"]["Schedule"]

    assert (relays_for, hand_over) == (DEFAULT_RELAY_MAX_SECONDS, DEFAULT_RELAY_HAND_OVER_S)
    assert schedule == "rate(1 minute)" and RELAY_SCHEDULE_PERIOD_S == 60
    # It begins to wait before the next minute's event is due, and waits past it.
    assert relays_for < RELAY_SCHEDULE_PERIOD_S < relays_for + hand_over
    assert relay["Timeout"] >= relays_for + hand_over + RELAY_WRAP_UP_S
    assert relay["ReservedConcurrentExecutions"] == 2


def test_every_alarm_is_on_the_dashboard_and_has_a_row_in_the_runbook(template: dict[str, Any]) -> None:
    alarms = {k: v for k, v in template["Resources"].items() if v["Type"] == "AWS::CloudWatch::Alarm"}
    dashboard = template["Resources"]["SyncDashboard"]["Properties"]["DashboardBody"]["Fn::Sub"][0]
    runbook = (Path(__file__).resolve().parents[3] / "docs" / "runbook.md").read_text()

    for logical_id, alarm in alarms.items():
        suffix = alarm["Properties"]["AlarmName"]["Fn::Sub"].removeprefix("brokersync-${PairName}-")
        assert f"${{{logical_id}.Arn}}" in dashboard, logical_id
        assert f"| `{suffix}` |" in runbook, suffix


def test_every_alarm_description_sends_the_reader_to_the_runbooks_alarm_table(template: dict[str, Any]) -> None:
    alarms = {k: v for k, v in template["Resources"].items() if v["Type"] == "AWS::CloudWatch::Alarm"}

    for logical_id, alarm in alarms.items():
        assert alarm["Properties"]["AlarmDescription"].rstrip().endswith("Runbook, Alarms."), logical_id


def test_the_cli_takes_exactly_the_pair_names_the_template_allows(template: dict[str, Any]) -> None:
    assert template["Parameters"]["PairName"]["AllowedPattern"] == PAIR_NAME_PATTERN


def test_the_names_the_cli_finds_a_pair_by_are_the_ones_the_template_gives_from_pair_name(
    template: dict[str, Any],
) -> None:
    resources = template["Resources"]
    by_pair = {"Fn::Sub": names.LEDGER_TABLE.format(pair="${PairName}")}
    assert resources[LEDGER_RESOURCE]["Properties"]["TableName"] == by_pair
    machines = {
        kind: f"{''.join(part.title() for part in kind.split('-'))}StateMachine" for kind in names.STATE_MACHINES
    }
    for kind, logical_id in machines.items():
        assert resources[logical_id]["Properties"]["Name"] == {
            "Fn::Sub": names.STATE_MACHINES[kind].format(pair="${PairName}")
        }
        assert names.LOCAL_STATE_MACHINES[kind] == f"brokersync-{logical_id}"
    alarms = [r["Properties"]["AlarmName"] for r in resources.values() if r["Type"] == "AWS::CloudWatch::Alarm"]
    assert sorted(a["Fn::Sub"] for a in alarms) == sorted(names.alarm_names("${PairName}"))
