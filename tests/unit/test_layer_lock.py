"""The layer's lock is what sam build installs: current with pyproject.toml, every pin hashed."""

from __future__ import annotations

from pathlib import Path

import pytest

from brokersync_ci import layer_lock


def test_the_committed_lock_is_current_and_fully_hashed() -> None:
    pins = layer_lock.check()

    assert {"boto3", "stomp-py", "aws-lambda-powertools"} <= set(pins)
    assert "aws-xray-sdk" not in pins, "the functions no longer import the X-Ray SDK"


def test_a_dependency_added_to_pyproject_without_relocking_fails_the_check(tmp_path: Path) -> None:
    pyproject = tmp_path / "pyproject.toml"
    text = layer_lock.PYPROJECT.read_text().replace('"PyYAML>=6.0,<7",', '"PyYAML>=6.0,<7",\n    "requests>=2",')
    pyproject.write_text(text)

    with pytest.raises(layer_lock.LockError, match="make lock"):
        layer_lock.check(pyproject=pyproject)


def test_a_pin_without_hashes_fails_the_check(tmp_path: Path) -> None:
    lock = tmp_path / "requirements.txt"
    lock.write_text(layer_lock.LOCK.read_text() + "six==1.17.0\n")

    with pytest.raises(layer_lock.LockError, match="no --hash"):
        layer_lock.check(lock=lock)
