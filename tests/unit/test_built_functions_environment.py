"""The built-function runner composes a function's environment as sam local invoke does."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import boto3
import pytest

from brokersync.ledger.schema import load_template
from brokersync_local.built_functions import sam_environment


@pytest.fixture(scope="module")
def template(project_root: Path) -> dict[str, Any]:
    return load_template(project_root / "template.yaml")


def test_variables_the_template_does_not_declare_are_ignored_as_sam_ignores_them(template: dict[str, Any]) -> None:
    env_vars = {"Parameters": {"NOT_DECLARED": "x", "AWS_ENDPOINT_URL": "http://127.0.0.1:5005"}}

    environment = sam_environment(template, "PurgeDrFunction", env_vars, {"PairName": "local"})

    assert "NOT_DECLARED" not in environment
    assert environment["AWS_ENDPOINT_URL"] == "http://127.0.0.1:5005"


def test_the_function_section_wins_over_parameters_and_the_template(template: dict[str, Any]) -> None:
    env_vars = {
        "Parameters": {"BROKERSYNC_PURGE_MAX_SECONDS": "7"},
        "PurgeDrFunction": {"BROKERSYNC_PURGE_MAX_SECONDS": "5"},
    }

    environment = sam_environment(template, "PurgeDrFunction", env_vars, {"PairName": "local"})

    assert environment["BROKERSYNC_PURGE_MAX_SECONDS"] == "5"
    assert environment["BROKERSYNC_LEDGER_TABLE"] == "brokersync-local-ledger"


def test_the_empty_endpoint_variable_the_template_ships_leaves_clients_on_aws(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL", "")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "eu-west-1")

    assert boto3.client("ssm").meta.endpoint_url == "https://ssm.eu-west-1.amazonaws.com"
