"""A customer's own network connector may not forward what BrokerSync counts on.

A bridge acknowledges what it forwards, so a forwarded message of a synced queue raises the
consumed advisory an application's consumption does. Rendering refuses such a connector and
names the exclusions that make it safe; which destinations a connector forwards follows
ActiveMQ's ``isPermissableDestination``.
"""

from __future__ import annotations

import pytest
from lxml import etree

from brokersync.exceptions import RenderError
from brokersync.render import render_configuration
from brokersync.render.connectors import forwarding_connectors, kept_queues, may_forward
from brokersync.topology import Topology

CORE = "http://activemq.apache.org/schema/core"


def _base(connector: str) -> str:
    return f'<broker xmlns="{CORE}"><networkConnectors>{connector}</networkConnectors></broker>'


def _connector(xml: str) -> etree._Element:
    return etree.fromstring(f'<networkConnectors xmlns="{CORE}">{xml}</networkConnectors>')[0]


#: Amazon MQ's network-of-brokers example: every destination, both ways, on demand.
MESH = '<networkConnector name="connector_1_to_2" userName="commonUser" duplex="true" uri="static:(ssl://b:61617)"/>'
SAFE_MESH = (
    '<networkConnector name="connector_1_to_2" duplex="true" uri="static:(ssl://b:61617)">'
    "<excludedDestinations>"
    '<queue physicalName="ORDERS"/><queue physicalName="PAYMENTS"/><queue physicalName="BROKERSYNC.>"/>'
    '<queue physicalName="*.DR"/>'
    "</excludedDestinations></networkConnector>"
)


@pytest.mark.parametrize("role", ["primary", "dr"])
def test_a_mesh_connector_that_forwards_every_queue_is_refused_with_the_exclusions_to_add(
    topology: Topology, role: str
) -> None:
    with pytest.raises(RenderError) as refused:
        render_configuration(topology, role, base=_base(MESH))

    message = str(refused.value)
    assert "'connector_1_to_2' may forward ORDERS, PAYMENTS, ORDERS.DR" in message
    assert '<queue physicalName="BROKERSYNC.CONSUMED"/>' in message
    assert "consumed advisory" in message


@pytest.mark.parametrize("role", ["primary", "dr"])
def test_a_mesh_connector_that_excludes_them_renders_and_is_kept(topology: Topology, role: str) -> None:
    rendered = render_configuration(topology, role, base=_base(SAFE_MESH))

    assert 'name="connector_1_to_2"' in rendered


def test_kept_queues_are_the_captured_queues_their_copies_and_brokersync_s_own(topology: Topology) -> None:
    assert kept_queues(topology) == [
        "ORDERS",
        "PAYMENTS",
        "ORDERS.DR",
        "PAYMENTS.DR",
        "AUDIT.DR",
        "BROKERSYNC.CONSUMED",
        "BROKERSYNC.PARKED",
        "BROKERSYNC.RECEIPTS",
    ]


def test_a_mirror_queue_itself_may_be_forwarded(topology: Topology) -> None:
    """Nothing is captured or purged for it; only its copies are kept."""
    only_audit = (
        '<networkConnector name="audit" uri="static:(tcp://b:61616)">'
        '<dynamicallyIncludedDestinations><queue physicalName="AUDIT"/></dynamicallyIncludedDestinations>'
        "</networkConnector>"
    )

    assert "audit" in render_configuration(topology, "primary", base=_base(only_audit))


@pytest.mark.parametrize(
    ("xml", "forwards"),
    [
        ('<networkConnector name="n" uri="u"/>', True),
        ('<networkConnector name="n" uri="u" staticBridge="true"/>', False),
        ('<networkConnector name="n" uri="u" staticBridge="TRUE"/>', False),
        (
            '<networkConnector name="n" uri="u"><dynamicallyIncludedDestinations>'
            '<queue physicalName="APP.>"/></dynamicallyIncludedDestinations></networkConnector>',
            False,
        ),
        (
            '<networkConnector name="n" uri="u"><dynamicallyIncludedDestinations>'
            '<queue physicalName=">"/></dynamicallyIncludedDestinations></networkConnector>',
            True,
        ),
        (
            '<networkConnector name="n" uri="u"><dynamicallyIncludedDestinations>'
            '<topic physicalName=">"/></dynamicallyIncludedDestinations></networkConnector>',
            False,
        ),
        (
            '<networkConnector name="n" uri="u"><dynamicallyIncludedDestinations>'
            '<topic physicalName="X,queue://ORD*"/></dynamicallyIncludedDestinations></networkConnector>',
            False,
        ),
        (
            '<networkConnector name="n" uri="u"><dynamicallyIncludedDestinations>'
            '<topic physicalName="X,queue://*"/></dynamicallyIncludedDestinations></networkConnector>',
            True,
        ),
        (
            '<networkConnector name="n" uri="u" staticBridge="true"><staticallyIncludedDestinations>'
            '<queue physicalName="APP.A,ORDERS"/></staticallyIncludedDestinations></networkConnector>',
            True,
        ),
        (
            '<networkConnector name="n" uri="u"><excludedDestinations><queue physicalName="ORDERS"/>'
            '</excludedDestinations><staticallyIncludedDestinations><queue physicalName=">"/>'
            "</staticallyIncludedDestinations></networkConnector>",
            False,
        ),
        (
            '<networkConnector name="n" uri="u"><excludedDestinations><topic physicalName="ORDERS"/>'
            "</excludedDestinations></networkConnector>",
            True,
        ),
        (
            '<networkConnector name="n" uri="u"><dynamicallyIncludedDestinations/></networkConnector>',
            True,
        ),
    ],
    ids=[
        "no-filters",
        "static-bridge",
        "static-bridge-upper-case",
        "dynamic-other-queues",
        "dynamic-every-queue",
        "dynamic-topics-only",
        "composite-not-matching",
        "composite-with-a-queue-part",
        "static-composite",
        "exclusion-beats-static",
        "topic-exclusion-leaves-the-queue",
        "empty-dynamic-list-is-everything",
    ],
)
def test_which_destinations_a_connector_forwards_follow_activemq(xml: str, forwards: bool) -> None:
    assert may_forward(_connector(xml), "queue", "ORDERS") is forwards


def test_unnamed_connectors_are_told_apart_by_position(topology: Topology) -> None:
    both = _base('<networkConnector uri="static:(tcp://b:61616)"/><networkConnector uri="static:(tcp://c:61616)"/>')
    root = etree.fromstring(both.encode())

    assert list(forwarding_connectors(root, topology)) == [
        "(unnamed, network connector 1)",
        "(unnamed, network connector 2)",
    ]


def test_our_own_connector_is_not_checked(topology: Topology) -> None:
    """It carries the copy queues by design; a second render over the first keeps working."""
    first = render_configuration(topology, "primary")

    assert render_configuration(topology, "primary", base=first) == first
