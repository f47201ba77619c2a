"""Wrapping a rendered Amazon MQ configuration in what Amazon MQ itself manages.

Amazon MQ owns the transport connectors, the persistence location, the broker name, the
broker users (authentication) and the Spring ``<beans>`` envelope; customers upload only
the ``<broker>`` element. Locally we add
exactly those pieces, so the broker runs the rendered configuration unchanged otherwise.
"""

from __future__ import annotations

from dataclasses import dataclass

from lxml import etree

from brokersync.render.document import container, core, element, parse_configuration

_BEANS = "http://www.springframework.org/schema/beans"
_XSI = "http://www.w3.org/2001/XMLSchema-instance"
_SCHEMA_LOCATION = (
    "http://www.springframework.org/schema/beans http://www.springframework.org/schema/beans/spring-beans.xsd "
    "http://activemq.apache.org/schema/core http://activemq.apache.org/schema/core/activemq-core.xsd"
)

#: The brokers' socket buffers on loopback. ActiveMQ fixes them at 64 KB, which on a real
#: network holds dozens of segments; loopback's segments are 64 KB, so the buffer held two,
#: the kernel dropped segments whenever the broker's reader paused, and TCP's retransmission
#: backoff then stalled STOMP connections for 10 to 20 seconds (docs, "Copy, capture and
#: purge under load"). A megabyte restores the headroom a real network has.
LOOPBACK_SOCKET_BUFFER = 1024 * 1024


@dataclass(frozen=True)
class LocalUser:
    username: str
    password: str
    groups: str


#: The broker users Amazon MQ would hold (it manages users outside the configuration).
#: ``local`` is BrokerSync's own user, whose secret the local deploy stores; ``app`` is an
#: application user in the default application group, there to show what is refused.
BROKERSYNC_USER = LocalUser("local", "local", "brokersync")
APPLICATION_USER = LocalUser("app", "local-app", "users")
RECEIPT_USER = LocalUser("receipts", "local-receipts", "receipt-writers")
LOCAL_USERS = (BROKERSYNC_USER, APPLICATION_USER, RECEIPT_USER)
#: Connections without credentials (the local harness: tests, drills, the demo's own
#: producers and browsers) act in this one group. A stand-in: Amazon MQ has no anonymous access.
ANONYMOUS_GROUP = "brokersync"


@dataclass(frozen=True)
class LocalPorts:
    openwire: int
    stomp: int


def wrap_for_local(configuration: str, broker_name: str, ports: LocalPorts) -> str:
    """The full xbean file a local broker runs: the Amazon MQ document plus the managed parts."""
    broker = parse_configuration(configuration)
    broker.set("brokerName", broker_name)
    broker.set("dataDirectory", "${activemq.data}")
    broker.set("useJmx", "false")
    kahadb = container(broker, "persistenceAdapter", "kahaDB")
    kahadb.set("directory", "${activemq.data}/kahadb")
    transports = container(broker, "transportConnectors")
    transports.clear()
    for name, scheme, port in (("openwire", "tcp", ports.openwire), ("stomp", "stomp", ports.stomp)):
        uri = f"{scheme}://127.0.0.1:{port}?transport.socketBufferSize={LOOPBACK_SOCKET_BUFFER}"
        transports.append(element("transportConnector", [("name", name), ("uri", uri)]))

    plugins = container(broker, "plugins")
    users = element(
        "users",
        children=[
            element("authenticationUser", [("username", u.username), ("password", u.password), ("groups", u.groups)])
            for u in LOCAL_USERS
        ],
    )
    authentication = element(
        "simpleAuthenticationPlugin",
        [("anonymousAccessAllowed", "true"), ("anonymousUser", "harness"), ("anonymousGroup", ANONYMOUS_GROUP)],
        [users],
    )
    plugins.insert(0, authentication)  # authentication before authorization, as Amazon MQ runs them

    beans = etree.Element(f"{{{_BEANS}}}beans", nsmap={None: _BEANS, "xsi": _XSI})
    beans.set(f"{{{_XSI}}}schemaLocation", _SCHEMA_LOCATION)
    etree.SubElement(
        beans, f"{{{_BEANS}}}bean", {"class": "org.springframework.beans.factory.config.PropertyPlaceholderConfigurer"}
    )
    beans.append(broker)
    assert broker.tag == core("broker")
    etree.indent(beans, space="  ")
    return etree.tostring(beans, encoding="unicode", xml_declaration=False) + "\n"
