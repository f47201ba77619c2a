"""Every function starts from what sam deploy ships and handles its sample event, against the local world.

Each invocation is a process of its own under the runtime's Python (3.13), with only ``sam
build``'s output on ``sys.path`` and the environment SAM composes from the template and the
local world's ``--env-vars`` file (:mod:`brokersync_local.built_functions`, the stand-in for
``sam local invoke``). A handler that imports what the layer does not ship (powertools'
``Tracer`` needs ``aws_xray_sdk``) fails here as it fails in Lambda. The build is the host-
architecture twin of the arm64 build that ``make template-check`` proves identical in packages.
"""

from __future__ import annotations

import json
import shutil
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from brokersync.ledger.schema import load_template
from brokersync_local.alarm_evaluator import ALARM, OK, emf_datapoints, evaluate
from brokersync_local.built_functions import SAMPLE_EVENTS, BuiltInvocation, invoke_built, runtime_python
from brokersync_local.deploy import PAIR_NAME, SAM_ENV_VARS, deploy, register_brokers
from brokersync_local.world import LocalWorld

pytestmark = pytest.mark.broker
BUILD_DIR = Path(__file__).resolve().parents[2] / ".brokersync" / "sam-build-host"


@pytest.fixture(scope="module")
def template(project_root: Path) -> dict[str, Any]:
    return load_template(project_root / "template.yaml")


@pytest.fixture(scope="module")
def python() -> str:
    found = runtime_python()
    assert found, "python3.13, the functions' runtime, is needed to run them as Lambda does"
    return found


@pytest.fixture(scope="module")
def deployed(world: LocalWorld) -> Iterator[dict[str, Any]]:
    """What sam deploy creates, in the session world's moto; the env-vars file it writes."""
    assert BUILD_DIR.is_dir(), f"{BUILD_DIR} is missing: make test runs make template-check (sam build) first"
    env = world.read_env()
    endpoint, region = env["aws"]["endpoint"], env["aws"]["region"]
    deploy(
        world.topology, world.state_dir, endpoint, region, broker_ids=register_brokers(world.topology, endpoint, region)
    )
    yield {"region": region, "env_vars": json.loads((world.state_dir / SAM_ENV_VARS).read_text())}


def _invoke(template: dict[str, Any], deployed: dict[str, Any], python: str, function: str, build_dir: Path = BUILD_DIR,
            event: Any = None) -> BuiltInvocation:  # fmt: skip
    if event is None:
        event = json.loads(Path(SAMPLE_EVENTS[function]).read_text())
    return invoke_built(build_dir, template, function, event, deployed["env_vars"], python=python,
                        region=deployed["region"], refs={"PairName": PAIR_NAME})  # fmt: skip


def test_every_function_of_the_template_has_a_sample_event(template: dict[str, Any], project_root: Path) -> None:
    functions = {k for k, v in template["Resources"].items() if v["Type"] == "AWS::Serverless::Function"}

    assert set(SAMPLE_EVENTS) == functions
    for path in SAMPLE_EVENTS.values():
        json.loads((project_root / path).read_text())


@pytest.mark.parametrize("function", sorted(SAMPLE_EVENTS))
def test_the_built_function_runs_its_sample_event_on_python_3_13_from_the_build_output_alone(
    template: dict[str, Any], deployed: dict[str, Any], python: str, function: str
) -> None:
    outcome = _invoke(template, deployed, python, function)

    assert not outcome.failed, f"{outcome.error_type}: {outcome.error_message}\n{outcome.logs[-3000:]}"
    assert outcome.python == "3.13"
    assert outcome.outside_modules == [], outcome.outside_modules
    assert isinstance(outcome.result, dict)


def test_the_receipts_of_the_sample_event_are_recorded(
    template: dict[str, Any], deployed: dict[str, Any], python: str
) -> None:
    outcome = _invoke(template, deployed, python, "RecordReceiptsFunction")

    assert outcome.result["recorded"] == 3
    assert outcome.result["rejected"] == {}


