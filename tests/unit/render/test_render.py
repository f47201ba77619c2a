"""Rendering: what each role gets, and that the shipped topology renders to the reviewed goldens.

Regenerate the goldens after an intended change with
``BROKERSYNC_UPDATE_GOLDEN=1 .venv/bin/pytest tests/unit/render`` and review the diff.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from lxml import etree

from brokersync.render import render_configuration
from brokersync.topology import ACTIVEMQ_MAX_RECONNECT_DELAY_MS, Topology

GOLDEN = Path(__file__).parent / "golden"
NS = {"c": "http://activemq.apache.org/schema/core"}


def _doc(text: str) -> etree._Element:
    return etree.fromstring(text.encode())


@pytest.mark.parametrize("role", ["primary", "dr"])
def test_the_shipped_topology_renders_to_the_golden_file(topology: Topology, role: str) -> None:
    rendered = render_configuration(topology, role)
    golden = GOLDEN / f"{role}.xml"
    if os.environ.get("BROKERSYNC_UPDATE_GOLDEN"):
        golden.write_text(rendered)

    assert rendered == golden.read_text()


def test_the_output_is_an_amazon_mq_broker_document(topology: Topology) -> None:
    rendered = render_configuration(topology, "primary")

    assert rendered.startswith('<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n<broker xmlns=')
    assert _doc(rendered).tag == "{http://activemq.apache.org/schema/core}broker"


def test_the_primary_copies_every_queue_into_its_dr_queue(topology: Topology) -> None:
    doc = _doc(render_configuration(topology, "primary"))

    for queue in ("ORDERS", "PAYMENTS", "AUDIT"):
        [composite] = doc.xpath(f"//c:compositeQueue[@name='{queue}']", namespaces=NS)
        assert composite.get("forwardOnly") == "false"
        assert composite.xpath("c:forwardTo/c:queue/@physicalName", namespaces=NS) == [f"{queue}.DR"]


def test_only_sync_queues_forward_their_departure_advisories_each_by_name(topology: Topology) -> None:
    """Consumed, expired and dead-lettered: every way out of a synced queue the broker announces."""
    doc = _doc(render_configuration(topology, "primary"))

    topics = doc.xpath("//c:compositeTopic/@name", namespaces=NS)
    assert topics == [
        f"ActiveMQ.Advisory.{kind}.Queue.{queue}"
        for queue in ("ORDERS", "PAYMENTS")
        for kind in ("MessageConsumed", "Expired", "MessageDLQd")
    ]
    assert not any(">" in t or "*" in t for t in topics)
    assert (
        doc.xpath("//c:compositeTopic/c:forwardTo/c:queue/@physicalName", namespaces=NS) == ["BROKERSYNC.CONSUMED"] * 6
    )


def test_only_sync_queues_have_advisory_for_consumed(topology: Topology) -> None:
    doc = _doc(render_configuration(topology, "primary"))

    assert doc.xpath("//c:policyEntry[@advisoryForConsumed='true']/@queue", namespaces=NS) == ["ORDERS", "PAYMENTS"]


def test_the_sync_key_does_not_change_the_configuration(topology: Topology) -> None:
    flipped = [
        q.model_copy(update={"sync_key": "message-id" if q.sync_key == "correlation-id" else "correlation-id"})
        for q in topology.queues
    ]

    assert render_configuration(topology.model_copy(update={"queues": flipped}), "primary") == render_configuration(
        topology, "primary"
    )


def test_the_connector_statically_bridges_only_the_dr_queues(topology: Topology) -> None:
    doc = _doc(render_configuration(topology, "primary"))

    [connector] = doc.xpath("//c:networkConnector", namespaces=NS)
    assert connector.get("name") == "brokersync-orders-usw2"
    assert connector.get("staticBridge") == "true"
    assert connector.get("userName") == "brokersync-bridge"
    assert connector.xpath("c:staticallyIncludedDestinations/c:queue/@physicalName", namespaces=NS) == [
        "ORDERS.DR",
        "PAYMENTS.DR",
        "AUDIT.DR",
    ]
    assert connector.xpath("c:dynamicallyIncludedDestinations/c:queue/@physicalName", namespaces=NS) == [
        "BROKERSYNC.NOTHING"
    ]


def test_an_active_standby_peer_is_reached_through_masterslave(topology: Topology) -> None:
    doc = _doc(render_configuration(topology, "primary"))

    uri = doc.xpath("//c:networkConnector/@uri", namespaces=NS)[0]
    assert uri.partition("?")[0] == f"masterslave:({','.join(topology.dr.openwire)})"


def test_a_single_instance_peer_is_reached_through_static(topology: Topology) -> None:
    single = topology.with_endpoints(
        {"orders-usw2": (["ssl://b-1.mq.us-west-2.amazonaws.com:61617"], topology.dr.stomp)}
    )

    doc = _doc(render_configuration(single, "primary"))

    [uri] = doc.xpath("//c:networkConnector/@uri", namespaces=NS)
    assert uri.partition("?")[0] == "static:(ssl://b-1.mq.us-west-2.amazonaws.com:61617)"


def _with_reconnect_cap(topology: Topology, cap_ms: int) -> Topology:
    bridge = topology.tuning.bridge.model_copy(update={"max_reconnect_delay_ms": cap_ms})
    return topology.model_copy(update={"tuning": topology.tuning.model_copy(update={"bridge": bridge})})


def test_the_shipped_reconnect_cap_is_five_seconds(topology: Topology) -> None:
    """Copies resume within 5 s of a rebooted DR broker listening, not ActiveMQ's 30 s (decision 0053)."""
    doc = _doc(render_configuration(topology, "primary"))

    assert doc.xpath("//c:networkConnector/@uri", namespaces=NS)[0].endswith("?maxReconnectDelay=5000")


