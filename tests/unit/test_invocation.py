"""An operator-invoked function's event is a JSON object, or a sentence saying what was given."""

from __future__ import annotations

import pytest

from brokersync.invocation import event_object


def test_an_object_is_the_event() -> None:
    assert event_object({"role": "dr"}, {"role": "dr"}) == {"role": "dr"}


@pytest.mark.parametrize("event", ["dr", ["dr"], 7, None])
def test_anything_else_is_refused_showing_what_was_given_and_an_example(event: object) -> None:
    with pytest.raises(ValueError, match=r'must be a JSON object like \{"role": "dr"\}, got '):
        event_object(event, {"role": "dr"})


def test_a_caller_may_name_the_error_class_its_callers_match_on() -> None:
    class NotRetriedError(Exception):
        pass

    with pytest.raises(NotRetriedError, match=r'must be a JSON object like \{"action": "plan"\}, got "plan"'):
        event_object("plan", {"action": "plan"}, error=NotRetriedError)
