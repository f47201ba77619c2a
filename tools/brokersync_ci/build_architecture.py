"""Fail when ``sam build`` put a native library of the wrong architecture into an artifact.

The functions run on arm64 (Graviton). A layer built for the build host's x86_64 passes every
other check and fails only at cold start, with an ImportError of lxml or pydantic-core, so CI
reads the ELF header of every shared object in the build output.

``python -m brokersync_ci.build_architecture BUILD_DIR`` exits 1 and names the offenders.
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


def main(argv: list[str]) -> int:
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
