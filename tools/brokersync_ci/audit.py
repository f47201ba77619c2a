"""pip-audit on the layer's lock, with the registry's project records where pip-audit gets none.

pip-audit asks PyPI for each pinned version's record (``/pypi/<name>/<version>/json``), whose
``vulnerabilities`` list is the PyPA advisory database's verdict on that version. Some package
mirrors (this project's CI machine's among them) serve only the project record
(``/pypi/<name>/json``), which carries the verdict on the newest release alone. So, for every
pin pip-audit had to skip:

* a pin that *is* the newest release is audited from the project record, exactly;
* an older pin cannot be audited there: it is reported as unaudited, with the newest release,
  and ``make lock`` moves the lock forward.

Exit 1 when any pin has a known vulnerability, or when ``--strict`` and a pin went unaudited.
``python -m brokersync_ci.audit [--strict] [LOCK]``
"""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from packaging.utils import canonicalize_name

from brokersync_ci.layer_lock import LOCK, parse_lock

PROJECT_RECORD = "https://pypi.org/pypi/{name}/json"


@dataclass
class AuditReport:
    vulnerable: dict[str, list[str]] = field(default_factory=dict)
    audited: list[str] = field(default_factory=list)
    unaudited: dict[str, str] = field(default_factory=dict)


def _pip_audit(lock: Path) -> dict:
    command = [sys.executable, "-m", "pip_audit", "--requirement", str(lock), "--require-hashes",
               "--disable-pip", "--progress-spinner", "off", "--format", "json"]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=600, check=False)
    if not done.stdout.strip():
        raise SystemExit(f"pip-audit gave no report (exit {done.returncode}): {done.stderr.strip()[-500:]}")
    return json.loads(done.stdout)


def _project_record(name: str) -> dict:
    with urllib.request.urlopen(PROJECT_RECORD.format(name=name), timeout=30) as response:  # noqa: S310 (fixed https URL)
        return json.load(response)


def audit(lock: Path = LOCK) -> AuditReport:
    report = AuditReport()
    pins = parse_lock(lock.read_text(encoding="utf-8"))
    for dependency in _pip_audit(lock)["dependencies"]:
        name = dependency["name"]
        version = dependency.get("version") or pins[canonicalize_name(name)].version
        pin = f"{name}=={version}"
        if "skip_reason" not in dependency:
            report.audited.append(pin)
            if dependency.get("vulns"):
                report.vulnerable[pin] = [v["id"] for v in dependency["vulns"]]
            continue
        record = _project_record(name)
        newest = record["info"]["version"]
        if newest != version:
            report.unaudited[pin] = f"the registry describes only the newest release, {newest}"
            continue
        report.audited.append(pin)
        if record.get("vulnerabilities"):
            report.vulnerable[pin] = [v["id"] for v in record["vulnerabilities"]]
    return report


def main(argv: list[str]) -> int:
    strict = "--strict" in argv
    paths = [a for a in argv if not a.startswith("--")]
    report = audit(Path(paths[0]) if paths else LOCK)
    for pin, ids in sorted(report.vulnerable.items()):
        print(f"VULNERABLE {pin}: {', '.join(ids)}")  # noqa: T201
    for pin, why in sorted(report.unaudited.items()):
        print(f"unaudited {pin}: {why} (make lock moves to it when the other pins allow)")  # noqa: T201
    print(  # noqa: T201
        f"audit: {len(report.audited)} pins audited, {len(report.vulnerable)} vulnerable, "
        f"{len(report.unaudited)} unaudited"
    )
    return 1 if report.vulnerable or (strict and report.unaudited) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
