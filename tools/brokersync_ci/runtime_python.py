"""Where the functions' runtime interpreter (python3.13) is on this machine, one answer for make and the tests.

``sam build`` needs it on ``PATH`` and the check of the built functions runs them under it.
``BROKERSYNC_PYTHON_RUNTIME`` wins; then ``python3.13`` on ``PATH``; then pyenv's copies, which
count even when 3.13 is not pyenv's global version. ``python -m brokersync_ci.runtime_python``
prints the path, or nothing when there is none.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

VERSION = (3, 13)


def runtime_python() -> str | None:
    candidates = [os.environ.get("BROKERSYNC_PYTHON_RUNTIME", ""), shutil.which("python3.13") or ""]
    candidates += sorted(str(p) for p in Path.home().glob(".pyenv/versions/3.13*/bin/python3.13"))
    candidates += ["/usr/bin/python3.13", "/usr/local/bin/python3.13"]
    for candidate in filter(None, candidates):
        try:
            done = subprocess.run(
                [candidate, "-c", f"import sys; print(sys.version_info[:2] == {VERSION})"],
                capture_output=True, text=True, timeout=30, check=False,
            )  # fmt: skip
        except OSError:
            continue
        if done.stdout.strip() == "True":
            return candidate
    return None


if __name__ == "__main__":
    sys.stdout.write(runtime_python() or "")
