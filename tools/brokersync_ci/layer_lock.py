"""The Lambda layer's lock: pyproject.toml's runtime dependencies, resolved for Lambda, with hashes.

``sam build`` installs ``layers/requirements.txt``; that file is this lock, so both regions'
layers and every rebuild carry the same versions, and pip refuses any file whose hash is not in
it. It is resolved for the functions' runtime (Python 3.13 on arm64 Amazon Linux 2023), not for
the machine that runs ``make lock``, and it lists the hashes of every file of each pinned
version, so an x86_64 build of the same lock (the CI check of the built functions) installs the
same versions.

``python -m brokersync_ci.layer_lock write`` re-resolves (``make lock``); ``check`` fails, with
the reason, when the lock no longer matches pyproject.toml. The check is offline: the lock's
header records a digest of the dependency list it was resolved from.
"""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = ROOT / "pyproject.toml"
LOCK = ROOT / "layers" / "requirements.txt"
#: What the functions run on (template.yaml Globals: python3.13, arm64; Amazon Linux 2023's glibc).
PYTHON_VERSION = "3.13"
PLATFORM = "aarch64-manylinux_2_28"
_DIGEST_LINE = re.compile(r"^# dependencies-sha256: ([0-9a-f]{64})$", re.MULTILINE)
_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s\\;]+)")


class LockError(ValueError):
    """The lock does not match pyproject.toml, or is not fully pinned and hashed."""


def runtime_dependencies(pyproject: Path = PYPROJECT) -> list[str]:
    return list(tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]["dependencies"])


def dependencies_digest(dependencies: list[str]) -> str:
    return hashlib.sha256(json.dumps(sorted(dependencies)).encode()).hexdigest()


@dataclass(frozen=True)
class Pin:
    name: str
    version: str
    hashes: int


def parse_lock(text: str) -> dict[str, Pin]:
    """Pins by canonical name; a requirement line continues over ``\\`` line ends."""
    pins: dict[str, Pin] = {}
    logical = re.sub(r"\\\n\s*", " ", text)
    for raw in logical.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        match = _PIN.match(line)
        if not match:
            raise LockError(f"not an exact pin: {line[:80]!r}")
        name = canonicalize_name(match[1])
        pins[name] = Pin(name, match[2], line.count("--hash=sha256:"))
    return pins


def check(lock: Path = LOCK, pyproject: Path = PYPROJECT) -> dict[str, Pin]:
    """The lock's pins, after proving it current and complete; raises :class:`LockError` otherwise."""
    if not lock.exists():
        raise LockError(f"{lock} is missing: run make lock")
    text = lock.read_text(encoding="utf-8")
    dependencies = runtime_dependencies(pyproject)
    recorded = _DIGEST_LINE.search(text)
    if not recorded or recorded[1] != dependencies_digest(dependencies):
        raise LockError(f"{lock.name} was not resolved from pyproject.toml's current dependencies: run make lock")
    pins = parse_lock(text)
    for pin in pins.values():
        if pin.hashes == 0:
            raise LockError(f"{pin.name}=={pin.version} has no --hash: pip would not verify what it installs")
    for dependency in map(Requirement, dependencies):
        pin = pins.get(canonicalize_name(dependency.name))
        if pin is None:
            raise LockError(f"{dependency.name} (pyproject.toml) is not in {lock.name}: run make lock")
        if not dependency.specifier.contains(Version(pin.version), prereleases=True):
            raise LockError(f"{lock.name} pins {pin.name}=={pin.version}, outside pyproject.toml's {dependency}")
    return pins


def write(uv: str = "uv", lock: Path = LOCK, pyproject: Path = PYPROJECT) -> None:
    """Resolve pyproject.toml's dependencies for the Lambda runtime; keep existing pins that still fit."""
    resolved = subprocess.run(
        [
            uv, "pip", "compile", str(pyproject.relative_to(ROOT)),
            "--python-version", PYTHON_VERSION,
            "--python-platform", PLATFORM,
            "--generate-hashes",
            "--no-header",
            "--quiet",
            *(["--output-file", str(lock.relative_to(ROOT))] if lock.exists() else []),
        ],
        cwd=ROOT, check=True, capture_output=True, text=True,
    ).stdout  # fmt: skip
    body = lock.read_text(encoding="utf-8") if lock.exists() else resolved
    body = "\n".join(line for line in body.splitlines() if not line.startswith("# ")) + "\n"
    header = (
        "# The Lambda layer's lock (sam build installs it): pyproject.toml's dependencies resolved for\n"
        f"# Python {PYTHON_VERSION} on {PLATFORM}, every file hashed. Regenerate with `make lock`;\n"
        "# tests/unit/test_layer_lock.py fails when it no longer matches pyproject.toml.\n"
        f"# dependencies-sha256: {dependencies_digest(runtime_dependencies(pyproject))}\n"
    )
    lock.write_text(header + body.lstrip("\n"), encoding="utf-8")


def main(argv: list[str]) -> int:
    command = argv[0] if argv else "check"
    if command == "write":
        write(argv[1] if len(argv) > 1 else "uv")
        return 0
    try:
        pins = check()
    except LockError as e:
        print(f"layer lock: {e}", file=sys.stderr)  # noqa: T201
        return 1
    print(f"layer lock: {len(pins)} pins, all hashed, current with pyproject.toml")  # noqa: T201
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
