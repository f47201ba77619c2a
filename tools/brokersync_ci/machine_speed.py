"""What a fixed piece of work costs in CPU on this machine while a bench step runs: a yardstick.

Why: on a shared virtual machine a CPU-second does not buy a fixed amount of work. On this
project's 2-core VM the same unit of work (64 MB hashed and a 300,000-step Python loop) cost 65 to 93 ms
of CPU from one second to the next with nothing else running, and in the sync bench every
process's CPU per 1,000 messages (the brokers', the relay's, the application's) moved
together by about 15 % between two runs. A probe that repeats one small unit of work through
a step says what the machine's CPU-second was worth during it; a cost divided by the unit's
cost (probe units per 1,000 messages) moves with what the processes did, not with the host.

The probe is a process of its own (a thread would be charged to whoever hosts it), and it
takes about 1 % of one core: a 10 ms unit once a second.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
from typing import Any

#: The probe's program: one unit of work per interval, its CPU time in ms on a line of its own.
PROBE_PROGRAM = """
import hashlib, sys, time
interval = float(sys.argv[1])
data = bytes(range(256)) * 4096
while True:
    started = time.process_time()
    digest = hashlib.sha256()
    for _ in range(3):
        digest.update(data)
    total = 0
    for i in range(60000):
        total += i * i
    print(round((time.process_time() - started) * 1000, 3), flush=True)
    time.sleep(interval)
"""
#: How long a probe asked to stop may take before it is killed.
STOP_TIMEOUT_S = 5.0


def summary(samples_ms: list[float]) -> dict[str, Any]:
    """The unit's cost over a step, in ms of CPU: its mean (what costs are read against), median and deciles.

    The mean, not the median: the unit's cost is bimodal here (about 7 ms and about 12 ms, the
    host's two states), and the processes metered beside it paid the mix of the two over the
    step. The median jumps from one mode to the other when the mix passes one half: in the
    first run of the probe it read 7.6 ms in one step against 11.3 and 11.8 in the others,
    while the processes' costs moved 12 %.
    """
    if not samples_ms:
        return {"unit_cpu_ms": None, "median_ms": None, "p10_ms": None, "p90_ms": None, "samples": 0}
    ordered = sorted(samples_ms)
    deciles = statistics.quantiles(ordered, n=10) if len(ordered) >= 2 else [ordered[0]] * 9
    return {
        "unit_cpu_ms": round(statistics.fmean(ordered), 3),
        "median_ms": round(statistics.median(ordered), 3),
        "p10_ms": round(deciles[0], 3),
        "p90_ms": round(deciles[-1], 3),
        "samples": len(ordered),
    }


def _in_units(cpu_s_per_1000: float, unit_cpu_ms: float) -> float:
    return round(cpu_s_per_1000 / (unit_cpu_ms / 1000), 2)


def probe_units(cpu_s_per_1000: float, unit_cpu_ms: float | None) -> float | None:
    """One process's CPU-seconds per 1,000 messages in probe units (None without a probe reading)."""
    return _in_units(cpu_s_per_1000, unit_cpu_ms) if unit_cpu_ms else None


def in_probe_units(cpu_s_per_1000: dict[str, float], unit_cpu_ms: float | None) -> dict[str, float] | None:
    """Each process's CPU per 1,000 messages in probe units (None without a probe reading)."""
    if not unit_cpu_ms:
        return None
    return {name: _in_units(value, unit_cpu_ms) for name, value in cpu_s_per_1000.items()}


class SpeedProbe:
    """The yardstick's process: started with a step's meter, stopped with it."""

    def __init__(self, interval_s: float = 1.0) -> None:
        if interval_s <= 0:
            raise ValueError("a speed probe needs an interval above 0 s")
        self.interval_s = interval_s
        self._process: subprocess.Popen[str] | None = None

    def start(self) -> None:
        self._process = subprocess.Popen(
            [sys.executable, "-c", PROBE_PROGRAM, str(self.interval_s)],
            stdout=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            text=True,
        )

    def stop(self) -> dict[str, Any]:
        """End the probe and summarise what it measured since :meth:`start`."""
        process, self._process = self._process, None
        if process is None:
            return summary([])
        process.terminate()
        try:
            output, _ = process.communicate(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            process.kill()
            output, _ = process.communicate()
        return summary([float(line) for line in output.split() if line.strip()])

    def __enter__(self) -> SpeedProbe:
        self.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        if self._process is not None:
            self.stop()
