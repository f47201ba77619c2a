"""`brokersync copy-burst` runs against a pair that is already up and verifies every copy."""

from __future__ import annotations

from pathlib import Path

import pytest

from brokersync_local.copy_burst import CopyBurstSettings, run_copy_burst
from brokersync_local.world import LocalWorld
from tests.broker_fixtures import TEST_PORTS

pytestmark = pytest.mark.broker


def test_the_demo_burst_arrives_on_dr_and_every_copy_is_verified(world: LocalWorld, topology_path: Path) -> None:
    lines: list[str] = []

    code = run_copy_burst(
        CopyBurstSettings(topology_path, world.state_dir, messages=60, ports=TEST_PORTS), out=lines.append
    )

    assert code == 0
    assert "verified on orders-usw2: 60/60 copies with the same correlation id and body" in lines
    assert world.running(), "a world the demo did not start is left running"
