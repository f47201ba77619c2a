"""TLS for the local world, where production has it: Amazon MQ's endpoints and DynamoDB's.

Amazon MQ for ActiveMQ exposes only TLS endpoints (``ssl://``, ``stomp+ssl://``), and its
network connectors cross regions over ``ssl://``; every AWS API call is HTTPS. A world with
plain sockets charges nobody for that work, so a cost measured in it is kinder than
production. With :class:`LocalTls` the brokers listen with TLS only, the primary's bridge to
DR is ``ssl://``, and :class:`TlsTerminator` puts HTTPS in front of the AWS endpoint, so
that each process pays for its own side of every TLS connection.

One self-signed certificate (``CN=127.0.0.1``, an IP subject alternative name) serves both
brokers and the terminator. Clients verify it as they verify Amazon MQ's and AWS's: Python
through ``SSL_CERT_FILE`` (stomp.py's ``load_default_certs``) and ``AWS_CA_BUNDLE``
(botocore), the brokers' bridge through the trust store; nothing turns verification off.
"""

from __future__ import annotations

import contextlib
import selectors
import socket
import ssl
import subprocess
import threading
from dataclasses import dataclass
from pathlib import Path

from brokersync_local.errors import ProcessFailedError
from brokersync_local.ports import LOOPBACK

#: A throwaway password for throwaway stores: they hold a loopback certificate valid for days.
STORE_PASSWORD = "brokersync-local"  # noqa: S105
_ALIAS = "brokersync-local"
_VALID_DAYS = 7


@dataclass(frozen=True)
class LocalTls:
    """The key store (both brokers' key), the trust store (the bridge's) and the PEM clients trust."""

    key_store: Path
    trust_store: Path
    certificate: Path

    def client_environment(self) -> dict[str, str]:
        """What makes Python's TLS clients (stomp.py, botocore) trust this world and nothing else."""
        return {"SSL_CERT_FILE": str(self.certificate), "AWS_CA_BUNDLE": str(self.certificate)}

    def server_context(self) -> ssl.SSLContext:
        """A Python server context with the brokers' certificate (for :class:`TlsTerminator`)."""
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        key_pem = self.key_store.with_suffix(".key.pem")
        context.load_cert_chain(self.certificate, key_pem)
        return context


def _run(*command: str) -> None:
    """Run openssl or keytool; a failure names the tool and says what it printed."""
    result = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    if result.returncode != 0:
        said = result.stderr.strip() or result.stdout.strip()
        raise ProcessFailedError(f"{command[0]} {command[1]} failed: {said}")


def local_tls(directory: Path) -> LocalTls:
    """The world's stores under ``directory``, made once with Java's keytool and OpenSSL, then reused."""
    directory.mkdir(parents=True, exist_ok=True)
    tls = LocalTls(directory / "broker.p12", directory / "trust.p12", directory / "broker.pem")
    key_pem = tls.key_store.with_suffix(".key.pem")
    if all(p.exists() for p in (tls.key_store, tls.trust_store, tls.certificate, key_pem)):
        return tls
    for path in (tls.key_store, tls.trust_store, tls.certificate, key_pem):
        path.unlink(missing_ok=True)
    # OpenSSL makes the key and certificate (PEM for Python), then a PKCS#12 store for Java.
    _run(
        "openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key_pem),
        "-out", str(tls.certificate), "-subj", f"/CN={LOOPBACK}", "-addext", f"subjectAltName=IP:{LOOPBACK}",
        "-days", str(_VALID_DAYS),
    )  # fmt: skip
    _run(
        "openssl", "pkcs12", "-export", "-in", str(tls.certificate), "-inkey", str(key_pem), "-name", _ALIAS,
        "-out", str(tls.key_store), "-passout", f"pass:{STORE_PASSWORD}",
    )  # fmt: skip
    _run(
        "keytool", "-importcert", "-noprompt", "-alias", _ALIAS, "-file", str(tls.certificate),
        "-keystore", str(tls.trust_store), "-storetype", "PKCS12", "-storepass", STORE_PASSWORD,
    )  # fmt: skip
    return tls


#: How long a relayed connection waits, at most, for the rest of a record or for its peer to take bytes.
_IO_TIMEOUT_S = 10.0
#: How often an idle relay looks whether its terminator was closed.
_STOP_CHECK_S = 0.5


def _relay(client: ssl.SSLSocket, upstream: socket.socket, stop: threading.Event) -> None:
    """Both directions of one connection, in one thread, until either end closes or the terminator stops.

    An :class:`ssl.SSLSocket` is one OpenSSL ``SSL`` object, which OpenSSL lets only one thread
    use at a time: a thread writing it while another blocks reading it (one pump per direction,
    as this was first written) failed now and then under load. So one thread waits on both
    ends and moves whatever either has, and reads the TLS end also while it holds decrypted
    bytes its socket no longer shows (``pending``).
    """
    peers = {client: upstream, upstream: client}
    try:
        with selectors.DefaultSelector() as selector:
            for end in peers:
                end.settimeout(_IO_TIMEOUT_S)
                selector.register(end, selectors.EVENT_READ)
            while not stop.is_set():
                if client.pending():
                    ready = [client]
                else:
                    ready = [key.fileobj for key, _ in selector.select(timeout=_STOP_CHECK_S)]
                for source in ready:
                    chunk = source.recv(65536)
                    if not chunk:
                        return
                    peers[source].sendall(chunk)
    except OSError:  # ssl.SSLError included: a peer that went away, or a timeout
        pass
    finally:
        for end in peers:
            with contextlib.suppress(OSError):
                end.shutdown(socket.SHUT_RDWR)
            with contextlib.suppress(OSError):
                end.close()


class TlsTerminator:
    """TLS on a loopback port in front of a plain one: the AWS endpoint as clients reach AWS (HTTPS).

    It relays bytes, so it serves any protocol: a test of STOMP over TLS puts one in front of
    a broker's plain port.

    moto's server speaks plain HTTP to the rest of the local world; only the clients whose
    cost is measured are pointed here. The terminator's own work lands in the process that
    runs it, which stands for AWS's side of the connection.
    """

    def __init__(self, tls: LocalTls, backend_port: int) -> None:
        self._context = tls.server_context()
        self._backend_port = backend_port
        self._listener = socket.create_server((LOOPBACK, 0))
        self._listener.settimeout(0.2)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True, name="tls-terminator")

    @property
    def port(self) -> int:
        return int(self._listener.getsockname()[1])

    @property
    def endpoint(self) -> str:
        return f"https://{LOOPBACK}:{self.port}"

    def __enter__(self) -> TlsTerminator:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self._listener.close()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                raw, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            threading.Thread(target=self._connect, args=(raw,), daemon=True).start()

    def _connect(self, raw: socket.socket) -> None:
        try:
            raw.settimeout(10)
            client = self._context.wrap_socket(raw, server_side=True)
            upstream = socket.create_connection((LOOPBACK, self._backend_port), timeout=10)
            # Without these, Nagle's algorithm and delayed ACKs hold each relayed request ~40 ms.
            for end in (client, upstream):
                end.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        except OSError:  # ssl.SSLError included: a client that does not trust us, or went away
            with contextlib.suppress(OSError):
                raw.close()
            return
        _relay(client, upstream, self._stop)
