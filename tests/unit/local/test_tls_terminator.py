"""The AWS endpoint over HTTPS for the clients whose cost the sync bench's ``--tls`` measures."""

from __future__ import annotations

import http.server
import ssl
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from brokersync_local.tls import LocalTls, TlsTerminator, local_tls


class _Echo(http.server.BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *_args: object) -> None:
        pass


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> LocalTls:
    return local_tls(tmp_path_factory.mktemp("tls"))


@pytest.fixture
def plain_server() -> Iterator[int]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Echo)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


def test_a_request_over_https_reaches_the_plain_endpoint_unchanged(tls: LocalTls, plain_server: int) -> None:
    context = ssl.create_default_context(cafile=str(tls.certificate))
    with TlsTerminator(tls, plain_server) as terminator:
        assert terminator.endpoint.startswith("https://127.0.0.1:")
        for body in (b"{}", b"x" * 200_000):  # one TLS record, and many
            request = urllib.request.Request(terminator.endpoint, data=body, method="POST")
            with urllib.request.urlopen(request, timeout=10, context=context) as response:
                assert response.read() == body


def test_a_client_that_does_not_trust_the_certificate_is_refused(tls: LocalTls, plain_server: int) -> None:
    with TlsTerminator(tls, plain_server) as terminator:
        request = urllib.request.Request(terminator.endpoint, data=b"{}", method="POST")
        with pytest.raises(urllib.error.URLError, match="CERTIFICATE_VERIFY_FAILED"):
            urllib.request.urlopen(request, timeout=10, context=ssl.create_default_context())


def test_the_stores_are_made_once_and_reused(tls: LocalTls) -> None:
    again = local_tls(tls.certificate.parent)
    assert again == tls
    assert again.certificate.read_bytes() == tls.certificate.read_bytes()


def test_clients_are_told_to_trust_the_world_certificate_only(tls: LocalTls) -> None:
    assert tls.client_environment() == {"SSL_CERT_FILE": str(tls.certificate), "AWS_CA_BUNDLE": str(tls.certificate)}
    assert Path(tls.certificate).read_text().startswith("-----BEGIN CERTIFICATE-----")
