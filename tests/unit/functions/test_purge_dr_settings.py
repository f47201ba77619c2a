"""The purge task's invocation length is a setting a bad value of which stops it at its cold start."""

from __future__ import annotations

from pathlib import Path

import boto3
import pytest
from moto import mock_aws

from brokersync.config import ENV_PURGE_MAX_SECONDS
from brokersync.ledger.schema import create_ledger_table
from tests.handlers import load_handler, set_lambda_environment

TABLE = "brokersync-ledger-test"


@pytest.mark.parametrize("value", ["0", "-5", "abc", "inf"])
def test_an_invocation_length_that_is_not_a_positive_number_of_seconds_is_refused_naming_it(
    value: str, project_root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Left to run, a length of 0 would make every invocation return at once, in a loop."""
    set_lambda_environment(
        monkeypatch,
        "us-west-2",
        BROKERSYNC_LEDGER_TABLE=TABLE,
        BROKERSYNC_TOPOLOGY_FILE=str(project_root / "topology.yaml"),
        **{ENV_PURGE_MAX_SECONDS: value},
    )
    with mock_aws():
        create_ledger_table(boto3.client("dynamodb"), TABLE, project_root / "template.yaml")
        with pytest.raises(ValueError, match=ENV_PURGE_MAX_SECONDS):
            load_handler("purge_dr")
