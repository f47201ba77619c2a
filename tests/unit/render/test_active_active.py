"""Rendering an active-active queue: the same copy path on both brokers, each towards the other."""

from __future__ import annotations

from pathlib import Path

import pytest
from lxml import etree

from brokersync.exceptions import TopologyError
from brokersync.render import render_configuration
from brokersync.render.parts import produced_here
from brokersync.topology import Topology, load_topology, parse_topology

ROOT = Path(__file__).resolve().parents[3]
NS = {"c": "http://activemq.apache.org/schema/core"}
QUEUE = "CARTS"


@pytest.fixture
def topology() -> Topology:
    return load_topology(ROOT / "examples" / "active-active.yaml")


def _doc(text: str) -> etree._Element:
    return etree.fromstring(text.encode())


def _xpath(doc: etree._Element, path: str) -> list[str]:
    return doc.xpath(path, namespaces=NS)


@pytest.mark.parametrize("role", ["primary", "dr"])
def test_each_broker_forwards_only_what_was_produced_to_it_towards_the_other(topology: Topology, role: str) -> None:
    me = topology.broker(role)
    doc = _doc(render_configuration(topology, role))

    [composite] = doc.xpath(f"//c:compositeQueue[@name='{QUEUE}']", namespaces=NS)
    [forward] = composite.xpath("c:forwardTo/*", namespaces=NS)
    assert composite.get("forwardOnly") == "false"
    assert etree.QName(forward).localname == "filteredDestination"
    assert forward.get("queue") == f"{QUEUE}.DR.{topology.peer(me).name}"
    assert forward.get("selector") == produced_here(QUEUE) == "JMSDestination = 'queue://CARTS'"


@pytest.mark.parametrize("role", ["primary", "dr"])
def test_each_broker_takes_the_peers_copies_into_the_queue(topology: Topology, role: str) -> None:
    me = topology.broker(role)
    doc = _doc(render_configuration(topology, role))

    inflow = f"{QUEUE}.DR.{me.name}"
    assert _xpath(doc, f"//c:compositeQueue[@name='{inflow}']/@forwardOnly") == ["true"]
    assert _xpath(doc, f"//c:compositeQueue[@name='{inflow}']/c:forwardTo/c:queue/@physicalName") == [QUEUE]


def test_the_dr_broker_bridges_back_only_the_active_active_queues(topology: Topology) -> None:
    doc = _doc(render_configuration(topology, "dr"))

    [connector] = doc.xpath("//c:networkConnector", namespaces=NS)
    assert connector.get("name") == f"brokersync-{topology.primary.name}"
    assert _xpath(connector, "c:staticallyIncludedDestinations/c:queue/@physicalName") == [
        f"{QUEUE}.DR.{topology.primary.name}"
    ]


def test_the_primary_bridges_every_queue_and_the_active_active_one_by_its_own_name(topology: Topology) -> None:
    doc = _doc(render_configuration(topology, "primary"))

    assert _xpath(doc, "//c:networkConnector/c:staticallyIncludedDestinations/c:queue/@physicalName") == [
        "ORDERS.DR",
        "PAYMENTS.DR",
        f"{QUEUE}.DR.{topology.dr.name}",
        "AUDIT.DR",
    ]


def test_a_pair_without_active_active_queues_renders_no_connector_on_dr(topology: Topology) -> None:
    one_way = topology.model_copy(update={"queues": [q for q in topology.queues if q.name != QUEUE]})

    assert _xpath(_doc(render_configuration(one_way, "dr")), "//c:networkConnector") == []


def test_the_consumption_of_an_active_active_queue_is_captured_on_the_primary(topology: Topology) -> None:
    doc = _doc(render_configuration(topology, "primary"))

    assert f"ActiveMQ.Advisory.MessageConsumed.Queue.{QUEUE}" in _xpath(doc, "//c:compositeTopic/@name")
    assert _xpath(doc, f"//c:policyEntry[@queue='{QUEUE}']/@advisoryForConsumed") == ["true"]


@pytest.mark.parametrize("role", ["primary", "dr"])
def test_both_brokers_let_only_brokersync_write_either_copy_queue(topology: Topology, role: str) -> None:
    doc = _doc(render_configuration(topology, role))

    for name in topology.copy_names(QUEUE):
        assert _xpath(doc, f"//c:authorizationEntry[@queue='{name}']/@write") == ["brokersync,admins"]


