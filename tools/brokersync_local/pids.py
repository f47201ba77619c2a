"""Recognising and signalling the processes the local world started, by pid."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path


def pid_is_ours(pid: int, marker: str | Path) -> bool:
    """True when ``pid`` runs and its command line mentions ``marker`` (guards against pid reuse)."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    if stat.rsplit(")", 1)[-1].split()[0] == "Z":  # a zombie has already exited
        return False
    return str(marker).encode() in cmdline


def pids_with_argument(argument: str) -> list[int]:
    """Live processes (not this one) that have ``argument``, whole, on their command line.

    For what a PID cannot find: a process started a moment before an interrupt, whose PID
    was never recorded.
    """
    wanted = b"\0" + argument.encode() + b"\0"
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            cmdline = b"\0" + (proc / "cmdline").read_bytes()
            state = (proc / "stat").read_text().rsplit(")", 1)[-1].split()[0]
        except OSError:
            continue
        if state != "Z" and wanted in cmdline:
            found.append(int(proc.name))
    return found


def signal_group(pid: int, sig: signal.Signals) -> None:
    """Signal the process group ``pid`` leads (our processes are session leaders)."""
    try:
        os.killpg(pid, sig)
    except ProcessLookupError:
        return
    except PermissionError:
        os.kill(pid, sig)


def record_pid(env_file: Path, role: str, pid: int | None) -> None:
    """Write ``role``'s new pid into a running world's ``env.json``.

    A broker restarted under a new pid that env.json does not name is no longer the world's:
    the next ``up`` finds the recorded pid dead, cannot stop the live one and meets its port
    taken. The write replaces the file atomically, so a reader sees the old or the new.
    """
    env = json.loads(env_file.read_text(encoding="utf-8"))
    env[role]["pid"] = pid
    tmp = env_file.with_suffix(".tmp")
    tmp.write_text(json.dumps(env, indent=2) + "\n", encoding="utf-8")
    tmp.replace(env_file)
