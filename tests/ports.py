"""Fixed test ports, movable as a block so two checkouts can run their suites at the same time."""

from __future__ import annotations

import os

from brokersync_local.world import WorldPorts

SHIFT_VARIABLE = "BROKERSYNC_TEST_PORT_SHIFT"


def shifted_ports(ports: WorldPorts) -> WorldPorts:
    """``ports`` moved by ``$BROKERSYNC_TEST_PORT_SHIFT`` (0 when unset)."""
    return ports.shifted(int(os.environ.get(SHIFT_VARIABLE, "0")))
