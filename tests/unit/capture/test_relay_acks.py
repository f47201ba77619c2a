"""The relay's ACKs: one individual ACK per advisory, in order, a batch's ACKs in a few writes; a
connection lost under them is the primary unavailable (retryable), never a crash."""

from __future__ import annotations

import queue
from types import SimpleNamespace

import pytest
import stomp

from brokersync.capture.relay import ACKS_PER_WRITE, AdvisoryRelay, RelaySettings
from brokersync.exceptions import BrokerUnavailableError
from tests.unit.stomp_writes import frames_in


def _relay_on_a_recording_transport() -> tuple[AdvisoryRelay, list[bytes]]:
    writes: list[bytes] = []
    transport = SimpleNamespace(blocking=True, listeners={}, send=writes.append, send_queue=queue.Queue())
    connection = SimpleNamespace(transport=transport, is_connected=lambda: True)
    relay = AdvisoryRelay.__new__(AdvisoryRelay)
    relay._connection = connection  # type: ignore[assignment]
    return relay, writes


def _advisory(n: int) -> stomp.utils.Frame:
    return stomp.utils.Frame("MESSAGE", {"ack": f"ID:primary-41000-1795340000000-1:1:1:1:{n}"})


def _acked(writes: list[bytes]) -> list[tuple[str, dict[str, str]]]:
    return [(f.cmd, f.headers) for f in frames_in(*writes)]


def test_each_advisory_gets_its_own_ack_in_order() -> None:
    relay, writes = _relay_on_a_recording_transport()
    frames = [_advisory(n) for n in range(3)]

    relay._ack(frames)

    assert _acked(writes) == [("ACK", {"id": f.headers["ack"]}) for f in frames]


def test_a_batch_s_acks_go_in_one_write_per_chunk_not_one_per_advisory() -> None:
    relay, writes = _relay_on_a_recording_transport()
    frames = [_advisory(n) for n in range(ACKS_PER_WRITE * 2 + 1)]

    relay._ack(frames)

    assert len(writes) == 3
    assert [h["id"] for _, h in _acked(writes)] == [f.headers["ack"] for f in frames]


def test_nothing_to_ack_writes_nothing() -> None:
    relay, writes = _relay_on_a_recording_transport()

    relay._ack([])

    assert writes == []


def test_a_connection_the_broker_closed_under_the_acks_is_the_primary_unavailable_not_a_crash() -> None:
    """A broker rebooting closes the socket at any moment; the ACKs not sent are redelivered advisories."""

    def reset(_data: bytes) -> None:
        raise ConnectionResetError(104, "Connection reset by peer")

    relay, _ = _relay_on_a_recording_transport()
    relay._connection.transport.send = reset  # type: ignore[union-attr]

    with pytest.raises(BrokerUnavailableError, match="acked advisories"):
        relay._ack([_advisory(1)])


def test_a_subscription_refused_by_a_closing_broker_is_the_primary_unavailable_and_leaves_no_connection() -> None:
    closed: list[bool] = []

    def refuse(*_args: object, **_kwargs: object) -> None:
        raise stomp.exception.NotConnectedException()

    connection = SimpleNamespace(subscribe=refuse, disconnect=lambda: closed.append(True))
    relay = AdvisoryRelay.__new__(AdvisoryRelay)
    relay.connector = SimpleNamespace(connect=lambda *_a, **_k: connection)  # type: ignore[assignment]
    relay.settings = RelaySettings()
    relay._connection = None

    with pytest.raises(BrokerUnavailableError, match="subscribed"):
        relay._connect()

    assert closed == [True] and relay._connection is None
