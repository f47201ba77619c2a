"""Recognising and signalling the processes the local world started, by pid."""

from __future__ import annotations

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


def signal_group(pid: int, sig: signal.Signals) -> None:
    """Signal the process group ``pid`` leads (our processes are session leaders)."""
    try:
        os.killpg(pid, sig)
    except ProcessLookupError:
        return
    except PermissionError:
        os.kill(pid, sig)
