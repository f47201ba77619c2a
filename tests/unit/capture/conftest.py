from __future__ import annotations

from pathlib import Path

import pytest

from brokersync.topology import Topology, load_topology


@pytest.fixture
def topology(topology_path: Path) -> Topology:
    return load_topology(topology_path)
