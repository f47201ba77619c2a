"""The sync bench's relay and purge start on what Lambda runs: the build's layer under python3.13 alone.

``bench/sync.py`` measures the relay's and the purge's CPU in processes it starts with
:class:`FunctionProcess` (``bench/sync_functions.py``); these show both starting from a fresh
checkout's build, answering on their reply pipe, and stopping with their tallies when asked,
with no broker to reach.
"""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import pytest

from brokersync.topology import load_topology, parse_topology
from brokersync_local.function_code import local_function_code
from tests.integration.bench_modules import load_bench

ROOT = Path(__file__).resolve().parents[2]
CLOSED = "stomp://127.0.0.1:1"  # nothing listens on port 1


@pytest.fixture(scope="module")
def bench_sync() -> ModuleType:
    """``bench/sync.py`` as a module (it imports ``sync_functions`` from its own folder)."""
    return load_bench("sync")


def _run(bench_sync: ModuleType, role: str) -> tuple[bool, dict]:
    code = local_function_code()
    assert code.build_dir is not None, "the bench runs the build unless told otherwise"
    data = load_topology(ROOT / "topology.yaml").model_dump(mode="json")
    for broker in data["brokers"]:
        broker["stomp"] = [CLOSED]
    function = bench_sync.FunctionProcess(role, code, parse_topology(data), "http://127.0.0.1:1")
    ready = function.wait_ready(60)
    function.stop()
    result = function.finish(60)
    assert function.process.returncode == 0
    return ready, result


@pytest.mark.timeout(120)
def test_the_benchs_relay_starts_on_the_build_and_stops_with_its_tallies(bench_sync: ModuleType) -> None:
    ready, result = _run(bench_sync, "relay")

    assert ready
    assert result == {"units": 0, "reads": 0, "calls": {}}


@pytest.mark.timeout(120)
def test_the_benchs_purge_starts_on_the_build_and_reports_what_it_could_not_reach(bench_sync: ModuleType) -> None:
    ready, result = _run(bench_sync, "purge")

    assert ready
    assert result["removed_at"] == {} and result["units"] == 0
    assert all(isinstance(n, int) for n in result["calls"].values())


def test_the_bench_reports_each_functions_ledger_calls_per_1000_messages_by_operation(bench_sync: ModuleType) -> None:
    counted = {"relay": {"calls": {"UpdateItem": 30, "PutItem": 10}}, "purge": {"units": 0}}

    assert bench_sync.calls_per_1000(counted, 2000) == {
        "relay": {"PutItem": 5.0, "UpdateItem": 15.0, "all": 20.0},
        "purge": {"all": 0.0},
    }


def test_the_bench_syncs_one_queue_by_its_old_name_or_numbered_queues(bench_sync: ModuleType) -> None:
    assert bench_sync.queue_names() == ["BENCH.SYNC"]
    assert bench_sync.queue_names(3) == ["BENCH.SYNC.1", "BENCH.SYNC.2", "BENCH.SYNC.3"]
    assert [q.name for q in bench_sync.bench_topology("sync", queues=2).queues] == ["BENCH.SYNC.1", "BENCH.SYNC.2"]
    with pytest.raises(ValueError, match="at least one queue"):
        bench_sync.queue_names(0)
