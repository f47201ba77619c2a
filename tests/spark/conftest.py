"""One SparkSession for the whole Spark suite (starting a JVM is most of its cost)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from types import ModuleType

import pytest

from brokersync_cli.reconcile import load_job


@pytest.fixture(scope="session")
def job() -> ModuleType:
    """jobs/reconcile/reconcile.py, loaded from its path as AWS Glue loads a script."""
    return load_job()


@pytest.fixture(scope="session")
def spark(job: ModuleType) -> Iterator[object]:
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    session = job.spark_session("local[2]")
    yield session
    session.stop()
