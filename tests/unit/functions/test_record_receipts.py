"""The receipts function: the sample event records its receipts; bad receipts never fail the batch."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from unittest import mock

import boto3
import pytest
from moto import mock_aws

from brokersync.exceptions import NotActingNowError
from brokersync.ledger import LedgerUnavailableError
from brokersync.ledger.schema import create_ledger_table
from brokersync.roles import RoleAssignment
from tests.events import load_event
from tests.handlers import FakeContext, load_handler

TABLE = "receipts-test-ledger"


@pytest.fixture
def handler(project_root: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[ModuleType]:
    env = {
        "BROKERSYNC_TOPOLOGY_FILE": str(project_root / "topology.yaml"),
        "BROKERSYNC_LEDGER_TABLE": TABLE,
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "POWERTOOLS_METRICS_NAMESPACE": "BrokerSync",
        "POWERTOOLS_SERVICE_NAME": "brokersync",
    }
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    with mock_aws():
        create_ledger_table(boto3.client("dynamodb"), TABLE, project_root / "template.yaml")
        yield load_handler("record_receipts")


def _message(data: bytes | str, index: int = 99) -> dict[str, object]:
    raw = data.encode() if isinstance(data, str) else data
    event = load_event("mq-receipts")
    message = dict(event["messages"][0])
    message["messageID"] = f"ID:test-1-1795340000000-1:1:1:1:{index}"
    message["data"] = base64.b64encode(raw).decode()
    return message


def test_the_sample_event_records_every_receipt(handler: ModuleType) -> None:
    result = handler.lambda_handler(load_event("mq-receipts"), FakeContext())

    assert result["recorded"] == 3
    assert result["rejected"] == {}
    assert handler.WRITER.ledger.consumed_between("ORDERS", 0, 10**14) == [
        "01KAQ3ZC9W4T0V5GQ6N8M2R7XH",
        "01KAQ3ZCA1B2C3D4E5F6G7H8J9",
    ]


def test_bad_receipts_are_skipped_and_counted_while_good_ones_are_recorded(handler: ModuleType) -> None:
    event = load_event("mq-receipts")
    event["messages"] = [
        *event["messages"],
        _message("{not json", 1),
        _message(
            json.dumps({"queue": "INVOICES", "key": "01KAQ3ZC9W4T0V5GQ6N8M2R7XH", "consumedAt": 1795342453627}), 2
        ),
        _message(json.dumps({"queue": "ORDERS", "key": "order-42", "consumedAt": 1795342453627}), 3),
        _message("x" * 5000, 4),
    ]
    event["messages"].append({**_message("", 5), "data": "%%% not base64 %%%"})

    result = handler.lambda_handler(event, FakeContext())

    assert result["recorded"] == 3
    assert result["rejected"] == {"malformed": 2, "unknown-queue": 1, "invalid-key": 1, "oversized": 1}


def test_a_ledger_failure_fails_the_batch_so_lambda_retries_it(handler: ModuleType) -> None:
    with (
        mock.patch.object(handler.WRITER.ledger, "record", side_effect=LedgerUnavailableError("throttled")),
        mock.patch("time.sleep"),
        pytest.raises(LedgerUnavailableError),
    ):
        handler.lambda_handler(load_event("mq-receipts"), FakeContext())


DR_BROKER_ARN = "arn:aws:mq:us-west-2:111122223333:broker:orders-usw2:b-9f8e7d6c-5b4a-4392-8170-6f5e4d3c2b1a"


def test_receipts_from_the_broker_playing_dr_stay_on_it_and_nothing_is_recorded(handler: ModuleType) -> None:
    event = load_event("mq-receipts") | {"eventSourceArn": DR_BROKER_ARN}

    with pytest.raises(NotActingNowError, match="orders-usw2 does not play primary"):
        handler.lambda_handler(event, FakeContext())

    assert handler.WRITER.ledger.consumed_between("ORDERS", 0, 10**14) == []
    assert NotActingNowError.retryable  # the mapping retries the batch until the broker plays primary


def test_receipts_from_the_new_primary_are_recorded_after_a_failover(handler: ModuleType) -> None:
    roles = handler.GATE.store
    roles.write(RoleAssignment.initial(handler.TOPOLOGY).swapped("FAILOVER exec-1"))

    result = handler.lambda_handler(load_event("mq-receipts") | {"eventSourceArn": DR_BROKER_ARN}, FakeContext())

    assert result["recorded"] == 3


@pytest.mark.parametrize(
    "odd",
    [{}, None, "ID:1", {"messageID": "ID:test-1-1795340000000-1:1:1:1:7"}, {"messageID": 7, "data": 7}],
)
def test_a_message_that_is_not_a_receipt_is_skipped_as_malformed_and_the_batch_still_records(
    handler: ModuleType, odd: object
) -> None:
    event = load_event("mq-receipts")
    event["messages"] = [odd, *event["messages"]]

    result = handler.lambda_handler(event, FakeContext())

    assert result["recorded"] == 3
    assert result["rejected"] == {"malformed": 1}


@pytest.mark.parametrize("event", [{}, {"messages": "x"}, {"eventSource": "aws:mq", "messages": None}, "x", []])
def test_an_event_that_is_not_an_mq_batch_is_refused_whole_and_records_nothing(
    handler: ModuleType, event: object
) -> None:
    with pytest.raises(ValueError, match="the event must be an Amazon MQ batch"):
        handler.lambda_handler(event, FakeContext())

    assert handler.WRITER.ledger.consumed_between("ORDERS", 0, 10**14) == []
