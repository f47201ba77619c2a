"""What a failing drill test shows: the whole outcome of the drill it read.

A module-scoped drill runs in the first test's setup, so what it printed is shown with that
test only, and an assertion's own message is cut short at a few hundred characters. The
outcome's diagnostics (``left_on_old_primary``, ``pending_after_why``) are what explains a
failure that happens once in a CI run, so every failing test gets the outcome it read whole.
"""

from __future__ import annotations

import json
from collections.abc import Generator
from typing import Any

import pytest


def drill_outcomes(funcargs: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The drill outcomes among a test's fixture values: dicts that name their drill's ``mode``."""
    return {name: value for name, value in funcargs.items() if isinstance(value, dict) and "mode" in value}


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, Any, Any]:
    report = yield
    if report.failed and call.when == "call":
        for name, outcome in drill_outcomes(getattr(item, "funcargs", {})).items():
            report.sections.append((f"drill outcome: {name}", json.dumps(outcome, indent=1, default=str)))
    return report