def test_the_bridge_reconnect_cap_is_the_topology_s(topology: Topology) -> None:
    doc = _doc(render_configuration(_with_reconnect_cap(topology, 2000), "primary"))

    assert doc.xpath("//c:networkConnector/@uri", namespaces=NS)[0].endswith("?maxReconnectDelay=2000")


def test_activemq_s_own_reconnect_cap_renders_the_uri_without_a_query(topology: Topology) -> None:
    doc = _doc(render_configuration(_with_reconnect_cap(topology, ACTIVEMQ_MAX_RECONNECT_DELAY_MS), "primary"))

    assert doc.xpath("//c:networkConnector/@uri", namespaces=NS) == [f"masterslave:({','.join(topology.dr.openwire)})"]


def test_a_loopback_peer_gets_no_user_name(topology: Topology) -> None:
    local = topology.with_endpoints({"orders-usw2": (["tcp://127.0.0.1:62616"], ["stomp://127.0.0.1:62613"])})

    doc = _doc(render_configuration(local, "primary"))

    assert doc.xpath("//c:networkConnector/@userName", namespaces=NS) == []


def test_parallel_bridges_become_distinctly_named_connectors(topology: Topology) -> None:
    tuned = topology.model_copy(
        update={
            "tuning": topology.tuning.model_copy(
                update={"bridge": topology.tuning.bridge.model_copy(update={"parallel_bridges": 3})}
            )
        }
    )

    doc = _doc(render_configuration(tuned, "primary"))

    assert doc.xpath("//c:networkConnector/@name", namespaces=NS) == [
        "brokersync-orders-usw2-1",
        "brokersync-orders-usw2-2",
        "brokersync-orders-usw2-3",
    ]


def test_the_dr_role_forwards_each_dr_alias_into_its_queue_and_pages_deep(topology: Topology) -> None:
    doc = _doc(render_configuration(topology, "dr"))

    [composite] = doc.xpath("//c:compositeQueue[@name='ORDERS.DR']", namespaces=NS)
    assert composite.get("forwardOnly") == "true"
    assert composite.xpath("c:forwardTo/c:queue/@physicalName", namespaces=NS) == ["ORDERS"]
    [policy] = doc.xpath("//c:policyEntry[@queue='ORDERS']", namespaces=NS)
    assert policy.get("maxPageSize") == "200000"
    assert policy.get("maxBrowsePageSize") == "200000"
    assert policy.get("memoryLimit") == str(128 * 1024 * 1024)
    assert doc.xpath("//c:networkConnector", namespaces=NS) == []


@pytest.mark.parametrize("role", ["primary", "dr"])
def test_both_roles_load_the_statistics_plugin(topology: Topology, role: str) -> None:
    doc = _doc(render_configuration(topology, role))

    assert len(doc.xpath("//c:plugins/c:statisticsBrokerPlugin", namespaces=NS)) == 1


def test_a_crdr_pair_renders_no_copy_path(topology: Topology) -> None:
    crdr = topology.model_copy(update={"brokers": [b.model_copy(update={"crdr": True}) for b in topology.brokers]})

    doc = _doc(render_configuration(crdr, "primary"))

    assert doc.xpath("//c:networkConnector", namespaces=NS) == []
    assert doc.xpath("//c:compositeQueue", namespaces=NS) == []
    assert len(doc.xpath("//c:compositeTopic", namespaces=NS)) == 6  # departure advisories of two sync queues


@pytest.mark.parametrize("role", ["primary", "dr"])
def test_broker_children_are_in_alphabetical_order(topology: Topology, role: str) -> None:
    doc = _doc(render_configuration(topology, role))

    names = [etree.QName(c).localname for c in doc if isinstance(c.tag, str)]
    assert names == sorted(names)


def test_a_failover_render_over_the_dr_configuration_restores_per_message_journal_sync(topology: Topology) -> None:
    old_dr = render_configuration(topology, "dr")

    new_primary = _doc(render_configuration(topology.swapped(), "primary", base=old_dr))

    assert new_primary.xpath("//c:kahaDB/@journalDiskSyncStrategy", namespaces=NS) == ["always"]
