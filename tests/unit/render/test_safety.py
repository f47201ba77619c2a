"""Broker settings under which capture would record what was not consumed are refused, each named."""

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


def _with_redelivery(policies: str) -> str:
    return (
        f'<broker xmlns="{CORE}" schedulerSupport="true"><plugins><redeliveryPlugin fallbackToDeadLetter="true">'
        f"<redeliveryPolicyMap><redeliveryPolicyMap>{policies}</redeliveryPolicyMap></redeliveryPolicyMap>"
        "</redeliveryPlugin></plugins></broker>"
    )


DEFAULT_ENTRY = '<defaultEntry><redeliveryPolicy maximumRedeliveries="3" redeliveryDelay="5000"/></defaultEntry>'


def _entries(*queues: str) -> str:
    policies = "".join(f'<redeliveryPolicy queue="{q}" maximumRedeliveries="3"/>' for q in queues)
    return f"<redeliveryPolicyEntries>{policies}</redeliveryPolicyEntries>"


@pytest.mark.parametrize("role", ["primary", "dr"])
@pytest.mark.parametrize(
    ("policies", "named"),
    [
        (DEFAULT_ENTRY, "ORDERS, PAYMENTS"),
        (_entries("ORDERS"), "ORDERS"),
        (_entries("PAY*"), None),
        (_entries(">"), "ORDERS, PAYMENTS"),
        (_entries("APP.>,PAYMENTS"), "PAYMENTS"),
    ],
    ids=["default-entry", "by-name", "not-a-wildcard-here", "every-queue", "in-a-list"],
)
def test_a_redelivery_policy_over_a_captured_queue_is_refused_naming_the_queues(
    topology: Topology, role: str, policies: str, named: str | None
) -> None:
    """The broker takes a NACK'd message off the queue (a consumed advisory) and sends it back later."""
    base = _with_redelivery(policies)

    if named is None:
        render_configuration(topology, role, base=base)
    else:
        with pytest.raises(RenderError, match=f"redeliveryPlugin's policies cover {named}:"):
            render_configuration(topology, role, base=base)


def test_a_redelivery_policy_for_other_queues_only_renders(topology: Topology) -> None:
    """A mirror queue (AUDIT) is not captured: the broker's redelivery there removes nothing from DR."""
    base = _with_redelivery(_entries("APP.>", "AUDIT"))

    assert "redeliveryPlugin" in render_configuration(topology, "primary", base=base)


def test_every_unsafe_setting_is_named_at_once(topology: Topology) -> None:
    base = _with_redelivery(DEFAULT_ENTRY).replace("<broker ", '<broker advisorySupport="false" ', 1)

    with pytest.raises(RenderError, match=r"advisorySupport.*; and the redeliveryPlugin"):
        render_configuration(topology, "primary", base=base)
