"""`make demo` headless, as CI runs it: the summary it prints, and nothing left running after Ctrl-C."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from brokersync_local.moto_server import PROCESS_MARKER
from tests.ports import SHIFT_VARIABLE

pytestmark = pytest.mark.broker
#: The demo's own ports moved clear of its defaults, so a demo someone left running does not collide.
PORT_OFFSET = 100 + int(os.environ.get(SHIFT_VARIABLE, "0"))


def _leftovers(state_dir: Path, aws_port: int) -> list[str]:
    """Command lines of processes the demo started that still run (brokers, moto, sync workers)."""
    return list(_leftover_pids(state_dir, aws_port).values())


def _leftover_pids(state_dir: Path, aws_port: int) -> dict[int, str]:
    found = {}
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            state = (proc / "stat").read_text().rsplit(")", 1)[-1].split()[0]
        except OSError:
            continue
        if state == "Z":
            continue
        ours = str(state_dir) in cmdline or (PROCESS_MARKER in cmdline and f"-p {aws_port}" in cmdline)
        if ours and int(proc.name) != os.getpid():
            found[int(proc.name)] = cmdline
    return found


#: The demo starts with SIGINT ignored, as a non-interactive shell starts a background job (and as
#: some CI runners start their steps): Ctrl-C must stop it all the same.
AS_A_BACKGROUND_JOB = ["sh", "-c", 'trap "" INT; exec "$0" "$@"']


def test_a_headless_switchover_demo_loses_nothing_and_duplicates_nothing(project_root: Path, tmp_path: Path) -> None:
    summary = tmp_path / "summary.json"
    args = (
        f"--after 5 --json {summary} --report {tmp_path / 'report'} "
        f"--state-dir {tmp_path / 'demo'} --port-offset {PORT_OFFSET}"
    )

    done = subprocess.run(
        ["make", "--no-print-directory", "demo", "HEADLESS=1", "RATE=50", "DURATION=10", f"DEMO_ARGS={args}"],
        cwd=project_root,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )

    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    outcome = json.loads(summary.read_text())
    assert (outcome["mode"], outcome["lost"], outcome["duplicates"]) == ("switchover", 0, 0)
    assert outcome["already_consumed_on_old_primary"] == 0
    assert outcome["produced"] > 0
    assert "drill summary:" in done.stdout
    assert "  lost: 0" in done.stdout
    assert "queue=ORDERS (sync)" in done.stdout, "the plain live view printed no line"
    assert Path(outcome["report"]).exists()
    assert _leftovers(tmp_path / "demo", 5085 + PORT_OFFSET) == []


@pytest.mark.parametrize(
    ("moment", "line_before_it", "then_s", "switch_at_s"),
    [
        ("while the pair is starting", "demo: fresh pair", 0, 120),
        ("while deploying into moto", "local world up", 0, 120),
        ("during the steady load", "queue=ORDERS", 0, 120),
        # About when the failover state machine reboots the brokers: a JVM restarted under a new pid.
        ("during the switchover", "applications stopped on the old primary", 3, 5),
    ],
)
def test_ctrl_c_at_any_moment_stops_everything_the_demo_started(
    moment: str, line_before_it: str, then_s: float, switch_at_s: int, tmp_path: Path
) -> None:
    state_dir = tmp_path / "demo"
    aws_port = 5085 + PORT_OFFSET + 10
    demo = subprocess.Popen(
        [*AS_A_BACKGROUND_JOB, sys.executable, "-m", "brokersync_cli.main", "demo", "--headless",
         "--rate", "50", "--duration", str(switch_at_s),
         "--state-dir", str(state_dir), "--report", "", "--port-offset", str(PORT_OFFSET + 10)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )  # fmt: skip
    assert demo.stdout is not None
    deadline = time.monotonic() + 120
    before = []
    for line in demo.stdout:
        before.append(line)
        if line_before_it in line or time.monotonic() > deadline:
            break
    time.sleep(then_s)

    os.killpg(demo.pid, signal.SIGINT)  # what a terminal's Ctrl-C sends: the whole foreground group
    interrupted = time.monotonic()
    try:
        rest = demo.communicate(timeout=120)[0]
    except subprocess.TimeoutExpired:
        os.kill(demo.pid, signal.SIGUSR1)  # the demo prints where each of its threads is
        time.sleep(2)
        os.killpg(demo.pid, signal.SIGKILL)  # nothing of this run outlives the test
        rest = demo.communicate()[0]
        for pid in _leftover_pids(state_dir, aws_port):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)
        pytest.fail(f"{moment}: still running 120 s after Ctrl-C:\n{''.join(before)[-2000:]}\n--- after ---\n{rest}")
    print(f"{moment}: the demo exited {time.monotonic() - interrupted:.1f}s after Ctrl-C")

    assert demo.returncode == 130, f"{moment}: {rest[-2000:]}"
    assert "everything it started was stopped" in rest, rest[-2000:]
    assert "Traceback" not in rest, rest[-2000:]
    assert _leftovers(state_dir, aws_port) == []
