"""A drill whose state machine failed says what the failed step caught, not only "See $.error".

The drill's world, and the execution history with it, is gone when the error is read (in CI,
the error is all there is).
"""

from __future__ import annotations

import json
from typing import Any

from brokersync_local.drill import Drill


class _History:
    def __init__(self, events: list[dict[str, Any]]) -> None:
        self.events = events

    def get_execution_history(self, **_kwargs: Any) -> dict[str, Any]:
        return {"events": self.events}


def _drill(events: list[dict[str, Any]]) -> Drill:
    drill = Drill.__new__(Drill)  # only what _caught_error reads: no world, no brokers
    drill.sfn = _History(events)
    return drill


def test_the_caught_errors_message_is_unwrapped_from_the_lambda_cause() -> None:
    cause = {"errorMessage": "CARTS still consumed on orders-usw2 after 180s: 12 consumed keys", "stackTrace": ["x"]}
    state_input = {"plan": {}, "error": {"Error": "MoveNotReadyError", "Cause": json.dumps(cause)}}
    events = [
        {"id": 7, "type": "TaskStateExited", "stateExitedEventDetails": {"name": "DrainStatus", "output": "{}"}},
        {
            "id": 8,
            "type": "FailStateEntered",
            "stateEnteredEventDetails": {"name": "MoveFailed", "input": json.dumps(state_input)},
        },
        {"id": 9, "type": "ExecutionFailed"},
    ]

    said = _drill(events)._caught_error("arn:execution")

    assert (
        said == "MoveFailed after MoveNotReadyError: CARTS still consumed on orders-usw2 after 180s: 12 consumed keys"
    )


def test_without_a_caught_error_the_last_steps_are_given() -> None:
    events = [{"id": 1, "type": "TaskStateEntered", "stateEnteredEventDetails": {"name": "Plan", "input": "not json"}}]

    assert "Plan" in _drill(events)._caught_error("arn:execution")


def test_an_unreadable_history_is_said_and_raises_nothing() -> None:
    drill = Drill.__new__(Drill)
    drill.sfn = object()

    assert drill._caught_error("arn:execution").startswith("history unreadable")
