"""One way for the e2e tests to run a drill: quiet, on the test's own ports, with a report."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from brokersync_local.drill import DrillSettings, run_drill
from brokersync_local.world import WorldPorts


def drill(mode: str, topology: Path, base: Path, ports: WorldPorts, **settings: Any) -> dict[str, Any]:
    """Run ``mode`` in a state directory under ``base`` and return its outcome (the report beside it)."""
    chosen: dict[str, Any] = {"rate": 200, "duration": 20, "kill_at": 12, "report": base / "report"} | settings
    return run_drill(
        DrillSettings(
            mode=mode,  # type: ignore[arg-type]
            topology=topology,
            state_dir=base / "drill",
            ports=ports,
            **chosen,
        ),
        out=lambda _line: None,
    )
