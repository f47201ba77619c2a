"""Every ledger contract test runs against both backends: in memory, and DynamoDB (moto)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest
from moto import mock_aws

from brokersync.ledger import Ledger, dynamodb_ledger, memory_ledger
from brokersync.ledger.schema import create_ledger_table

TABLE = "brokersync-ledger-test"
NOW = 1_795_340_000.0


class Clock:
    def __init__(self, now: float = NOW) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture(params=["memory", "dynamodb"])
def ledger(request: pytest.FixtureRequest, project_root: Path, clock: Clock) -> Iterator[Ledger]:
    if request.param == "memory":
        yield memory_ledger(clock=clock)
        return
    with mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1")
        create_ledger_table(client, TABLE, project_root / "template.yaml")
        yield dynamodb_ledger(TABLE, region="us-east-1", clock=clock)