def test_the_health_probe_measures_both_windows_and_the_roles_on_the_local_pair(
    template: dict[str, Any], deployed: dict[str, Any], python: str
) -> None:
    outcome = _invoke(template, deployed, python, "HealthProbeFunction")

    report = outcome.result
    assert report["unmeasured"] == {}, report["unmeasured"]
    assert (report["primary"], report["sync_running"], report["stale_primaries"]) == ("orders-use1", True, [])
    # The deploy applied what the topology renders for each role: nothing to apply, nothing to alarm on.
    assert report["configuration_drift"] == {}
    assert all(q["copy_backlog"] is not None and q["loss_window_s"] is not None for q in report["queues"].values())
    assert report["queues"]["ORDERS"]["pending_purge"] is not None
    points = emf_datapoints(outcome.logs.splitlines())
    now = max(p.timestamp_s for p in points)
    for alarm in ("LossRiskAlarm", "LossWindowAlarm", "DuplicateRiskAlarm", "OldestPendingAgeAlarm"):
        rule = _resolved_alarm(template, alarm)
        (value,) = [p.value for p in points if p.metric == rule["MetricName"]]
        # One minute measured, the earlier ones missing (breaching): the alarm says what this minute says.
        expected = ALARM if value > float(rule["Threshold"]) else OK
        assert evaluate(rule, points, now) == expected, (alarm, value)
        assert evaluate(rule, [], now + 600) == ALARM, alarm  # the probe silent for ten minutes: they all fire
    # The purge's reach on DR: read from the real DR broker's statistics, far from where paging stops.
    assert report["queues"]["ORDERS"]["dr_memory_percent"] is not None
    assert 0 <= report["dr_broker_memory_percent"] < 100
    for alarm in ("DrQueueMemoryAlarm", "DrBrokerMemoryAlarm"):
        reach = _resolved_alarm(template, alarm)
        assert evaluate(reach, points, now) == OK, alarm
        assert evaluate(reach, [], now + 600) == OK, alarm  # the DR broker unread is other alarms' to say


def test_a_relay_invocation_past_its_time_waits_for_the_next_one_and_leaves_once_it_consumes(
    template: dict[str, Any], deployed: dict[str, Any], python: str
) -> None:
    """The built handler hands over as scheduled invocations do in AWS (decision 0039): two
    processes, the second started while the first waits, the first leaving once it sees it."""

    def env(relay_s: str, hand_over_s: str) -> dict[str, Any]:
        relay = {"BROKERSYNC_RELAY_MAX_SECONDS": relay_s, "BROKERSYNC_RELAY_HAND_OVER_S": hand_over_s}
        return {**deployed["env_vars"], "RelayAdvisoriesFunction": relay}

    outcomes: dict[str, BuiltInvocation] = {}

    def invoke(name: str, env_vars: dict[str, Any]) -> None:
        outcomes[name] = _invoke(template, {**deployed, "env_vars": env_vars}, python, "RelayAdvisoriesFunction")

    first = threading.Thread(target=invoke, args=("first", env("2", "40")))
    started = time.monotonic()
    first.start()
    time.sleep(6.0)  # the process's start, its 2 s, and some of its wait
    invoke("second", env("2", "0"))
    first.join(timeout=120)

    result = outcomes["first"].result
    assert not outcomes["first"].failed, outcomes["first"].logs[-3000:]
    assert result["handedOver"] is True
    assert result["handOverSeconds"] < 30
    assert time.monotonic() - started < 40
    assert outcomes["second"].result["handedOver"] is False  # no hand-over asked of it


def _resolved_alarm(template: dict[str, Any], logical_id: str) -> dict[str, Any]:
    properties = dict(template["Resources"][logical_id]["Properties"])
    if isinstance(properties["Threshold"], dict):
        properties["Threshold"] = template["Parameters"][properties["Threshold"]["Ref"]]["Default"]
    properties["Dimensions"] = [{"Name": "service", "Value": f"brokersync-{PAIR_NAME}"}]
    return properties


def test_a_handler_importing_what_the_layer_does_not_ship_fails_as_it_would_in_lambda(
    template: dict[str, Any], deployed: dict[str, Any], python: str, tmp_path: Path
) -> None:
    build = tmp_path / "build"
    shutil.copytree(BUILD_DIR, build)
    handler = "from aws_lambda_powertools import Tracer\n\ntracer = Tracer()\n\n\ndef lambda_handler(event, context):\n"
    handler += "    return {}\n"
    (build / "PurgeDrFunction" / "app.py").write_text(handler)

    outcome = _invoke(template, deployed, python, "PurgeDrFunction", build_dir=build)

    assert outcome.error_type == "ModuleNotFoundError"
    assert "aws_xray_sdk" in outcome.error_message
