"""Real brokers are reached over verified TLS only; plain text stays on loopback."""

from __future__ import annotations

import socket
import ssl
import subprocess
import threading
from pathlib import Path

import pytest
import yaml

from brokersync.broker.stomp import StompConnector
from brokersync.exceptions import BrokerUnavailableError, TopologyError
from brokersync.topology import parse_topology


def _topology_with(project_root: Path, **endpoints: list[str]) -> dict:
    data = yaml.safe_load((project_root / "topology.yaml").read_text())
    data["brokers"][0].update(endpoints)
    return data


@pytest.mark.parametrize(
    "endpoints",
    [
        {"stomp": ["stomp://b-1.mq.us-east-1.amazonaws.com:61613"]},
        {"stomp": ["stomp+nio://10.0.0.7:61613"]},
        {"openwire": ["tcp://b-1.mq.us-east-1.amazonaws.com:61616"]},
        {"openwire": ["nio://broker.internal:61616"]},
    ],
)
def test_a_plain_text_endpoint_of_a_real_broker_is_a_topology_error(project_root: Path, endpoints: dict) -> None:
    with pytest.raises(TopologyError, match="plain-text endpoint"):
        parse_topology(_topology_with(project_root, **endpoints))


def test_plain_text_endpoints_on_loopback_are_the_local_worlds_and_accepted(project_root: Path) -> None:
    topology = parse_topology(
        _topology_with(project_root, openwire=["tcp://127.0.0.1:61616"], stomp=["stomp://localhost:61613"])
    )

    assert topology.brokers[0].stomp == ["stomp://localhost:61613"]


def test_the_stomp_connector_refuses_plain_text_off_loopback_even_as_a_bare_host_and_port() -> None:
    with pytest.raises(ValueError, match="in clear"):
        StompConnector(["broker.internal:61613"])


@pytest.fixture
def untrusted_tls_server(tmp_path: Path) -> tuple[int, threading.Event]:
    """A TLS listener on loopback whose certificate no CA signed (what a man in the middle would show)."""
    key, cert = tmp_path / "key.pem", tmp_path / "cert.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(cert),
         "-subj", "/CN=127.0.0.1", "-days", "1"],
        check=True, capture_output=True,
    )  # fmt: skip
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(10)
    handshaken = threading.Event()

    def serve() -> None:
        try:
            conn, _ = listener.accept()
            with context.wrap_socket(conn, server_side=True) as tls:
                handshaken.set()
                tls.recv(1)
        except (OSError, ssl.SSLError):
            pass
        finally:
            listener.close()

    threading.Thread(target=serve, daemon=True).start()
    return listener.getsockname()[1], handshaken


def test_a_broker_certificate_no_trusted_ca_signed_is_refused(
    untrusted_tls_server: tuple[int, threading.Event],
) -> None:
    port, handshaken = untrusted_tls_server
    connector = StompConnector([f"stomp+ssl://127.0.0.1:{port}"], timeout_s=5)

    with pytest.raises(BrokerUnavailableError):
        connector.connect()

    assert not handshaken.is_set()
