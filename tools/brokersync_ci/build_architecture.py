"""Fail when ``sam build`` put a native library of the wrong architecture into an artifact.

The functions run on arm64 (Graviton). A layer built for the build host's x86_64 passes every
other check and fails only at cold start, with an ImportError of lxml or pydantic-core, so CI
reads the ELF header of every shared object in the build output.

``python -m brokersync_ci.build_architecture BUILD_DIR`` exits 1 and names the offenders;
``--same-packages BUILD_DIR HOST_BUILD_DIR`` also compares the installed distributions of a second
build of the same template for the build host's architecture.
"""

from __future__ import annotations

import sys
from pathlib import Path

ELF_MAGIC = b"\x7fELF"
#: e_machine values (ELF header offset 18, little-endian) of the architectures we may meet.
MACHINES = {62: "x86_64", 183: "aarch64", 3: "x86"}
WANTED = "aarch64"


def architecture(path: Path) -> str | None:
    """The architecture an ELF file was built for (None when it is not ELF)."""
    with path.open("rb") as f:
        header = f.read(20)
    if len(header) < 20 or header[:4] != ELF_MAGIC:
        return None
    machine = int.from_bytes(header[18:20], "little")
    return MACHINES.get(machine, f"machine {machine}")


def wrong_architecture(build_dir: Path, wanted: str = WANTED) -> list[tuple[Path, str]]:
    found = []
    for path in sorted(build_dir.rglob("*.so*")):
        if path.is_file() and (arch := architecture(path)) and arch != wanted:
            found.append((path, arch))
    return found


def installed_distributions(build_dir: Path) -> dict[str, set[str]]:
    """``name-version.dist-info`` folders per build artifact (function or layer) of a sam build output."""
    return {
        artifact.name: {d.name for d in artifact.rglob("*.dist-info") if d.is_dir()}
        for artifact in sorted(build_dir.iterdir())
        if artifact.is_dir()
    }


def same_packages(build_dir: Path, other: Path) -> int:
    """Exit status: 0 when both builds installed the same distributions at the same versions.

    The check of the built functions runs the host-architecture build; this proves it is the
    arm64 build's twin in everything but native code.
    """
    ours, theirs = installed_distributions(build_dir), installed_distributions(other)
    if not ours or ours != theirs:
        for artifact in sorted(set(ours) | set(theirs)):
            for name in sorted(ours.get(artifact, set()) ^ theirs.get(artifact, set())):
                sys.stderr.write(f"{artifact}: {name} is in only one of {build_dir} and {other}\n")
        return 1
    count = sum(len(v) for v in ours.values())
    sys.stdout.write(f"{other} installs the same {count} distributions as {build_dir}\n")
    return 0


def main(argv: list[str]) -> int:
    if argv and argv[0] == "--same-packages":
        status = main(argv[1:2])
        return status or same_packages(Path(argv[1]), Path(argv[2]))
    build_dir = Path(argv[0])
    shared = [p for p in build_dir.rglob("*.so*") if p.is_file()]
    if not shared:
        sys.stderr.write(f"{build_dir}: no shared objects found; is this a sam build output?\n")
        return 1
    wrong = wrong_architecture(build_dir)
    for path, arch in wrong:
        sys.stderr.write(f"{path}: built for {arch}, the functions run on {WANTED}\n")
    if not wrong:
        sys.stdout.write(f"{len(shared)} shared objects in {build_dir}, all {WANTED}\n")
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
