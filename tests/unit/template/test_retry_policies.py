"""The state machines retry exactly what the library says is worth retrying.

Every task that invokes a BrokerSync function is read with its Retry list as Step Functions
reads it (the first retrier whose ``ErrorEquals`` matches decides), for every error in
:mod:`brokersync.error_catalog`: an error whose ``retryable`` flag is False is never retried,
one whose flag is True is retried.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import brokersync
from brokersync.error_catalog import ERRORS, never_retried
from brokersync.exceptions import BrokerSyncError
from brokersync.ledger.schema import load_template
from brokersync_local.template_model import default_refs, state_machines, substituted_definition

FUNCTION_ARN = "arn:aws:lambda:us-east-1:111122223333:function:brokersync-{}"


def _definitions(project_root: Path) -> dict[str, dict[str, Any]]:
    template = load_template(project_root / "template.yaml")
    refs = default_refs(template, "us-east-1", "111122223333", "brokersync")
    return {
        name: substituted_definition(properties, project_root, FUNCTION_ARN.format, refs)
        for name, properties in state_machines(template).items()
    }


def _tasks(states: dict[str, Any], machine: str) -> Iterator[tuple[str, dict[str, Any]]]:
    for name, state in states.items():
        if state.get("Type") == "Task":
            yield f"{machine}.{name}", state
        for branch in state.get("Branches", []):
            yield from _tasks(branch["States"], machine)
        for key in ("Iterator", "ItemProcessor"):
            if key in state:
                yield from _tasks(state[key]["States"], machine)


def _invokes_brokersync(task: dict[str, Any]) -> bool:
    function = str(task.get("Parameters", {}).get("FunctionName", ""))
    return task["Resource"].startswith("arn:aws:states:::lambda:invoke") and ":function:brokersync-" in function


def _function_tasks(project_root: Path) -> list[tuple[str, dict[str, Any]]]:
    return [
        (name, task)
        for machine, definition in _definitions(project_root).items()
        for name, task in _tasks(definition["States"], machine)
        if _invokes_brokersync(task)
    ]


def _first_retrier(task: dict[str, Any], error: str) -> dict[str, Any] | None:
    for retrier in task.get("Retry", []):
        names = set(retrier["ErrorEquals"])
        if error in names or names & {"States.ALL", "States.TaskFailed"}:
            return retrier
    return None


def _retried(task: dict[str, Any], error: str) -> bool:
    retrier = _first_retrier(task, error)
    return retrier is not None and int(retrier.get("MaxAttempts", 3)) > 0


def test_every_error_the_library_defines_is_in_the_catalog() -> None:
    for module in pkgutil.walk_packages(brokersync.__path__, "brokersync."):
        importlib.import_module(module.name)

    def subclasses(cls: type) -> set[type]:
        return {cls} | {s for c in cls.__subclasses__() for s in subclasses(c)}

    defined = {c for c in subclasses(BrokerSyncError) if c.__module__.startswith("brokersync.")}
    assert defined - set(ERRORS) == set()


def test_the_state_machines_invoke_brokersync_functions_at_all(project_root: Path) -> None:
    machines = {name.split(".")[0] for name, _ in _function_tasks(project_root)}
    assert {"FailoverStateMachine", "FailbackStateMachine", "PurgeLoopStateMachine"} <= machines


@pytest.mark.parametrize("error", never_retried())
def test_an_error_the_library_never_retries_is_retried_by_no_task(project_root: Path, error: str) -> None:
    retrying = [name for name, task in _function_tasks(project_root) if _retried(task, error)]
    assert retrying == [], f"{error} is not retryable, yet these tasks retry it"


@pytest.mark.parametrize("error", [e.__name__ for e in ERRORS if e.retryable])
def test_an_error_that_passes_is_retried_by_every_task(project_root: Path, error: str) -> None:
    giving_up = [name for name, task in _function_tasks(project_root) if not _retried(task, error)]
    assert giving_up == [], f"{error} is retryable, yet these tasks give up at once"


def test_the_failback_never_retries_a_purge_invariant_violation(project_root: Path) -> None:
    tasks = dict(_function_tasks(project_root))
    assert not _retried(tasks["FailbackStateMachine.RemoveConsumed"], "PurgeInvariantError")
