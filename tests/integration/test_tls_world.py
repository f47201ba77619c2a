"""A local world with TLS where Amazon MQ has it: the brokers' endpoints and the bridge between them.

The sync bench's ``--tls`` runs on this world, so that each process's cost includes its side
of every TLS connection, as on Amazon MQ. These tests hold what that needs from the world:
clients verify the brokers' certificate, and the copies cross an ``ssl://`` bridge that
authenticates as the topology's bridge user.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from brokersync.broker.stomp import StompConnector
from brokersync.exceptions import BrokerUnavailableError
from brokersync.topology import load_topology
from brokersync_local.backlog import fill_queue, queue_depth, wait_until
from brokersync_local.tls import LocalTls, local_tls
from brokersync_local.world import LocalWorld, WorldPorts
from tests.integration.own_pairs import own_pair

pytestmark = pytest.mark.broker
PORTS = WorldPorts(primary_openwire=61946, primary_stomp=61943, dr_openwire=62946, dr_stomp=62943, aws=5345)
QUEUE = "ORDERS"


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> LocalTls:
    return local_tls(tmp_path_factory.mktemp("tls"))


@pytest.fixture(scope="module")
def tls_world(topology_path: Path, tls: LocalTls, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalWorld]:
    with own_pair(load_topology(topology_path), tmp_path_factory.mktemp("tls-world"), PORTS, tls=tls) as world:
        yield world


@pytest.fixture
def trusting(tls: LocalTls, monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in tls.client_environment().items():
        monkeypatch.setenv(name, value)


def test_every_endpoint_of_a_tls_world_is_tls(tls_world: LocalWorld) -> None:
    for broker in (tls_world.topology.primary, tls_world.topology.dr):
        assert all(uri.startswith("ssl://") for uri in broker.openwire)
        assert all(uri.startswith("stomp+ssl://") for uri in broker.stomp)


@pytest.mark.usefixtures("trusting")
def test_copies_cross_the_ssl_bridge_as_the_bridge_user(tls_world: LocalWorld) -> None:
    primary = StompConnector(tls_world.topology.primary.stomp)
    dr = StompConnector(tls_world.topology.dr.stomp)
    before = queue_depth(dr, QUEUE)
    fill_queue(primary, QUEUE, 20, "over TLS")
    wait_until(lambda: queue_depth(dr, QUEUE) >= before + 20, 60, "copies on DR over the ssl:// bridge")
    log = tls_world.brokers["primary"].log_file.read_text(errors="replace")
    assert "ssl:///127.0.0.1" in log
    assert "password is invalid" not in log


def test_a_client_that_does_not_trust_the_certificate_is_refused(
    tls_world: LocalWorld, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    with pytest.raises(BrokerUnavailableError):
        StompConnector(tls_world.topology.primary.stomp).connect().disconnect()
