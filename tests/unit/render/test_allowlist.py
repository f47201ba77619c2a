"""Nothing Amazon MQ would silently strip leaves the renderer, the customer's content included."""

from __future__ import annotations

import pytest
from lxml import etree

from brokersync.exceptions import NotAllowedByAmazonMQError
from brokersync.render import render_configuration
from brokersync.render.allowlist import ATTRIBUTES, CHILDREN
from brokersync.topology import Topology


@pytest.mark.parametrize("role", ["primary", "dr"])
def test_every_rendered_element_and_attribute_is_permitted(topology: Topology, role: str) -> None:
    doc = etree.fromstring(render_configuration(topology, role).encode())

    for element in doc.iter():
        if not isinstance(element.tag, str):
            continue
        name = etree.QName(element).localname
        parent = element.getparent()
        if parent is not None:
            assert name in CHILDREN[etree.QName(parent).localname], name
        assert set(element.attrib) <= ATTRIBUTES.get(name, frozenset()), name


@pytest.mark.parametrize(
    ("fragment", "kind", "name"),
    [
        (
            '<transportConnectors><transportConnector name="x" uri="tcp://0.0.0.0:1"/></transportConnectors>',
            "element",
            "transportConnectors",
        ),
        (
            '<managementContext><managementContext createConnector="true"/></managementContext>',
            "element",
            "managementContext",
        ),
        ('<destinations><queue physicalName="A" dlq="true"/></destinations>', "attribute", "dlq"),
        (
            '<networkConnectors><networkConnector name="mine" uri="static:(ssl://h:1)" prefetchSize="5"/>'
            "</networkConnectors>",
            "attribute",
            "prefetchSize",
        ),
    ],
)
def test_a_base_with_something_amazon_mq_forbids_is_refused_naming_it(
    topology: Topology, fragment: str, kind: str, name: str
) -> None:
    base = f'<broker xmlns="http://activemq.apache.org/schema/core">{fragment}</broker>'

    with pytest.raises(NotAllowedByAmazonMQError) as info:
        render_configuration(topology, "primary", base=base)

    assert (info.value.kind, info.value.name) == (kind, name)
    assert name in str(info.value)


def test_a_forbidden_broker_attribute_is_refused(topology: Topology) -> None:
    base = '<broker xmlns="http://activemq.apache.org/schema/core" useJmx="true"/>'

    with pytest.raises(NotAllowedByAmazonMQError, match="useJmx"):
        render_configuration(topology, "dr", base=base)
