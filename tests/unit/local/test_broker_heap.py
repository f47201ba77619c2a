"""The local DR broker is sized for its queues' memory limit, as an Amazon MQ instance type is."""

from __future__ import annotations

from pathlib import Path

from brokersync.topology import load_topology
from brokersync_local.broker_process import DEFAULT_HEAP_MB
from brokersync_local.world import LocalWorld, with_dr_memory_limit


def _world(tmp_path: Path, project_root: Path, memory_limit_mb: int | None) -> LocalWorld:
    topology = with_dr_memory_limit(load_topology(project_root / "topology.yaml"), memory_limit_mb)
    return LocalWorld(topology, tmp_path)


def test_the_default_limit_keeps_the_default_heap(tmp_path: Path, project_root: Path) -> None:
    world = _world(tmp_path, project_root, None)

    assert world.brokers["dr"].heap == world.brokers["primary"].heap == f"{DEFAULT_HEAP_MB}m"


def test_a_raised_limit_gets_a_dr_heap_twice_its_size_so_the_brokers_own_limit_does_not_bind_first(
    tmp_path: Path, project_root: Path
) -> None:
    world = _world(tmp_path, project_root, 384)

    assert world.topology.tuning.dr.memory_limit_mb == 384
    assert world.brokers["dr"].heap == "768m"
    assert world.brokers["primary"].heap == f"{DEFAULT_HEAP_MB}m"
