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
from brokersync_local.tls import STORE_PASSWORD, LocalTls

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
#: application user in the default application group, there to show what is refused;
#: ``operator`` a person in the default trusted group, who may read ``ActiveMQ.DLQ``.
BROKERSYNC_USER = LocalUser("local", "local", "brokersync")
APPLICATION_USER = LocalUser("app", "local-app", "users")
RECEIPT_USER = LocalUser("receipts", "local-receipts", "receipt-writers")
OPERATOR_USER = LocalUser("operator", "local-operator", "admins")
LOCAL_USERS = (BROKERSYNC_USER, APPLICATION_USER, RECEIPT_USER, OPERATOR_USER)
#: The password Amazon MQ would give a network connector's ``userName`` (a broker user of the
#: ``brokersync`` group, ``tuning.bridge.user``); the render names the user on TLS bridges only.
BRIDGE_PASSWORD = "local-bridge"  # noqa: S105
#: Connections without credentials (the local harness: tests, drills, the demo's own
#: producers and browsers) act in this one group. A stand-in: Amazon MQ has no anonymous access.
ANONYMOUS_GROUP = "brokersync"


@dataclass(frozen=True)
class LocalPorts:
    openwire: int
    stomp: int


def wrap_for_local(
    configuration: str,
    broker_name: str,
    ports: LocalPorts,
    tls: LocalTls | None = None,
    bridge_user: str | None = None,
) -> str:
    """The full xbean file a local broker runs: the Amazon MQ document plus the managed parts.

    With ``tls`` both transports take TLS only (``ssl://``, ``stomp+ssl://``), as Amazon MQ's
    endpoints do, and the broker's SSL context holds the world's key and trust stores (the
    trust store is what the primary's ``ssl://`` bridge verifies the DR broker with).
    ``bridge_user`` (``tuning.bridge.user``) is a broker user on every broker, as the operator
    creates it on both Amazon MQ brokers: the render names it on TLS bridges only.
    """
    broker = parse_configuration(configuration)
    broker.set("brokerName", broker_name)
    broker.set("dataDirectory", "${activemq.data}")
    broker.set("useJmx", "false")
    kahadb = container(broker, "persistenceAdapter", "kahaDB")
    kahadb.set("directory", "${activemq.data}/kahadb")
    transports = container(broker, "transportConnectors")
    transports.clear()
    schemes = ("ssl", "stomp+ssl") if tls else ("tcp", "stomp")
    for name, scheme, port in (("openwire", schemes[0], ports.openwire), ("stomp", schemes[1], ports.stomp)):
        uri = f"{scheme}://127.0.0.1:{port}?transport.socketBufferSize={LOOPBACK_SOCKET_BUFFER}"
        transports.append(element("transportConnector", [("name", name), ("uri", uri)]))

    if tls is not None:
        stores = [
            ("keyStore", f"file:{tls.key_store}"), ("keyStorePassword", STORE_PASSWORD), ("keyStoreType", "PKCS12"),
            ("trustStore", f"file:{tls.trust_store}"), ("trustStorePassword", STORE_PASSWORD),
            ("trustStoreType", "PKCS12"),
        ]  # fmt: skip
        container(broker, "sslContext").append(element("sslContext", stores))

    plugins = container(broker, "plugins")
    local_users = list(LOCAL_USERS)
    connectors = list(broker.iter(core("networkConnector")))
    named = {c.get("userName") for c in connectors} | {bridge_user}
    for username in sorted(n for n in named if n is not None):
        if all(u.username != username for u in local_users):
            local_users.append(LocalUser(username, BRIDGE_PASSWORD, ANONYMOUS_GROUP))
    passwords = {u.username: u.password for u in local_users}
    for connector in connectors:
        # Amazon MQ fills in the password of the broker user a connector names; so do we.
        if (username := connector.get("userName")) is not None:
            connector.set("password", passwords[username])
    users = element(
        "users",
        children=[
            element("authenticationUser", [("username", u.username), ("password", u.password), ("groups", u.groups)])
            for u in local_users
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
