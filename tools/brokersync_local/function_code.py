"""Which code the local Lambda stand-in runs: ``sam build``'s output, under the runtime's Python.

Lambda runs what ``sam deploy`` ships: each function's built folder and the layer's ``python/``
folder on ``sys.path``, under python3.13, with nothing else importable. The local world runs the
same: the twin build for this machine's architecture (``make functions``, which ``make test`` and
``make demo`` run first) under the runtime's Python with ``-I -S``, so a dependency the layer
does not ship, or code that only runs on the virtualenv's Python, fails in the demo and the
drills as it would in AWS.

A build older than the sources would run yesterday's code and hide today's change, so the
endpoint refuses to start on one and names a file that differs. ``BROKERSYNC_LOCAL_FUNCTIONS=source``
runs ``functions/<folder>/app.py`` from the source tree under the virtualenv's Python instead:
quicker while editing, and kinder than AWS (it sees the whole virtualenv).

The parent (:class:`~brokersync_local.moto_server.MotoServer`) chooses and checks, where an error
reaches the user; the endpoint's process reads the choice from its environment.
"""

from __future__ import annotations

import filecmp
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from brokersync.ledger.schema import load_template
from brokersync_ci.runtime_python import runtime_python
from brokersync_local.errors import LocalWorldError

ROOT = Path(__file__).resolve().parents[2]
#: ``sam build`` of the template for this machine's architecture (``make functions``).
HOST_BUILD_DIR = ROOT / ".brokersync" / "sam-build-host"
#: The template's layer: its built ``python/`` folder is Lambda's ``/opt/python``.
LAYER = "BrokerSyncLayer"
#: ``built`` (the default) or ``source``.
ENV_MODE = "BROKERSYNC_LOCAL_FUNCTIONS"
#: Set by the parent for the endpoint's process: the build folder and the interpreter.
ENV_BUILD = "BROKERSYNC_FUNCTIONS_BUILD"
ENV_PYTHON = "BROKERSYNC_FUNCTIONS_PYTHON"
RUNTIME_LOOP = Path(__file__).with_name("function_runtime.py")
SOURCE_FUNCTIONS = ROOT / "functions"
SOURCE_LAYERS = ROOT / "layers"
REBUILD = f"run `make functions` (sam build), or set {ENV_MODE}=source to run the source tree"


class FunctionBuildError(LocalWorldError):
    """The build the local Lambda stand-in would run is missing, stale or has no interpreter."""


@dataclass(frozen=True)
class FunctionCode:
    """How an execution environment is started: which interpreter, and which code it sees."""

    python: str
    #: ``sam build``'s output, or None for ``functions/`` from source under this virtualenv.
    build_dir: Path | None = None
    #: folder under ``functions/`` -> the function's logical id (its folder in the build).
    built_folders: Mapping[str, str] | None = None

    @property
    def layer_dir(self) -> Path:
        """Lambda's ``/opt/python``: the build's layer, or ``layers/`` from the source tree."""
        return SOURCE_LAYERS if self.build_dir is None else self.build_dir / LAYER / "python"

    def run_script(self, script: Path) -> list[str]:
        """The interpreter and flags that run ``script`` as the functions run, then the script.

        On the build: ``-I -S``, so nothing but the standard library is importable until the
        script puts the build on ``sys.path``; and ``-u``, so logs reach their file as they are
        written (``-I`` ignores PYTHONUNBUFFERED), as Lambda's runtime streams them: the alarm
        evaluator reads the functions' metrics from there.
        """
        flags = [] if self.build_dir is None else ["-I", "-S", "-u"]
        return [self.python, *flags, str(script)]

    def command(self, folder: str, reply_fd: int, functions_dir: Path = SOURCE_FUNCTIONS) -> list[str]:
        """The runtime loop's command line for the function in ``functions/<folder>``."""
        if self.build_dir is None or self.built_folders is None:
            return [self.python, "-m", "brokersync_local.function_runtime", str(functions_dir), folder, str(reply_fd)]
        logical_id = self.built_folders.get(folder)
        if logical_id is None:
            raise FunctionBuildError(f"no function of template.yaml has its code in functions/{folder}/")
        return [*self.run_script(RUNTIME_LOOP), str(self.build_dir), logical_id, str(reply_fd), str(self.layer_dir)]

    def environment(self) -> dict[str, str]:
        """What the endpoint's process needs to start environments the same way."""
        if self.build_dir is None:
            return {ENV_MODE: "source"}
        return {ENV_BUILD: str(self.build_dir), ENV_PYTHON: self.python}


def source_code() -> FunctionCode:
    return FunctionCode(python=sys.executable)


def built_folders(template_path: Path = ROOT / "template.yaml") -> dict[str, str]:
    """Each function's folder under ``functions/`` -> its logical id, from the template's ``CodeUri``."""
    resources = load_template(template_path)["Resources"]
    return {
        Path(resource["Properties"]["CodeUri"]).name: logical_id
        for logical_id, resource in resources.items()
        if resource["Type"] == "AWS::Serverless::Function"
    }


def stale_files(build_dir: Path, folders: Mapping[str, str], root: Path = ROOT) -> list[str]:
    """Files of ``functions/`` and ``layers/`` whose copy in ``build_dir`` is missing or different."""
    pairs = [(root / "layers", build_dir / LAYER / "python")]
    pairs += [(root / "functions" / folder, build_dir / logical_id) for folder, logical_id in folders.items()]
    stale: list[str] = []
    for source, built in pairs:
        for path in sorted(source.rglob("*")):
            if path.suffix not in {".py", ".txt"} or "__pycache__" in path.parts:
                continue
            copy = built / path.relative_to(source)
            if not copy.is_file() or not filecmp.cmp(path, copy, shallow=False):
                stale.append(str(path.relative_to(root)))
    return stale


def local_function_code(environ: Mapping[str, str] = os.environ, root: Path = ROOT) -> FunctionCode:
    """The code the local world's functions run; refuses a missing or stale build, naming the fix."""
    mode = environ.get(ENV_MODE, "built")
    if mode == "source":
        return source_code()
    if mode != "built":
        raise FunctionBuildError(f"{ENV_MODE}={mode!r}: expected built or source")
    python = runtime_python()
    if python is None:
        raise FunctionBuildError(f"python3.13 (the functions' runtime) was not found: {REBUILD}")
    build_dir = root / HOST_BUILD_DIR.relative_to(ROOT)
    folders = built_folders(root / "template.yaml")
    if not (build_dir / LAYER / "python").is_dir() or any(not (build_dir / i).is_dir() for i in folders.values()):
        raise FunctionBuildError(f"the functions' build {build_dir} is missing: {REBUILD}")
    stale = stale_files(build_dir, folders, root)
    if stale:
        more = f" and {len(stale) - 1} more" if len(stale) > 1 else ""
        raise FunctionBuildError(f"the functions' build {build_dir} is older than {stale[0]}{more}: {REBUILD}")
    return FunctionCode(python=python, build_dir=build_dir, built_folders=folders)


def server_function_code(environ: Mapping[str, str] = os.environ) -> FunctionCode:
    """The choice the parent passed to the endpoint's process (source code when it passed none)."""
    build, python = environ.get(ENV_BUILD), environ.get(ENV_PYTHON)
    if not build or not python:
        return source_code()
    return FunctionCode(python=python, build_dir=Path(build), built_folders=built_folders())
