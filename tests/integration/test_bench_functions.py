"""The sync bench's relay and purge start on what Lambda runs: the build's layer under python3.13 alone.

``bench/sync.py`` measures the relay's and the purge's CPU in processes running
``bench/sync_functions.py``; these show that script starting from a fresh checkout's build,
answering on its reply pipe, and stopping with its tallies when asked, with no broker to reach.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from brokersync.topology import load_topology
from brokersync_local.function_code import LAYER, local_function_code

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "bench" / "sync_functions.py"
CLOSED = "stomp://127.0.0.1:1"  # nothing listens on port 1


def _run(role: str) -> tuple[list[dict], str]:
    code = local_function_code()
    assert code.build_dir is not None, "the bench runs the build unless told otherwise"
    topology = load_topology(ROOT / "topology.yaml").model_dump(mode="json")
    for broker in topology["brokers"]:
        broker["stomp"] = [CLOSED]
    read_fd, write_fd = os.pipe()
    process = subprocess.Popen(
        [code.python, "-I", "-S", str(SCRIPT), str(code.build_dir / LAYER / "python"), role, str(write_fd)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        pass_fds=(write_fd,),
        env={**os.environ, "AWS_ACCESS_KEY_ID": "x", "AWS_SECRET_ACCESS_KEY": "x"},
        text=True,
    )
    os.close(write_fd)
    with os.fdopen(read_fd, encoding="utf-8") as replies:
        assert process.stdin is not None
        process.stdin.write(json.dumps({"topology": topology, "endpoint": "http://127.0.0.1:1"}) + "\n")
        process.stdin.flush()
        first = json.loads(replies.readline() or "{}")
        process.stdin.write("stop\n")
        process.stdin.flush()
        rest = [json.loads(line) for line in replies]
    logs, _ = process.communicate(timeout=60)
    assert process.returncode == 0, logs
    return [first, *rest], logs


@pytest.mark.timeout(120)
def test_the_benchs_relay_starts_on_the_build_and_stops_with_its_tallies() -> None:
    replies, logs = _run("relay")

    assert replies[0] == {"ready": True}, logs
    assert replies[-1] == {"result": {"units": 0, "reads": 0}}


@pytest.mark.timeout(120)
def test_the_benchs_purge_starts_on_the_build_and_reports_what_it_could_not_reach() -> None:
    replies, logs = _run("purge")

    assert replies[0] == {"ready": True}, logs
    result = replies[-1]["result"]
    assert result["removed_at"] == {} and result["units"] == 0
