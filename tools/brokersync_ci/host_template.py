"""template.yaml for the build host's architecture: the twin build the built-functions check runs.

Lambda runs the functions on arm64, and an arm64 build's lxml and pydantic-core cannot load on
an x86_64 CI machine. This writes a copy of the template whose functions and layer build for
the host instead, with every code path made absolute (the copy lives under .brokersync/). The
copy installs the same lock, and ``build_architecture --same-packages`` proves both builds hold
the same distributions.

``python -m brokersync_ci.host_template template.yaml OUT.yaml``
"""

from __future__ import annotations

import platform
import re
import sys
from pathlib import Path

_ARCHITECTURES = {"x86_64": "x86_64", "amd64": "x86_64", "aarch64": "arm64", "arm64": "arm64"}
_CODE_PATH = re.compile(r"^(\s+(?:CodeUri|ContentUri|DefinitionUri|ScriptLocation): )(?!/)(\S+)$", re.MULTILINE)


def host_architecture() -> str:
    machine = platform.machine().lower()
    if machine not in _ARCHITECTURES:
        raise SystemExit(f"no Lambda architecture for this machine ({machine})")
    return _ARCHITECTURES[machine]


def host_template(text: str, root: Path, architecture: str) -> str:
    """The template with arm64 replaced by ``architecture`` and relative code paths made absolute."""
    replacements = {
        " Architectures: [arm64]": f" Architectures: [{architecture}]",
        " CompatibleArchitectures: [arm64]": f" CompatibleArchitectures: [{architecture}]",
        " BuildArchitecture: arm64": f" BuildArchitecture: {architecture}",
    }
    for old, new in replacements.items():
        if text.count(old) != 1:
            raise SystemExit(f"template.yaml should say {old!r} exactly once; the host build cannot follow it")
        text = text.replace(old, new)
    return _CODE_PATH.sub(lambda m: f"{m[1]}{(root / m[2]).as_posix()}{'/' if m[2].endswith('/') else ''}", text)


def main(argv: list[str]) -> int:
    source, target = Path(argv[0]).resolve(), Path(argv[1])
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(host_template(source.read_text(encoding="utf-8"), source.parent, host_architecture()))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
