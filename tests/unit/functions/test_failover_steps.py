"""The failover steps function, invoked by hand: what it refuses before any step acts."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from moto import mock_aws

from brokersync.failover.errors import FailoverRequestError
from tests.handlers import FakeContext, load_handler, set_lambda_environment


@pytest.fixture
def handler(project_root: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[ModuleType]:
    set_lambda_environment(
        monkeypatch,
        "us-east-1",
        BROKERSYNC_TOPOLOGY_FILE=str(project_root / "examples" / "active-active.yaml"),
        BROKERSYNC_LEDGER_TABLE="brokersync-ledger-test",
        BROKERSYNC_CONFIG_BUCKET="brokersync-config-test",
    )
    with mock_aws():
        yield load_handler("failover_steps")


@pytest.mark.parametrize("event", ["planMove", ["planMove"], 7, None])
def test_an_event_that_is_not_an_object_is_refused_with_an_example(handler: ModuleType, event: Any) -> None:
    with pytest.raises(FailoverRequestError, match=r'the event must be a JSON object like \{"action": "planMove"'):
        handler.lambda_handler(event, FakeContext())


def test_an_unknown_action_is_refused_naming_the_known_ones(handler: ModuleType) -> None:
    with pytest.raises(FailoverRequestError, match=r"unknown action 'failEverything'; one of \[.*'planMove'"):
        handler.lambda_handler({"action": "failEverything"}, FakeContext())


def test_a_move_step_with_a_forged_context_is_refused_before_it_reads_anything(handler: ModuleType) -> None:
    ctx = {
        "queues": ["ORDERS"],
        "source": "orders-use1",
        "target": "orders-usw2",
        "epoch": 1,
        "started_at_ms": 0,
        "timeout_s": 600,
    }
    with pytest.raises(FailoverRequestError, match="'ORDERS' is not one of the topology's active-active queues"):
        handler.lambda_handler({"action": "flipQueue", "ctx": ctx}, FakeContext())
