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


@pytest.mark.parametrize("event", ["reconcile/run/purge_list_json/", ["reconcile/"], None])
def test_an_event_that_is_not_an_object_is_refused_with_an_example(handler: ModuleType, event: object) -> None:
    with pytest.raises(ValueError, match=r"must be a JSON object like \{\"prefix\""):
        handler.lambda_handler(event, FakeContext())


def test_a_bad_line_or_a_broken_part_is_counted_and_every_readable_row_is_recorded(handler: ModuleType) -> None:
    def row(n: int) -> str:
        return json.dumps(
            {"queue": "ORDERS", "key": str(ULID()), "message_id": f"ID:app-1-1795340000000-1:1:-1:1:{n}",
             "reason": "gone_from_primary"}
        )  # fmt: skip

    event = load_event("repair-ledger")
    whole = gzip.compress("\n".join([row(1), "{not json", row(2)]).encode())
    truncated = gzip.compress("\n".join([row(3), row(4)] * 200).encode())[:-40]
    s3 = boto3.client("s3")
    s3.put_object(Bucket=BUCKET, Key=f"{event['prefix']}part-00000.json.gz", Body=whole)
    s3.put_object(Bucket=BUCKET, Key=f"{event['prefix']}part-00001.json.gz", Body=truncated)
    s3.put_object(Bucket=BUCKET, Key=f"{event['prefix']}part-00002.json.gz", Body=row(5).encode())  # not gzip

    result = handler.lambda_handler(event, FakeContext())

    assert result["skipped"] == {"malformed": 3}  # the bad line, the truncated part's rest, the part not gzip
    assert result["recorded"] >= 2 + 1  # part 0's two rows, and what part 1 held before its end
