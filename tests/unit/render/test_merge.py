"""Merging into a customer's configuration keeps their content, and a second render changes nothing."""

from __future__ import annotations

import pytest
from lxml import etree

from brokersync.exceptions import RenderError
from brokersync.render import render_configuration
from brokersync.topology import Topology

NS = {"c": "http://activemq.apache.org/schema/core"}


def _doc(text: str) -> etree._Element:
    return etree.fromstring(text.encode())


@pytest.mark.parametrize("role", ["primary", "dr"])
@pytest.mark.parametrize("with_base", [False, True])
def test_rendering_the_output_again_gives_identical_bytes(
    topology: Topology, customer_base: str, role: str, with_base: bool
) -> None:
    first = render_configuration(topology, role, base=customer_base if with_base else None)

    assert render_configuration(topology, role, base=first) == first


def test_the_customers_content_survives(topology: Topology, customer_base: str) -> None:
    doc = _doc(render_configuration(topology, "primary", base=customer_base))

    assert doc.get("schedulePeriodForDestinationPurge") == "10000"
    assert doc.xpath("//c:destinations/c:queue[@physicalName='INVOICES']", namespaces=NS)
    assert doc.xpath("//c:plugins/c:timeStampingBrokerPlugin/@zeroExpirationOverride", namespaces=NS) == ["86400000"]
    assert doc.xpath("//c:policyEntry[@topic='>']/@topicPrefetch", namespaces=NS) == ["1000"]
    assert any("keep every queue's DLQ separate" in c.text for c in doc.iter(etree.Comment))


def test_a_customer_entry_for_the_queue_gains_our_attributes(topology: Topology, customer_base: str) -> None:
    doc = _doc(render_configuration(topology, "primary", base=customer_base))

    [payments] = doc.xpath("//c:policyEntry[@queue='PAYMENTS']", namespaces=NS)
    assert payments.get("producerFlowControl") == "false"
    assert payments.get("advisoryForConsumed") == "true"


def test_a_new_entry_inherits_the_customers_wildcard_settings(topology: Topology, customer_base: str) -> None:
    doc = _doc(render_configuration(topology, "primary", base=customer_base))

    [orders] = doc.xpath("//c:policyEntry[@queue='ORDERS']", namespaces=NS)
    assert orders.get("advisoryForConsumed") == "true"
    assert orders.get("prioritizedMessages") == "true"
    assert orders.xpath("c:deadLetterStrategy/c:individualDeadLetterStrategy/@queuePrefix", namespaces=NS) == ["DLQ."]
    [wildcard] = doc.xpath("//c:policyEntry[@queue='>']", namespaces=NS)
    assert wildcard.get("advisoryForConsumed") is None


def test_a_queue_removed_from_the_topology_loses_its_copy_path(topology: Topology) -> None:
    before = render_configuration(topology, "primary")
    fewer = topology.model_copy(update={"queues": [q for q in topology.queues if q.name != "AUDIT"]})

    doc = _doc(render_configuration(fewer, "primary", base=before))

    assert doc.xpath("//c:compositeQueue[@name='AUDIT']", namespaces=NS) == []
    assert doc.xpath("//c:staticallyIncludedDestinations/c:queue/@physicalName", namespaces=NS) == [
        "ORDERS.DR",
        "PAYMENTS.DR",
    ]


def test_a_customer_composite_with_our_name_keeps_its_forwards_and_gains_ours(topology: Topology) -> None:
    base = """<broker xmlns="http://activemq.apache.org/schema/core"><destinationInterceptors>
      <virtualDestinationInterceptor><virtualDestinations>
        <compositeQueue name="ORDERS" forwardOnly="false">
          <forwardTo><queue physicalName="ORDERS.AUDIT"/></forwardTo>
        </compositeQueue>
      </virtualDestinations></virtualDestinationInterceptor></destinationInterceptors></broker>"""

    rendered = render_configuration(topology, "primary", base=base)

    targets = _doc(rendered).xpath(
        "//c:compositeQueue[@name='ORDERS']/c:forwardTo/c:queue/@physicalName", namespaces=NS
    )
    assert targets == ["ORDERS.AUDIT", "ORDERS.DR"]
    assert render_configuration(topology, "primary", base=rendered) == rendered


