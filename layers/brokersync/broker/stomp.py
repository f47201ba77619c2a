"""STOMP connections to an Amazon MQ broker (or a local one), created one way everywhere.

Amazon MQ gives an active/standby broker two STOMP endpoints, only one of which accepts
connections at a time; stomp.py walks its host list, so both go in. Endpoints are TLS on
Amazon MQ (``stomp+ssl://``) and plain on loopback.
"""

from __future__ import annotations

import contextlib
import re
import socket
from collections.abc import Iterator
from dataclasses import dataclass, field

import stomp
from stomp.exception import ConnectFailedException, StompException

from brokersync.broker.stomp_frames import install as install_fast_frame_parsing
from brokersync.broker.stomp_headers import HEADER_ESCAPES
from brokersync.broker.stomp_headers import install as install_fast_header_parsing
from brokersync.broker.stomp_receive import ack_reads_at_once
from brokersync.broker.stomp_receive import install as install_fast_receiving
from brokersync.exceptions import BrokerUnavailableError
from brokersync.redaction import install as install_log_redaction
from brokersync.topology import HOST_PATTERN, LOOPBACK_HOSTS

install_log_redaction()  # stomp.py logs each frame it sends, CONNECT's passcode included, at DEBUG
install_fast_header_parsing()  # stomp.py's per-header re.sub was the relay's largest cost (decision 0016)
install_fast_frame_parsing()  # then its two regular expressions per frame (decision 0020)
install_fast_receiving()  # then its buffer copy per frame and two listener passes per message (decision 0035)

#: What a write raises when it meets a connection the broker (or the network) has just closed:
#: stomp.py's own error or the socket's, depending on timing. Every writer reads it as the
#: broker unavailable (retryable), never as a bug.
CONNECTION_LOST: tuple[type[Exception], ...] = (StompException, OSError)


@contextlib.contextmanager
def unavailable_if_lost(doing: str) -> Iterator[None]:
    """Raise a lost connection met while ``doing`` as :class:`BrokerUnavailableError`.

    Why: a broker that reboots (a failover, a maintenance window) closes every connection at
    any point of a call. Raised raw, the socket's error escaped the callers' handling of an
    unavailable broker: a scheduled function's invocation failed as a bug, its Errors alarm
    fired, and the local relay worker exited.
    """
    try:
        yield
    except CONNECTION_LOST as e:
        raise BrokerUnavailableError(f"the connection to the broker dropped while {doing}: {e!r}") from e


#: Matched whole and over ASCII (``$`` alone would let a final newline through); the host is
#: the topology's (an IPv6 address in brackets, which the socket takes without them).
_URI = re.compile(
    rf"(?P<scheme>stomp(?:\+nio)?(?P<tls>\+ssl)?)://(?P<host>{HOST_PATTERN}):(?P<port>[0-9]{{1,5}})", re.ASCII
)


@dataclass(frozen=True, slots=True)
class StompEndpoint:
    host: str
    port: int
    tls: bool


@dataclass(frozen=True, slots=True)
class BrokerCredentials:
    """A broker user; the password never appears in a repr or a log line."""

    username: str
    password: str = field(repr=False)


def parse_stomp_uri(uri: str) -> StompEndpoint:
    """``stomp+ssl://host:61614`` → endpoint; also accepts a bare ``host:port`` (plain STOMP)."""
    match = _URI.fullmatch(uri) or _URI.fullmatch(f"stomp://{uri}")
    if not match or not 1 <= int(match["port"]) <= 65_535:
        raise ValueError(f"{uri!r} is not a STOMP endpoint like stomp+ssl://host:61614")
    return StompEndpoint(match["host"].strip("[]"), int(match["port"]), tls=bool(match["tls"]))


class StompConnector:
    """Opens STOMP 1.2 connections to one broker; the single place that knows stomp.py's setup calls."""

    def __init__(
        self,
        endpoints: list[str],
        credentials: BrokerCredentials | None = None,
        *,
        heartbeats: tuple[int, int] = (10_000, 10_000),
        timeout_s: float = 10.0,
    ) -> None:
        if not endpoints:
            raise ValueError("a broker needs at least one STOMP endpoint")
        self.endpoints = [parse_stomp_uri(e) for e in endpoints]
        plain = [f"{e.host}:{e.port}" for e in self.endpoints if not e.tls and e.host.lower() not in LOOPBACK_HOSTS]
        if plain:
            raise ValueError(f"{', '.join(plain)}: plain STOMP off this machine would send the password in clear")
        self.credentials = credentials
        self.heartbeats = heartbeats
        self.timeout_s = timeout_s

    def connect(self, listener: stomp.ConnectionListener | None = None, name: str = "brokersync") -> stomp.Connection12:
        """A connected STOMP connection with ``listener`` attached before CONNECT is sent.

        Attaching first matters: a subscription's first frames can arrive before ``connect``
        returns, and a listener added later would miss them.
        """
        hosts = [(e.host, e.port) for e in self.endpoints]
        connection = stomp.Connection12(
            hosts,
            heartbeats=self.heartbeats,
            timeout=self.timeout_s,
            reconnect_attempts_max=1,
            try_loopback_connect=False,
        )
        tls_hosts = [(e.host, e.port) for e in self.endpoints if e.tls]
        if tls_hosts:
            # Verified: the system's CA bundle, CERT_REQUIRED and the host name checked (stomp.py >= 9.0).
            connection.set_ssl(for_hosts=tls_hosts, verify=True)
        if listener is not None:
            connection.set_listener(name, listener)
        user = self.credentials.username if self.credentials else None
        password = self.credentials.password if self.credentials else None
        try:
            connection.connect(user, password, wait=True)
        except (ConnectFailedException, StompException, OSError) as e:
            raise BrokerUnavailableError(f"no STOMP endpoint of {self.describe()} accepted a connection: {e}") from e
        return connection

    def describe(self) -> str:
        return ",".join(f"{e.host}:{e.port}" for e in self.endpoints)


