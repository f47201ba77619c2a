"""Each function may make every DynamoDB call its ledger work makes, and the template says so.

The calls are recorded from the ledger itself running against moto (moto does not enforce
IAM, so only this test can see a missing grant before AWS does).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.client import BaseClient
from ulid import ULID

from brokersync.ledger import Ledger, LedgerEntry, dynamodb_ledger
from brokersync.ledger.schema import create_ledger_table, load_template

TABLE = "grants-test-ledger"


@pytest.fixture
def ledger(mocked_aws: None, project_root: Path) -> Ledger:
    create_ledger_table(boto3.client("dynamodb"), TABLE, project_root / "template.yaml")
    return dynamodb_ledger(TABLE, region="us-west-2")


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> Iterator[set[str]]:
    made: set[str] = set()
    original = BaseClient._make_api_call

    def recording(self: BaseClient, operation: str, params: dict[str, Any]) -> Any:
        if self.meta.service_model.service_name == "dynamodb":
            made.add(f"dynamodb:{operation}")
        return original(self, operation, params)

    monkeypatch.setattr(BaseClient, "_make_api_call", recording)
    yield made


def _capture(ledger: Ledger) -> None:
    ledger.record("ORDERS", [LedgerEntry(str(ULID()), 1_795_340_000_000, "ID:app-41000-1795340000000-1:1:-1:1:7")])


def _purge(ledger: Ledger) -> None:
    pending = ledger.pending("ORDERS")
    ledger.mark_purged("ORDERS", pending)
    ledger.pending("ORDERS")  # every item resolved: the pointer is deleted


def _repair(ledger: Ledger) -> None:
    ledger.add_pending("ORDERS", ledger.consumed_entries("ORDERS", ledger.pending("ORDERS")[0].key))


def _granted(function: str, project_root: Path) -> set[str]:
    resource = load_template(project_root / "template.yaml")["Resources"][function]
    actions: set[str] = set()
    for policy in resource["Properties"].get("Policies", []):
        for statement in policy.get("Statement", []) if isinstance(policy, dict) else []:
            if statement.get("Condition"):
                continue  # control-record grants are limited to R# keys, not the ledger's items
            listed = statement["Action"]
            actions |= {a for a in (listed if isinstance(listed, list) else [listed]) if a.startswith("dynamodb:")}
    return actions


@pytest.mark.parametrize(
    ("function", "work"),
    [
        ("RelayAdvisoriesFunction", _capture),
        ("RecordReceiptsFunction", _capture),
        ("PurgeDrFunction", _purge),
        ("HealthProbeFunction", _purge),
        ("FailoverStepsFunction", _purge),
        ("RepairLedgerFunction", _repair),
    ],
)
def test_a_function_is_granted_every_dynamodb_call_its_ledger_work_makes(
    ledger: Ledger, calls: set[str], project_root: Path, function: str, work: Callable[[Ledger], None]
) -> None:
    _capture(ledger)
    calls.clear()

    work(ledger)

    assert calls - {"dynamodb:DescribeTable"}, "the work made no DynamoDB call at all"
    assert calls - {"dynamodb:DescribeTable"} <= _granted(function, project_root)


def _peer_grants(function: str, project_root: Path) -> set[str]:
    """The DynamoDB actions ``function`` may take on the peer region's replica of the ledger table."""
    resource = load_template(project_root / "template.yaml")["Resources"][function]
    actions: set[str] = set()
    for policy in resource["Properties"].get("Policies", []):
        for statement in policy.get("Statement", []) if isinstance(policy, dict) else []:
            listed = statement["Resource"] if isinstance(statement["Resource"], list) else [statement["Resource"]]
            if any("${PeerRegion}" in str(r) for r in listed):
                granted = statement["Action"]
                actions |= set(granted if isinstance(granted, list) else [granted])
    return actions


def _reads_the_role_record(function: str, project_root: Path) -> bool:
    resource = load_template(project_root / "template.yaml")["Resources"][function]
    return any(
        "dynamodb:GetItem" in str(statement.get("Action")) and "R#*" in str(statement.get("Condition"))
        for policy in resource["Properties"].get("Policies", [])
        for statement in (policy.get("Statement", []) if isinstance(policy, dict) else [])
    )


def test_every_function_that_reads_the_role_record_may_read_it_in_the_peer_region_too(project_root: Path) -> None:
    resources = load_template(project_root / "template.yaml")["Resources"]
    readers = [
        name
        for name, resource in resources.items()
        if resource["Type"] == "AWS::Serverless::Function" and _reads_the_role_record(name, project_root)
    ]
    assert readers, "no function reads the role record"
    assert [name for name in readers if "dynamodb:GetItem" not in _peer_grants(name, project_root)] == []


def test_a_switchover_may_read_the_pending_purge_in_the_old_primarys_region_and_write_nothing_there(
    ledger: Ledger, calls: set[str], project_root: Path
) -> None:
    _capture(ledger)
    calls.clear()

    ledger.pending("ORDERS", read_only=True)

    granted = _peer_grants("FailoverStepsFunction", project_root)
    assert calls - {"dynamodb:DescribeTable"} <= granted
    assert not {a for a in granted if a.endswith(("PutItem", "UpdateItem", "DeleteItem", "BatchWriteItem"))}
