"""What the local wrapper adds for TLS, and the bridge user Amazon MQ would hold on both brokers."""

from __future__ import annotations

from pathlib import Path

from lxml import etree

from brokersync.render import render_configuration
from brokersync.render.document import core
from brokersync.topology import Topology, load_topology
from brokersync_local.tls import STORE_PASSWORD, LocalTls
from brokersync_local.world import WorldPorts, localise
from brokersync_local.wrapper import BRIDGE_PASSWORD, BROKERSYNC_USER, LocalPorts, wrap_for_local

PORTS = LocalPorts(openwire=61616, stomp=61613)
TLS = LocalTls(Path("/stores/broker.p12"), Path("/stores/trust.p12"), Path("/stores/broker.pem"))


def _topology(topology_path: Path, *, tls: bool) -> Topology:
    return localise(load_topology(topology_path), WorldPorts(), tls=tls)


def _broker(xml: str) -> etree._Element:
    return etree.fromstring(xml.encode()).find(core("broker"))


def _users(broker: etree._Element) -> dict[str, tuple[str, str]]:
    return {u.get("username"): (u.get("password"), u.get("groups")) for u in broker.iter(core("authenticationUser"))}


def test_a_tls_broker_listens_with_tls_only(topology_path: Path) -> None:
    configuration = render_configuration(_topology(topology_path, tls=True), "primary")
    broker = _broker(wrap_for_local(configuration, "orders-use1", PORTS, TLS))
    uris = [c.get("uri") for c in broker.iter(core("transportConnector"))]
    assert [u.split("?")[0] for u in uris] == ["ssl://127.0.0.1:61616", "stomp+ssl://127.0.0.1:61613"]
    inner = broker.find(core("sslContext")).find(core("sslContext"))  # the property, then the bean
    assert inner.get("keyStore") == "file:/stores/broker.p12"
    assert inner.get("trustStore") == "file:/stores/trust.p12"
    assert inner.get("keyStorePassword") == STORE_PASSWORD


def test_a_plain_broker_has_no_ssl_context(topology_path: Path) -> None:
    configuration = render_configuration(_topology(topology_path, tls=False), "primary")
    broker = _broker(wrap_for_local(configuration, "orders-use1", PORTS))
    assert [c.get("uri").split(":")[0] for c in broker.iter(core("transportConnector"))] == ["tcp", "stomp"]
    assert broker.find(core("sslContext")) is None


def test_the_tls_bridge_authenticates_as_the_bridge_user_with_the_password_amazon_mq_would_fill_in(
    topology_path: Path,
) -> None:
    topology = _topology(topology_path, tls=True)
    user = topology.tuning.bridge.user
    assert user is not None
    broker = _broker(wrap_for_local(render_configuration(topology, "primary"), "orders-use1", PORTS, TLS, user))
    connectors = list(broker.iter(core("networkConnector")))
    assert connectors
    assert all(c.get("userName") == user and c.get("password") == BRIDGE_PASSWORD for c in connectors)
    assert _users(broker)[user] == (BRIDGE_PASSWORD, "brokersync")


def test_the_bridge_user_exists_on_the_broker_without_a_connector(topology_path: Path) -> None:
    """The DR broker in sync mode renders no bridge, yet the primary's bridge logs in to it."""
    topology = _topology(topology_path, tls=True)
    user = topology.tuning.bridge.user
    assert user is not None
    broker = _broker(wrap_for_local(render_configuration(topology, "dr"), "orders-usw2", PORTS, TLS, user))
    assert _users(broker)[user] == (BRIDGE_PASSWORD, "brokersync")


def test_a_bridge_user_named_like_a_local_user_keeps_that_users_password(topology_path: Path) -> None:
    configuration = render_configuration(_topology(topology_path, tls=True), "dr")
    broker = _broker(wrap_for_local(configuration, "orders-usw2", PORTS, TLS, BROKERSYNC_USER.username))
    assert _users(broker)[BROKERSYNC_USER.username] == (BROKERSYNC_USER.password, BROKERSYNC_USER.groups)
    assert list(_users(broker)).count(BROKERSYNC_USER.username) == 1
