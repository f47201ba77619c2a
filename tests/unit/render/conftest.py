from __future__ import annotations

from pathlib import Path

import pytest

from brokersync.topology import Topology, load_topology

HERE = Path(__file__).parent


@pytest.fixture
def topology(topology_path: Path) -> Topology:
    return load_topology(topology_path)


@pytest.fixture
def customer_base() -> str:
    return (HERE / "customer_base.xml").read_text()
