"""Shared test helpers: paths to the project's own files, so tests use the real ones."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest
from moto import mock_aws

from brokersync.ledger.control import ControlRecords, control_model
from brokersync.ledger.schema import create_ledger_table

ROOT = Path(__file__).resolve().parent.parent

pytest_plugins = ["tests.broker_fixtures"]


@pytest.fixture(scope="session")
def project_root() -> Path:
    return ROOT


@pytest.fixture(scope="session")
def topology_path() -> Path:
    return ROOT / "topology.yaml"


@pytest.fixture
def aws_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    """Throwaway credentials and the local region, for clients that talk to moto (in process or served)."""
    for name, value in {
        "AWS_ACCESS_KEY_ID": "local",
        "AWS_SECRET_ACCESS_KEY": "local",
        "AWS_DEFAULT_REGION": "us-west-2",
    }.items():
        monkeypatch.setenv(name, value)


@pytest.fixture
def mocked_aws(aws_credentials: None) -> Iterator[None]:
    """moto in this process, for unit tests of code that takes boto3 clients."""
    with mock_aws():
        yield


@pytest.fixture
def control_records(mocked_aws: None) -> ControlRecords:
    """The role and transition records, in a ledger table created from template.yaml in moto."""
    table = "brokersync-test-ledger"
    create_ledger_table(boto3.client("dynamodb"), table, ROOT / "template.yaml")
    return ControlRecords(control_model(table, region="us-west-2"))