@pytest.mark.parametrize("role", ["primary", "dr"])
def test_rendering_again_changes_nothing(topology: Topology, role: str) -> None:
    once = render_configuration(topology, role)

    assert render_configuration(topology, role, base=once) == once


def test_a_failover_render_over_the_dr_configuration_leaves_one_copy_path(topology: Topology) -> None:
    """The new primary is the old DR broker: its inflow and outflow names swap, none is left behind."""
    after = topology.swapped()
    over_dr = _doc(render_configuration(after, "primary", base=render_configuration(topology, "dr")))
    fresh = _doc(render_configuration(after, "primary"))

    assert _xpath(over_dr, "//c:compositeQueue/@name") == _xpath(fresh, "//c:compositeQueue/@name")
    assert _xpath(over_dr, "//c:networkConnector/@name") == [f"brokersync-{after.dr.name}"]


def test_a_customers_own_composite_keeps_its_forwards_and_gains_the_filtered_one(topology: Topology) -> None:
    base = (
        '<broker xmlns="http://activemq.apache.org/schema/core"><destinationInterceptors>'
        "<virtualDestinationInterceptor><virtualDestinations>"
        f'<compositeQueue name="{QUEUE}" forwardOnly="false"><forwardTo><queue physicalName="APP.AUDIT"/></forwardTo>'
        "</compositeQueue></virtualDestinations></virtualDestinationInterceptor></destinationInterceptors></broker>"
    )
    once = render_configuration(topology, "primary", base=base)
    doc = _doc(once)

    [composite] = doc.xpath(f"//c:compositeQueue[@name='{QUEUE}']", namespaces=NS)
    assert _xpath(composite, "c:forwardTo/c:queue/@physicalName") == ["APP.AUDIT"]
    assert _xpath(composite, "c:forwardTo/c:filteredDestination/@queue") == [f"{QUEUE}.DR.{topology.dr.name}"]
    assert render_configuration(topology, "primary", base=once) == once


def test_each_direction_has_a_copy_queue_of_its_own(topology: Topology) -> None:
    assert topology.copy_names(QUEUE) == [f"{QUEUE}.DR.{b.name}" for b in topology.brokers]
    assert topology.dr_name(QUEUE) == topology.copy_name(QUEUE, topology.dr)
    assert topology.copy_names("ORDERS") == ["ORDERS.DR"]


def test_a_queue_named_like_another_queues_copy_queue_is_refused(topology: Topology) -> None:
    data = topology.model_dump()
    data["queues"].append({"name": f"{QUEUE}.DR.{topology.dr.name}"})

    with pytest.raises(TopologyError, match="copy queue"):
        parse_topology(data)


def test_a_crdr_pair_cannot_copy_both_ways(topology: Topology) -> None:
    data = topology.model_dump()
    for broker in data["brokers"]:
        broker["crdr"] = True

    with pytest.raises(TopologyError, match="one way"):
        parse_topology(data)


@pytest.mark.parametrize("role", ["primary", "dr"])
@pytest.mark.parametrize(("before", "after"), [("sync", "active-active"), ("active-active", "sync")])
def test_changing_a_queues_mode_leaves_none_of_the_old_copy_path_behind(
    topology: Topology, role: str, before: str, after: str
) -> None:
    def with_mode(mode: str) -> Topology:
        queues = [q.model_copy(update={"mode": mode}) if q.name == QUEUE else q for q in topology.queues]
        return topology.model_copy(update={"queues": queues})

    over_old = _doc(render_configuration(with_mode(after), role, base=render_configuration(with_mode(before), role)))
    fresh = _doc(render_configuration(with_mode(after), role))

    for path in ("//c:compositeQueue/@name", "//c:compositeQueue//@queue", "//c:networkConnector//@physicalName"):
        assert _xpath(over_old, path) == _xpath(fresh, path)


def test_an_active_active_queue_stays_readable_by_applications_on_both_brokers(topology: Topology) -> None:
    """It may be consumed on either broker (a move flips it without a reboot); a sync queue on DR may not."""
    dr = _doc(render_configuration(topology, "dr"))

    [carts] = _xpath(dr, "//c:authorizationEntry[@queue='CARTS']/@read")
    [orders] = _xpath(dr, "//c:authorizationEntry[@queue='ORDERS']/@read")
    assert "users" in carts.split(",")
    assert "users" not in orders.split(",")
