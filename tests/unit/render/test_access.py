"""Only the broker and BrokerSync write what BrokerSync trusts: the rendered authorization map."""

from __future__ import annotations

import pytest
from lxml import etree

from brokersync.exceptions import RenderError
from brokersync.render import render_configuration
from brokersync.render.access import protected_destinations
from brokersync.topology import Topology

NS = {"c": "http://activemq.apache.org/schema/core"}


def _base(*entries: str) -> str:
    rows = "".join(entries)
    return (
        '<broker xmlns="http://activemq.apache.org/schema/core"><plugins><authorizationPlugin><map>'
        f"<authorizationMap><authorizationEntries>{rows}</authorizationEntries></authorizationMap>"
        "</map></authorizationPlugin></plugins></broker>"
    )


def _entry(doc: etree._Element, kind: str, pattern: str) -> etree._Element:
    [entry] = doc.xpath(f"//c:authorizationEntry[@{kind}='{pattern}']", namespaces=NS)
    return entry


@pytest.mark.parametrize("role", ["primary", "dr"])
def test_brokersync_destinations_are_written_only_by_brokersync_and_operators(topology: Topology, role: str) -> None:
    doc = etree.fromstring(render_configuration(topology, role).encode())

    assert _entry(doc, "queue", "BROKERSYNC.>").get("write") == "brokersync,admins"
    assert _entry(doc, "queue", "ORDERS.DR").get("read") == "brokersync,admins"
    assert _entry(doc, "topic", "ActiveMQ.Advisory.>").get("write") == "brokersync,admins"
    assert "users" in _entry(doc, "queue", "ORDERS").get("write")
    assert doc.get("populateJMSXUserID") == "true"


def test_only_the_dr_role_lets_the_bridge_write_the_copy_queues(topology: Topology) -> None:
    dr = etree.fromstring(render_configuration(topology, "dr").encode())
    primary = etree.fromstring(render_configuration(topology, "primary").encode())

    assert _entry(dr, "queue", "ORDERS.DR").get("write") == "brokersync,admins"
    assert _entry(primary, "queue", "ORDERS.DR").get("write") is None  # two primaries refuse each other's copies


def test_a_failover_rendering_the_primary_over_the_dr_configuration_takes_the_write_away(topology: Topology) -> None:
    was_dr = render_configuration(topology, "dr")

    doc = etree.fromstring(render_configuration(topology, "primary", base=was_dr).encode())

    assert _entry(doc, "queue", "ORDERS.DR").get("write") is None


@pytest.mark.parametrize(
    "customer",
    [
        '<authorizationEntry queue=">" read="users" write="users" admin="users"/>',
        '<authorizationEntry queue="BROKERSYNC.*" read="apps" write="apps" admin="apps"/>',
        '<authorizationEntry queue="*.DR" read="users" write="users" admin="users"/>',
        '<authorizationEntry topic="ActiveMQ.Advisory.>" read="users" write="users" admin="users"/>',
        '<authorizationEntry queue="INVOICES,BROKERSYNC.RECEIPTS" read="x" write="x" admin="x"/>',
    ],
)
def test_a_customer_grant_that_reaches_a_brokersync_destination_is_refused(topology: Topology, customer: str) -> None:
    with pytest.raises(RenderError, match="union of every matching entry"):
        render_configuration(topology, "primary", base=_base(customer))


def test_a_customer_grant_scoped_to_its_own_destinations_is_kept(topology: Topology) -> None:
    customer = '<authorizationEntry queue="INVOICES.>" read="billing" write="billing" admin="billing"/>'

    doc = etree.fromstring(render_configuration(topology, "primary", base=_base(customer)).encode())

    assert _entry(doc, "queue", "INVOICES.>").get("write") == "billing"


def test_a_customer_entry_for_a_synced_queue_gains_brokersync_without_losing_its_groups(topology: Topology) -> None:
    customer = '<authorizationEntry queue="ORDERS" read="orders-app" write="orders-app" admin="orders-app"/>'

    doc = etree.fromstring(render_configuration(topology, "dr", base=_base(customer)).encode())

    assert _entry(doc, "queue", "ORDERS").get("read") == "orders-app,brokersync,admins"


def test_on_dr_only_brokersync_and_operators_read_a_sync_queue_s_copies(topology: Topology) -> None:
    """A consumer there (a failover: URI listing both brokers) would take a copy, unrecorded."""
    dr = etree.fromstring(render_configuration(topology, "dr").encode())
    primary = etree.fromstring(render_configuration(topology, "primary").encode())

    assert _entry(dr, "queue", "ORDERS").get("read") == "brokersync,admins"
    assert "users" in _entry(dr, "queue", "ORDERS").get("write")
    assert "users" in _entry(dr, "queue", "AUDIT").get("read"), "a mirror queue's DR consumers run all the time"
    assert "users" in _entry(primary, "queue", "ORDERS").get("read")


def test_a_failback_takes_the_applications_read_away_and_a_failover_gives_it_back(topology: Topology) -> None:
    was_primary = render_configuration(topology, "primary")

    now_dr = render_configuration(topology, "dr", base=was_primary)
    primary_again = render_configuration(topology, "primary", base=now_dr)

    assert _entry(etree.fromstring(now_dr.encode()), "queue", "ORDERS").get("read") == "brokersync,admins"
    assert "users" in _entry(etree.fromstring(primary_again.encode()), "queue", "ORDERS").get("read")


def test_receipt_groups_may_write_receipts_and_nothing_else_of_ours(topology: Topology) -> None:
    access = topology.access.model_copy(update={"receipt_groups": ["receipt-writers"]})
    with_receipts = topology.model_copy(update={"access": access})

    doc = etree.fromstring(render_configuration(with_receipts, "primary").encode())

    assert _entry(doc, "queue", "BROKERSYNC.RECEIPTS").get("write") == "receipt-writers"
    assert "receipt-writers" not in _entry(doc, "queue", "BROKERSYNC.>").get("write")


def test_an_application_pattern_that_reaches_brokersync_is_refused(topology: Topology) -> None:
    access = topology.access.model_copy(update={"application_queues": [">"]})

    with pytest.raises(RenderError, match="reaches BROKERSYNC"):
        render_configuration(topology.model_copy(update={"access": access}), "primary")


def test_enforce_false_renders_no_authorization(topology: Topology) -> None:
    access = topology.access.model_copy(update={"enforce": False})

    rendered = render_configuration(topology.model_copy(update={"access": access}), "primary")

    assert "authorizationPlugin" not in rendered


def test_every_dr_queue_and_forwarded_advisory_topic_is_protected(topology: Topology) -> None:
    names = {(p.kind, p.name) for p in protected_destinations(topology)}

    assert {("queue", "ORDERS.DR"), ("queue", "AUDIT.DR"), ("queue", "BROKERSYNC.CONSUMED")} <= names
    assert ("topic", "ActiveMQ.Advisory.MessageConsumed.Queue.ORDERS") in names
