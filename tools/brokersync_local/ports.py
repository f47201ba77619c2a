"""Loopback port checks, so a taken port is reported before a broker fails obscurely on it."""

from __future__ import annotations

import socket
import time
from collections.abc import Callable

LOOPBACK = "127.0.0.1"


def port_is_free(port: int, host: str = LOOPBACK) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError:
            return False
    return True


def port_answers(port: int, host: str = LOOPBACK, timeout_s: float = 0.5) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            return True
    except OSError:
        return False


def wait_until_answers(port: int, deadline: float, alive: Callable[[], bool], host: str = LOOPBACK) -> bool:
    """Poll until ``port`` accepts connections; False as soon as ``alive()`` says the owner died."""
    while time.monotonic() < deadline:
        if port_answers(port, host):
            return True
        if not alive():
            return False
        time.sleep(0.1)
    return False


def free_port(host: str = LOOPBACK) -> int:
    """A port the OS just handed out, for throwaway processes (a forensic reader)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])
