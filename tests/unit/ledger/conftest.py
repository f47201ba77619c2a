"""Every ledger contract test runs against both backends: in memory, and DynamoDB (moto)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import boto3
import pytest
from moto import mock_aws

from brokersync.ledger import Ledger, dynamodb_ledger, memory_ledger
from brokersync.ledger.schema import create_ledger_table
from tests.fake_clock import FakeClock

TABLE = "brokersync-ledger-test"
NOW = 1_795_340_000.0


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(NOW)


@pytest.fixture(params=["memory", "dynamodb"])
def ledger(request: pytest.FixtureRequest, project_root: Path, clock: FakeClock) -> Iterator[Ledger]:
    if request.param == "memory":
        yield memory_ledger(clock=clock)
        return
    with mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1")
        create_ledger_table(client, TABLE, project_root / "template.yaml")
        yield dynamodb_ledger(TABLE, region="us-east-1", clock=clock)


@dataclass
class BackendReads:
    """What a ledger asked its backend's ``captured_and_marks`` for, grouped by ``pending`` call."""

    refs: list[list[object]] = field(default_factory=list)
    """Per ``pending`` call, the items asked for under the spied keyword (empty when it asked for none)."""
    calls: int = 0
    """Backend calls in all, whatever they asked for."""


def spy_backend_reads(
    ledger: Ledger, monkeypatch: pytest.MonkeyPatch, keyword: Literal["captured_refs", "marks_refs"]
) -> BackendReads:
    """Record the items each ``pending`` call reads of one kind; ``None`` under the keyword means every ref."""
    reads = BackendReads()
    original_read = ledger.backend.captured_and_marks
    original_pending = ledger.pending

    def pending(*args: object, **kwargs: object) -> object:
        reads.refs.append([])
        return original_pending(*args, **kwargs)  # type: ignore[arg-type]

    def spied(queue: str, refs: list[object], **kwargs: object) -> object:
        reads.calls += 1
        wanted = kwargs.get(keyword)
        if not reads.refs:
            reads.refs.append([])  # a read outside any pending call
        reads.refs[-1].extend(refs if wanted is None else wanted)  # type: ignore[arg-type]
        return original_read(queue, refs, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(ledger, "pending", pending)
    monkeypatch.setattr(ledger.backend, "captured_and_marks", spied)
    return reads
