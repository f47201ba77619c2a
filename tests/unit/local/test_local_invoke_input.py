"""``brokersync local invoke`` refuses what it cannot run with a one-line error, not a traceback."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from brokersync_local.built_functions import SAM_ENV_VARS
from brokersync_local.commands import invoke, read_event
from brokersync_local.errors import LocalWorldError


def _deployed_world(tmp_path: Path) -> Any:
    (tmp_path / SAM_ENV_VARS).write_text("{}")
    return SimpleNamespace(state_dir=tmp_path)


def test_an_event_file_that_is_not_json_is_named_in_the_error(tmp_path: Path) -> None:
    event = tmp_path / "bad.json"
    event.write_text("{bad")
    with pytest.raises(LocalWorldError, match=r"bad\.json is not JSON"):
        read_event(event)


def test_a_missing_event_file_is_named_in_the_error(tmp_path: Path) -> None:
    with pytest.raises(LocalWorldError, match=r"cannot read the event file .*missing\.json"):
        read_event(tmp_path / "missing.json")


def test_an_event_file_that_is_not_text_is_refused(tmp_path: Path) -> None:
    event = tmp_path / "binary.json"
    event.write_bytes(b"\xff\xfe\x00")
    with pytest.raises(LocalWorldError, match="is not JSON"):
        read_event(event)


def test_an_endless_event_file_is_refused_at_what_lambda_takes_not_read_until_memory_runs_out() -> None:
    with pytest.raises(LocalWorldError, match=r"/dev/zero is not JSON: larger than 6,291,456 bytes"):
        read_event(Path("/dev/zero"))


def test_any_json_document_is_an_event_as_sam_local_invoke_takes_it(tmp_path: Path) -> None:
    event = tmp_path / "list.json"
    event.write_text('[1, "two"]')
    assert read_event(event) == [1, "two"]


def test_a_function_the_template_does_not_have_is_refused_with_the_names_it_has(tmp_path: Path) -> None:
    with pytest.raises(LocalWorldError, match=r"no function 'NoSuchFunction' in the template; functions: .*PurgeDr"):
        invoke(_deployed_world(tmp_path), "NoSuchFunction", None, "unused")


def test_a_function_the_template_does_not_have_is_refused_even_with_an_event(tmp_path: Path) -> None:
    event = tmp_path / "event.json"
    event.write_text("{}")
    with pytest.raises(LocalWorldError, match="no function 'NoSuch' in the template"):
        invoke(_deployed_world(tmp_path), "NoSuch", str(event), "unused")
