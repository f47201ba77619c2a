"""At DEBUG, everywhere, the broker password never reaches a log: the real secret read, the real broker.

Reads the receipts user's credentials from Secrets Manager (moto) the way a function does
(``brokersync.runtime.broker_connector``), logs in to the local primary and sends a frame,
with the root logger, botocore, stomp.py and powertools all at DEBUG.
"""

from __future__ import annotations

import json
import logging

import boto3
import pytest

from brokersync.topology import Topology
from brokersync_local.wrapper import RECEIPT_USER

pytestmark = pytest.mark.broker


def test_a_function_logging_everything_at_debug_never_logs_the_broker_password(
    topology: Topology,
    mocked_aws: None,
    caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from brokersync.runtime import broker_connector  # noqa: PLC0415 (imported under the mocked AWS)

    assert len(RECEIPT_USER.password) >= 12, "the redaction registers Amazon MQ-length passwords only"
    monkeypatch.setenv("POWERTOOLS_LOG_LEVEL", "DEBUG")
    secret_name = "brokersync/debug-test"
    boto3.client("secretsmanager").create_secret(
        Name=secret_name,
        SecretString=json.dumps({"username": RECEIPT_USER.username, "password": RECEIPT_USER.password}),
    )
    broker = topology.primary.model_copy(update={"credentials_secret": secret_name})
    for name in ("", "botocore", "boto3", "urllib3", "stomp.py", "aws_lambda_powertools"):
        caplog.set_level(logging.DEBUG, logger=name)  # restored after the test

    connection = broker_connector(broker).connect()
    connection.send("BROKERSYNC.RECEIPTS", "{}", headers={"receipt": "r1"})
    connection.disconnect()

    logged = caplog.text + "".join(capsys.readouterr())
    assert "passcode" in logged, "stomp.py did not log the CONNECT frame: the test proves nothing"
    assert "SecretString" in logged, "botocore did not log the secret's body: the test proves nothing"
    assert RECEIPT_USER.password not in logged
