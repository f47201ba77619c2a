"""The local Lambda stand-in runs sam build's output, and refuses a build that is missing or older than the code."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from brokersync_local import function_code
from brokersync_local.function_code import (
    ENV_MODE,
    LAYER,
    FunctionBuildError,
    local_function_code,
    server_function_code,
)

TEMPLATE = """\
Resources:
  ProbeFunction:
    Type: AWS::Serverless::Function
    Properties:
      CodeUri: functions/probe/
      Handler: app.lambda_handler
"""
RUNTIME = "/opt/python3.13/bin/python3.13"


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A checkout with one function and the layer, and its fresh build."""
    monkeypatch.setattr(function_code, "runtime_python", lambda: RUNTIME)
    (tmp_path / "template.yaml").write_text(TEMPLATE)
    for path, text in {"functions/probe/app.py": "x = 1\n", "layers/brokersync/a.py": "y = 2\n"}.items():
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text(text)
    build = tmp_path / ".brokersync" / "sam-build-host"
    shutil.copytree(tmp_path / "functions" / "probe", build / "ProbeFunction")
    shutil.copytree(tmp_path / "layers", build / LAYER / "python")
    return tmp_path


def test_a_fresh_build_runs_under_the_runtimes_python_with_nothing_else_importable(root: Path) -> None:
    code = local_function_code({}, root)

    command = code.command("probe", 9)
    build = root / ".brokersync" / "sam-build-host"
    assert command[:4] == [RUNTIME, "-I", "-S", "-u"]
    assert command[5:] == [str(build), "ProbeFunction", "9", str(build / LAYER / "python")]


def test_a_changed_layer_file_makes_the_build_stale_and_names_the_file(root: Path) -> None:
    (root / "layers" / "brokersync" / "a.py").write_text("y = 3\n")

    with pytest.raises(FunctionBuildError, match=r"older than layers/brokersync/a\.py: run `make functions`"):
        local_function_code({}, root)


def test_a_new_function_file_not_in_the_build_makes_it_stale(root: Path) -> None:
    (root / "functions" / "probe" / "helpers.py").write_text("z = 1\n")

    with pytest.raises(FunctionBuildError, match=r"functions/probe/helpers\.py"):
        local_function_code({}, root)


def test_no_build_at_all_is_refused_with_the_command_that_makes_one(root: Path) -> None:
    shutil.rmtree(root / ".brokersync")

    with pytest.raises(FunctionBuildError, match=r"is missing: run `make functions`"):
        local_function_code({}, root)


def test_without_the_runtimes_python_the_build_cannot_run(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(function_code, "runtime_python", lambda: None)

    with pytest.raises(FunctionBuildError, match=r"python3\.13 .* was not found"):
        local_function_code({}, root)


def test_the_source_tree_runs_only_when_asked_for_under_this_virtualenv(root: Path) -> None:
    shutil.rmtree(root / ".brokersync")

    code = local_function_code({ENV_MODE: "source"}, root)

    command = code.command("probe", 9, root / "functions")
    assert command[:3] == [sys.executable, "-m", "brokersync_local.function_runtime"]
    assert code.environment() == {ENV_MODE: "source"}


def test_an_unknown_mode_is_refused(root: Path) -> None:
    with pytest.raises(FunctionBuildError, match=r"expected built or source"):
        local_function_code({ENV_MODE: "docker"}, root)


def test_the_endpoint_starts_environments_as_the_parent_chose() -> None:
    build = Path("/x/.brokersync/sam-build-host")
    chosen = function_code.FunctionCode(RUNTIME, build, {"purge_dr": "PurgeDrFunction"})

    served = server_function_code(chosen.environment())

    assert (served.python, served.build_dir) == (RUNTIME, build)
    assert served.command("purge_dr", 5)[5:7] == [str(build), "PurgeDrFunction"]
    assert server_function_code({}).python == sys.executable
