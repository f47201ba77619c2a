"""The alarm evaluation stand-in applies CloudWatch's rules to the template's own alarms."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from brokersync import health
from brokersync.health import HealthReport, QueueHealth, emit
from brokersync.ledger.schema import load_template
from brokersync_local.alarm_evaluator import ALARM, INSUFFICIENT, OK, Datapoint, emf_datapoints, evaluate

SERVICE = (("service", "brokersync-orders"),)
NOW = 1_795_340_000.0  # a period boundary plus 0 s


def _alarm(project_root: Path, logical_id: str, **parameters: Any) -> dict[str, Any]:
    """The template's alarm with parameters and the service dimension resolved."""
    template = load_template(project_root / "template.yaml")
    properties = dict(template["Resources"][logical_id]["Properties"])
    threshold = properties["Threshold"]
    if isinstance(threshold, dict):
        name = threshold["Ref"]
        properties["Threshold"] = parameters.get(name, template["Parameters"][name].get("Default"))
    properties["Dimensions"] = [{"Name": "service", "Value": "brokersync-orders"}]
    return properties


def _points(metric: str, values: list[float], every_s: float = 60) -> list[Datapoint]:
    return [Datapoint(metric, SERVICE, NOW - i * every_s, v) for i, v in enumerate(reversed(values))]


def test_the_loss_window_alarm_fires_when_the_oldest_copy_is_older_than_the_rpo(project_root: Path) -> None:
    alarm = _alarm(project_root, "LossWindowAlarm", RpoTargetSeconds=60)

    assert evaluate(alarm, _points(health.LOSS_WINDOW_SECONDS, [75, 80]), NOW) == ALARM
    assert evaluate(alarm, _points(health.LOSS_WINDOW_SECONDS, [75, 3]), NOW) == OK


def test_a_silent_probe_makes_the_risk_alarms_fire(project_root: Path) -> None:
    for logical_id in ("LossRiskAlarm", "LossWindowAlarm", "DuplicateRiskAlarm", "OldestPendingAgeAlarm"):
        assert evaluate(_alarm(project_root, logical_id), [], NOW) == ALARM, logical_id


def test_the_duplicate_risk_alarm_sees_the_whole_pending_purge_not_one_read_window(project_root: Path) -> None:
    alarm = _alarm(project_root, "DuplicateRiskAlarm", PendingPurgeAlarmThreshold=10_000)

    assert evaluate(alarm, _points(health.PENDING_PURGE_TOTAL, [12_000] * 5), NOW) == ALARM


def test_a_stale_primary_fires_at_once_and_silence_does_not(project_root: Path) -> None:
    alarm = _alarm(project_root, "StalePrimaryAlarm")

    assert evaluate(alarm, _points(health.STALE_PRIMARY, [1]), NOW) == ALARM
    assert evaluate(alarm, [], NOW) == OK


def test_a_forwarding_connector_fires_at_once_and_silence_does_not(project_root: Path) -> None:
    alarm = _alarm(project_root, "ForwardingConnectorAlarm")

    assert evaluate(alarm, _points(health.FORWARDING_CONNECTORS, [1]), NOW) == ALARM
    assert evaluate(alarm, _points(health.FORWARDING_CONNECTORS, [0]), NOW) == OK
    assert evaluate(alarm, [], NOW) == OK


def test_a_missing_data_alarm_with_no_data_is_insufficient() -> None:
    alarm = {
        "MetricName": "X", "Period": 60, "EvaluationPeriods": 2, "Statistic": "Maximum", "Threshold": 1,
        "ComparisonOperator": "GreaterThanThreshold", "TreatMissingData": "missing",
    }  # fmt: skip

    assert evaluate(alarm, [], NOW) == INSUFFICIENT


def test_the_probes_own_emf_output_is_read_back_as_datapoints(capsys: pytest.CaptureFixture[str]) -> None:
    from aws_lambda_powertools import Metrics  # noqa: PLC0415

    metrics = Metrics(namespace="BrokerSync", service="brokersync-orders")
    report = HealthReport(None, 3, "orders-use1", "orders-usw2", True, ["dr", "primary"])
    report.queues["ORDERS"] = QueueHealth("ORDERS", copy_backlog=7, loss_window_s=95.0, pending_purge=2)
    emit(report, metrics)
    metrics.flush_metrics()

    points = emf_datapoints(capsys.readouterr().out.splitlines())

    by_name = {p.metric: p.value for p in points}
    assert by_name[health.LOSS_WINDOW_SECONDS] == 95.0
    assert by_name[health.ROLE_EPOCH] == 3
    assert all(p.dimensions == SERVICE for p in points)
    assert json.dumps([p.metric for p in points])
