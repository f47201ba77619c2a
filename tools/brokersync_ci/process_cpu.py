"""CPU seconds per process from the kernel's accounting: what the benchmarks report per message.

A rate on a 2-core machine moves with whatever else runs; the CPU a process spends per
message does not (much), and it is what a user pays for. One definition, used by every bench.
"""

from __future__ import annotations

import os
from pathlib import Path


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` so far, all its threads (``/proc/PID/stat``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class CpuMeter:
    """CPU seconds each named process spends between :meth:`start` and :meth:`stop`."""

    def __init__(self, pids: dict[str, int]) -> None:
        self.pids = pids
        self._before: dict[str, float] = {}

    def start(self) -> None:
        self._before = {name: cpu_seconds(pid) for name, pid in self.pids.items()}

    def stop(self) -> dict[str, float]:
        return {name: cpu_seconds(pid) - self._before[name] for name, pid in self.pids.items()}
