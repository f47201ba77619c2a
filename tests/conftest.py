"""Shared test helpers: paths to the project's own files, so tests use the real ones."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from moto import mock_aws

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
