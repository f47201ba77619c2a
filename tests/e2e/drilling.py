"""One way for the e2e tests to run a drill: quiet, on the test's own ports, with a report."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from brokersync_local.drill import DrillSettings, run_drill
from brokersync_local.world import WorldPorts


def drill(mode: str, topology: Path, base: Path, ports: WorldPorts, **settings: Any) -> dict[str, Any]:
    """Run ``mode`` in a state directory under ``base`` and return its outcome (the report beside it).

    The whole outcome is printed: pytest shows a failing test's output, where an assertion's
    own message cuts a long dict short, and the report is gone with the test's directory in CI.
    """
    chosen: dict[str, Any] = {"rate": 200, "duration": 20, "kill_at": 12, "report": base / "report"} | settings
    outcome = run_drill(
        DrillSettings(
            mode=mode,  # type: ignore[arg-type]
            topology=topology,
            state_dir=base / "drill",
            ports=ports,
            **chosen,
        ),
        out=lambda _line: None,
    )
    print(json.dumps(outcome, indent=1, default=str))
    return outcome
