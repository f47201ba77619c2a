"""Settings from the environment: a bad value is refused at cold start, naming its variable."""

from __future__ import annotations

import pytest

from brokersync.config import ENV_PURGE_MISSING_AFTER_S, seconds_setting


def test_an_unset_duration_leaves_the_default_in_place() -> None:
    assert seconds_setting(ENV_PURGE_MISSING_AFTER_S, env={}) is None
    assert seconds_setting(ENV_PURGE_MISSING_AFTER_S, env={ENV_PURGE_MISSING_AFTER_S: " "}) is None


def test_a_duration_is_read_in_seconds() -> None:
    assert seconds_setting(ENV_PURGE_MISSING_AFTER_S, env={ENV_PURGE_MISSING_AFTER_S: "3600"}) == 3600.0


@pytest.mark.parametrize("text", ["ten minutes", "-5", "0", "nan", "inf"])
def test_a_bad_duration_names_its_variable(text: str) -> None:
    with pytest.raises(ValueError, match=ENV_PURGE_MISSING_AFTER_S):
        seconds_setting(ENV_PURGE_MISSING_AFTER_S, env={ENV_PURGE_MISSING_AFTER_S: text})
