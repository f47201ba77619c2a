"""Shared test helpers: paths to the project's own files, so tests use the real ones."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

pytest_plugins = ["tests.broker_fixtures"]


@pytest.fixture(scope="session")
def project_root() -> Path:
    return ROOT


@pytest.fixture(scope="session")
def topology_path() -> Path:
    return ROOT / "topology.yaml"
