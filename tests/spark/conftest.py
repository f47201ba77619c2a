"""One SparkSession for the whole Spark suite (starting a JVM is most of its cost)."""

from __future__ import annotations

import importlib.util
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]


def load_job() -> ModuleType:
    """jobs/reconcile/reconcile.py, loaded from its path as AWS Glue loads a script."""
    spec = importlib.util.spec_from_file_location("reconcile_job", ROOT / "jobs" / "reconcile" / "reconcile.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses resolve annotations through it
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="session")
def job() -> ModuleType:
    return load_job()


@pytest.fixture(scope="session")
def spark(job: ModuleType) -> Iterator[object]:
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    session = job.spark_session("local[2]")
    yield session
    session.stop()