def without_tcp_delays(connection: stomp.Connection12) -> None:
    """Turn off TCP's two waits on a connection that waits on each exchange: Nagle's on what it
    writes (``TCP_NODELAY``) and the delayed acknowledgement of what it reads
    (:func:`~brokersync.broker.stomp_receive.ack_reads_at_once`).

    Why: both ends leave Nagle's algorithm on (stomp.py does not set ``TCP_NODELAY``; ActiveMQ's
    ``tcpNoDelay`` transport option is off by default and Amazon MQ manages the connectors), so
    either end holds a small write while its previous one is unacknowledged, and Linux delays
    an acknowledgement by up to 40 ms when the side that got the data has nothing to send. A
    purge removal call is write, wait, write, wait: it paid those 40 ms once or twice a call
    (decision 0052). Nothing in any frame changes. A socket that refuses the option (closing
    under the call) is left as it is: the next write or read finds it so.
    """
    sock = getattr(connection.transport, "socket", None)
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    ack_reads_at_once(connection)


def stomp_escape(value: str) -> str:
    """A header value as STOMP 1.2 sends it (``\\`` ``\\n`` ``\\r`` ``:`` escaped), as stomp.py's protocol does."""
    for char, escaped in HEADER_ESCAPES.items():
        value = value.replace(char, escaped)
    return value


_NO_OP_ON_SEND = stomp.ConnectionListener.on_send
_CLOCK_ON_SEND = stomp.listener.HeartbeatListener.on_send
_CONNECTS = frozenset({"CONNECT", "STOMP"})


def _clock_only(listener: object) -> bool:
    """Whether ``listener`` has no ``on_send``, stomp.py's no-op one, or its heartbeat clock's.

    The heartbeat listener's ``on_send`` only moves the next outbound heart-beat (it touches
    a frame only for CONNECT, which never goes this way), so a write of many frames moves it
    once, as its last frame would. Any other listener sees every frame, as stomp.py shows them.
    """
    on_send = getattr(type(listener), "on_send", None)
    return on_send is None or on_send is _NO_OP_ON_SEND or on_send is _CLOCK_ON_SEND


def _frame_bytes(frames: list[tuple[str, dict[str, str]]]) -> bytes:
    """Body-less frames as stomp.py's ``convert_frame`` writes them: headers sorted, values escaped, NUL-ended."""
    return "".join(
        command + "\n" + "".join(f"{key}:{stomp_escape(headers[key])}\n" for key in sorted(headers)) + "\n\x00"
        for command, headers in frames
    ).encode()


def send_in_one_write(connection: stomp.Connection12, frames: list[tuple[str, dict[str, str]]]) -> None:
    """Send body-less frames (``(command, headers)``, in order) to the broker in a single write.

    Why: ActiveMQ reads a connection's frames in order, on one thread. An ACK wakes the queue,
    and each wake-up is a dispatch pass over every paged-in message not yet dispatched while
    the acking subscription has room in its prefetch: on DR, the whole backlog. With the
    UNSUBSCRIBE in the same read, the broker removes the subscription before those passes
    reach it; sent apart, the passes scan the backlog with its selector first. Measured: a
    removing subscription cost the DR broker about a third as much at 30,000 deep
    (decision 0015, ``bench/selector_scan.py``).

    stomp.py writes one frame per call and has no call for several, so the frames are built as
    its STOMP 1.2 protocol builds them (values escaped), its listeners see each one as
    ``Transport.transmit`` shows them (the heartbeat clock), and the bytes go where ``transmit``
    sends them: to the socket on a plain connection, through the transport's send queue on a
    TLS one.
    """
    transport = connection.transport
    listeners = list(transport.listeners.values())
    if frames and all(_clock_only(listener) for listener in listeners) and not _CONNECTS & {c for c, _ in frames}:
        # The common case, built without a Frame object and convert_frame per frame: that
        # building was 7 % of the relay's py-spy samples at 1,000 msg/s (decision 0031).
        data = _frame_bytes(frames)
        last = stomp.utils.Frame(frames[-1][0])
        for listener in listeners:
            if getattr(type(listener), "on_send", None) is _CLOCK_ON_SEND:
                listener.on_send(last)
    else:
        built = [stomp.utils.Frame(command, {k: stomp_escape(v) for k, v in h.items()}) for command, h in frames]
        for frame in built:
            for listener in listeners:
                on_send = getattr(listener, "on_send", None)
                if on_send is not None:
                    on_send(frame)
        data = b"".join(stomp.utils.pack(stomp.utils.convert_frame(frame)) for frame in built)
    if transport.blocking:
        transport.send(data)
        return
    send_queue = transport.send_queue
    if send_queue is None:
        raise StompException("the connection is closed")
    send_queue.put(data)
