"""The request and the context a failover step receives are parsed, and refused by name when forged."""

from __future__ import annotations

import pytest

from brokersync.failover.context import TransitionContext, TransitionRequest
from brokersync.failover.errors import FailoverRequestError

BROKERS = {"orders-use1", "orders-usw2"}
CONTEXT = {
    "nothingToDo": False,
    "mode": "FAILOVER",
    "source": "orders-use1",
    "target": "orders-usw2",
    "crdr": False,
    "transitionStartedAtMs": 1,
    "drainDeadlineMs": 2,
    "runningDeadlineMs": 3,
    "sourceLeftAtMs": None,
}


def test_a_context_round_trips_through_the_wire_format_the_state_machines_read() -> None:
    ctx = TransitionContext.parse(CONTEXT, BROKERS)

    assert ctx.to_wire() == CONTEXT
    assert (ctx.source, ctx.target, ctx.drain_deadline_ms) == ("orders-use1", "orders-usw2", 2)


@pytest.mark.parametrize(
    ("change", "named"),
    [
        ({"mode": "FAILBACKWARDS"}, "mode"),
        ({"target": "orders-euw1"}, "orders-euw1"),
        ({"source": ""}, "source"),
        ({"drainDeadlineMs": "soon"}, "drainDeadlineMs"),
        ({"extra": 1}, "extra"),
        ({"sourceLeftAtMs": -1}, "sourceLeftAtMs"),
        ({"drainDeadlineMs": True}, "drainDeadlineMs"),
    ],
)
def test_a_forged_context_is_refused_naming_what_is_wrong(change: dict[str, object], named: str) -> None:
    with pytest.raises(FailoverRequestError, match=named):
        TransitionContext.parse(CONTEXT | change, BROKERS)


def test_a_context_from_before_source_left_at_was_added_still_parses() -> None:
    """An execution in flight across an upgrade: its context has no sourceLeftAtMs, which is not known."""
    older = {k: v for k, v in CONTEXT.items() if k != "sourceLeftAtMs"}
    assert TransitionContext.parse(older, BROKERS).source_left_at_ms is None


def test_a_context_without_a_field_is_refused_naming_it() -> None:
    without = {k: v for k, v in CONTEXT.items() if k != "target"}

    with pytest.raises(FailoverRequestError, match="target"):
        TransitionContext.parse(without, BROKERS)


@pytest.mark.parametrize("raw", [None, "FAILOVER", ["FAILOVER"], 7])
def test_a_context_that_is_not_an_object_is_refused(raw: object) -> None:
    with pytest.raises(FailoverRequestError):
        TransitionContext.parse(raw, BROKERS)


def test_an_empty_request_takes_the_default_timeouts() -> None:
    request = TransitionRequest.parse(None)

    assert (request.mode, request.target, request.drain_timeout_seconds) == ("", None, 300)


@pytest.mark.parametrize(
    "change",
    [
        {"drainTimeoutSeconds": -1},
        {"runningTimeoutSeconds": 10**9},
        {"modee": "x"},
        # JSON true is not a number of seconds: read as 1, it would cut a switchover's drain to a second.
        {"drainTimeoutSeconds": True},
        {"runningTimeoutSeconds": False},
    ],
)
def test_a_request_with_a_bad_field_is_refused(change: dict[str, object]) -> None:
    with pytest.raises(FailoverRequestError, match="request"):
        TransitionRequest.parse({"mode": "FAILOVER"} | change)
