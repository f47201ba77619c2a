"""A configuration that turns the broker's advisories off is refused: capture cannot work without them."""

from __future__ import annotations

import pytest

from brokersync.exceptions import RenderError
from brokersync.render import render_configuration
from brokersync.topology import Topology

CORE = "http://activemq.apache.org/schema/core"


@pytest.mark.parametrize("role", ["primary", "dr"])
@pytest.mark.parametrize("value", ["false", "FALSE", " off ", "no", "0"])
def test_a_base_that_turns_advisories_off_is_refused_for_either_role(topology: Topology, role: str, value: str) -> None:
    """Spring reads each of these as false; the DR broker needs advisories once it is primary."""
    base = f'<broker xmlns="{CORE}" advisorySupport="{value}"/>'

    with pytest.raises(RenderError, match="advisorySupport"):
        render_configuration(topology, role, base=base)


@pytest.mark.parametrize("value", ["true", "TRUE", "yes"])
def test_a_base_that_leaves_advisories_on_renders(topology: Topology, value: str) -> None:
    assert f'advisorySupport="{value}"' in render_configuration(
        topology, "primary", base=f'<broker xmlns="{CORE}" advisorySupport="{value}"/>'
    )


def test_a_failover_renders_over_advisories_turned_off_for_its_caller_to_report(topology: Topology) -> None:
    base = f'<broker xmlns="{CORE}" advisorySupport="false"/>'

    assert 'advisorySupport="false"' in render_configuration(topology, "primary", base=base, refuse_unsafe_base=False)
