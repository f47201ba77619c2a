"""Ctrl-C in the local world's runs: held while a process starts, and nothing it started goes unfound."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from brokersync.topology import load_topology
from brokersync_local.interrupts import interrupts_held, interrupts_stop_runs
from brokersync_local.pids import pids_with_argument
from brokersync_local.world import LocalWorld


@pytest.fixture
def ctrl_c_raises() -> Iterator[None]:
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


def _sleeper(*arguments: str) -> subprocess.Popen[bytes]:
    """A process with ``arguments`` on its command line, leading a session as the world's processes do."""
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", *arguments], start_new_session=True)


def test_a_ctrl_c_while_a_process_starts_takes_effect_once_its_pid_is_known(ctrl_c_raises: None) -> None:
    recorded = []

    with pytest.raises(KeyboardInterrupt), interrupts_held():
        signal.raise_signal(signal.SIGINT)
        recorded.append("the pid")  # still runs: the interrupt waits for the block's end

    assert recorded == ["the pid"]


def test_a_block_without_an_interrupt_ends_quietly(ctrl_c_raises: None) -> None:
    with interrupts_held():
        pass

    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_a_kill_during_a_bench_s_runs_stops_them_through_their_tear_down() -> None:
    torn_down = []

    with pytest.raises(KeyboardInterrupt), interrupts_stop_runs():
        try:
            signal.raise_signal(signal.SIGTERM)
        finally:
            torn_down.append("the pair")

    assert torn_down == ["the pair"]


def test_a_bench_s_runs_leave_the_signal_handlers_as_they_found_them() -> None:
    before = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}

    with interrupts_stop_runs():
        assert signal.getsignal(signal.SIGTERM) is not before[signal.SIGTERM]

    assert {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)} == before


def test_a_ctrl_c_held_during_a_tear_down_that_ignores_it_stays_ignored() -> None:
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        with interrupts_held():
            signal.raise_signal(signal.SIGINT)  # no KeyboardInterrupt leaves the block

        assert signal.getsignal(signal.SIGINT) == signal.SIG_IGN
    finally:
        signal.signal(signal.SIGINT, previous)


def test_a_process_is_found_by_a_whole_argument_not_by_its_prefix(tmp_path: Path) -> None:
    ours = _sleeper(f"-Dactivemq.base={tmp_path}/brokers/orders-use1")
    other = _sleeper(f"-Dactivemq.base={tmp_path}/brokers/orders-use10")
    try:
        assert pids_with_argument(f"-Dactivemq.base={tmp_path}/brokers/orders-use1") == [ours.pid]
    finally:
        for process in (ours, other):
            process.kill()
            process.wait()


def test_down_stops_a_broker_whose_pid_was_never_recorded(tmp_path: Path, project_root: Path) -> None:
    world = LocalWorld(load_topology(project_root / "topology.yaml"), tmp_path)
    unrecorded = _sleeper(world.brokers["dr"].base_argument)  # as if Ctrl-C came between its start and its pid

    world.down(log=lambda _m: None)

    deadline = time.monotonic() + 10
    while unrecorded.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert unrecorded.returncode == -signal.SIGKILL
