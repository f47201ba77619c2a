"""Loading a function's handler module the way Lambda does: fresh, at its cold start."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

FUNCTIONS = Path(__file__).resolve().parent.parent / "functions"


def load_handler(name: str) -> ModuleType:
    """Import ``functions/<name>/app.py`` as a new module (its cold-start code runs now)."""
    spec = importlib.util.spec_from_file_location(f"function_{name}", FUNCTIONS / name / "app.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


class FakeContext:
    """The parts of the Lambda context powertools and our handlers read."""

    function_name = "test-function"
    memory_limit_in_mb = 512
    invoked_function_arn = "arn:aws:lambda:us-east-1:111122223333:function:test-function"
    aws_request_id = "00000000-0000-0000-0000-000000000000"

    def __init__(self, remaining_ms: int = 60_000) -> None:
        self.remaining_ms = remaining_ms

    def get_remaining_time_in_millis(self) -> int:
        return self.remaining_ms

    def __getattr__(self, name: str) -> Any:
        raise AttributeError(name)


def set_lambda_environment(monkeypatch: Any, region: str, **variables: str) -> None:
    """What Lambda and our template give every function, plus ``variables``: throwaway credentials for moto."""
    for name, value in {
        "AWS_DEFAULT_REGION": region,
        "AWS_REGION": region,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "POWERTOOLS_METRICS_NAMESPACE": "BrokerSync",
        **variables,
    }.items():
        monkeypatch.setenv(name, value)