def test_a_customer_forward_only_composite_on_a_synced_queue_is_refused(topology: Topology) -> None:
    base = """<broker xmlns="http://activemq.apache.org/schema/core"><destinationInterceptors>
      <virtualDestinationInterceptor><virtualDestinations>
        <compositeQueue name="ORDERS">
          <forwardTo><queue physicalName="ORDERS.A"/><queue physicalName="ORDERS.B"/></forwardTo>
        </compositeQueue>
      </virtualDestinations></virtualDestinationInterceptor></destinationInterceptors></broker>"""

    with pytest.raises(RenderError, match="forwardOnly=true"):
        render_configuration(topology, "primary", base=base)


@pytest.mark.parametrize(
    ("base", "message"),
    [
        ("<broker", "not well-formed"),
        ('<beans xmlns="http://www.springframework.org/schema/beans"/>', "root must be <broker"),
        ("<broker/>", "root must be <broker"),
        (
            '<!DOCTYPE broker [<!ENTITY q "ORDERS">]>'
            '<broker xmlns="http://activemq.apache.org/schema/core"><destinations>'
            '<queue physicalName="&q;"/></destinations></broker>',
            "DOCTYPE",
        ),
        (
            '<!DOCTYPE broker [<!ENTITY x SYSTEM "file:///etc/passwd">]>'
            '<broker xmlns="http://activemq.apache.org/schema/core"><plugins>&x;</plugins></broker>',
            "DOCTYPE",
        ),
    ],
    ids=["truncated", "spring-beans", "no-namespace", "internal-entity", "external-entity"],
)
def test_a_base_that_is_not_a_configuration_is_refused(topology: Topology, base: str, message: str) -> None:
    with pytest.raises(RenderError, match=message):
        render_configuration(topology, "primary", base=base)


VIRTUAL_TOPICS = "//c:destinationInterceptors//c:virtualTopic"
CORE = NS["c"]


@pytest.mark.parametrize("role", ["primary", "dr"])
@pytest.mark.parametrize("with_base", [False, True])
def test_a_broker_on_activemqs_default_interceptors_keeps_its_virtual_topics(
    topology: Topology, customer_base: str, role: str, with_base: bool
) -> None:
    """Without ``destinationInterceptors`` ActiveMQ runs a virtual topic on ``VirtualTopic.>``; the
    composites a render adds would replace it, so the render spells that default out."""
    doc = _doc(render_configuration(topology, role, base=customer_base if with_base else None))

    [virtual_topic] = doc.xpath(VIRTUAL_TOPICS, namespaces=NS)
    assert dict(virtual_topic.attrib) == {"name": "VirtualTopic.>", "prefix": "Consumer.*.", "selectorAware": "false"}


@pytest.mark.parametrize("off", ["false", "FALSE", " no ", "0"])
def test_a_broker_with_virtual_topics_turned_off_gets_none(topology: Topology, off: str) -> None:
    """Any spelling Spring reads as false."""
    base = f'<broker xmlns="{CORE}" useVirtualTopics="{off}"/>'

    assert _doc(render_configuration(topology, "primary", base=base)).xpath(VIRTUAL_TOPICS, namespaces=NS) == []


def test_a_broker_with_interceptors_of_its_own_keeps_exactly_its_own_virtual_topics(topology: Topology) -> None:
    base = (
        f'<broker xmlns="{CORE}"><destinationInterceptors><virtualDestinationInterceptor><virtualDestinations>'
        '<virtualTopic name="EVENTS.>" prefix="VQ.*."/>'
        "</virtualDestinations></virtualDestinationInterceptor></destinationInterceptors></broker>"
    )

    doc = _doc(render_configuration(topology, "primary", base=base))

    assert [t.get("name") for t in doc.xpath(VIRTUAL_TOPICS, namespaces=NS)] == ["EVENTS.>"]


def test_a_broker_with_mirrored_queues_turned_on_keeps_them_and_a_second_render_changes_nothing(
    topology: Topology,
) -> None:
    first = render_configuration(topology, "primary", base=f'<broker xmlns="{CORE}" useMirroredQueues="true"/>')
    doc = _doc(first)

    assert len(doc.xpath("//c:destinationInterceptors/c:mirroredQueue", namespaces=NS)) == 1
    assert len(doc.xpath(VIRTUAL_TOPICS, namespaces=NS)) == 1
    assert render_configuration(topology, "primary", base=first) == first
