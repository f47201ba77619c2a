"""The reconcile state machine's last step: the purge list, read from S3, becomes pending ledger work."""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import boto3
import pytest
from moto import mock_aws
from ulid import ULID

from brokersync.ledger import dynamodb_ledger
from brokersync.ledger.schema import create_ledger_table
from tests.events import load_event
from tests.handlers import FakeContext, load_handler, set_lambda_environment

BUCKET = "brokersync-audit-test"
TABLE = "brokersync-ledger-test"


@pytest.fixture
def handler(project_root: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[ModuleType]:
    set_lambda_environment(monkeypatch, "us-west-2", BROKERSYNC_SNAPSHOT_BUCKET=BUCKET, BROKERSYNC_LEDGER_TABLE=TABLE)
    with mock_aws():
        boto3.client("s3").create_bucket(Bucket=BUCKET, CreateBucketConfiguration={"LocationConstraint": "us-west-2"})
        create_ledger_table(boto3.client("dynamodb"), TABLE, project_root / "template.yaml")
        yield load_handler("repair_ledger")


def test_gone_from_primary_rows_become_pending_under_their_own_message_ids(handler: ModuleType) -> None:
    key = str(ULID())
    rows = [
        {
            "queue": "ORDERS",
            "key": key,
            "message_id": "ID:app-1-1795340000000-1:1:-1:1:9",
            "reason": "gone_from_primary",
        }
    ]
    event = load_event("repair-ledger")
    body = gzip.compress("\n".join(json.dumps(r) for r in rows).encode())
    boto3.client("s3").put_object(Bucket=BUCKET, Key=f"{event['prefix']}part-00000.json.gz", Body=body)

    result = handler.lambda_handler(event, FakeContext())

    assert result == {"recorded": 1, "skipped": {}}
    pending = dynamodb_ledger(TABLE, region="us-west-2").pending("ORDERS")
    assert [(p.key, p.message_id) for p in pending] == [(key, "ID:app-1-1795340000000-1:1:-1:1:9")]


def test_a_prefix_outside_the_reconcile_runs_is_refused(handler: ModuleType) -> None:
    with pytest.raises(ValueError, match="reconcile"):
        handler.lambda_handler({"prefix": "configurations/"}, FakeContext())
