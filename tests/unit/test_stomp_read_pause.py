"""The relay's receiving thread pauses after a short read, so one read takes several frames."""

from __future__ import annotations

from collections.abc import Iterator
from types import SimpleNamespace

import pytest

from brokersync.broker import stomp as stomp_module
from brokersync.broker.stomp import SHORT_READ_BYTES, pause_after_short_reads

PAUSE_S = 0.02


class _Reads:
    """A transport whose ``receive`` hands out scripted chunks (or raises scripted errors)."""

    def __init__(self, *chunks: bytes | Exception | None) -> None:
        self._chunks: Iterator[bytes | Exception | None] = iter(chunks)
        self.transport = SimpleNamespace(receive=self._receive)

    def _receive(self) -> bytes | None:
        chunk = next(self._chunks)
        if isinstance(chunk, Exception):
            raise chunk
        return chunk


@pytest.fixture
def sleeps(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    recorded: list[float] = []
    monkeypatch.setattr(stomp_module.time, "sleep", recorded.append)
    return recorded


def test_the_first_read_is_not_delayed(sleeps: list[float]) -> None:
    reads = _Reads(b"MESSAGE\n\nbody\x00")
    pause_after_short_reads(reads.transport, PAUSE_S)

    assert reads.transport.receive() == b"MESSAGE\n\nbody\x00"
    assert sleeps == []


def test_a_short_read_makes_the_next_one_wait(sleeps: list[float]) -> None:
    reads = _Reads(b"frame\x00", b"two frames\x00\x00")
    pause_after_short_reads(reads.transport, PAUSE_S)

    reads.transport.receive()
    reads.transport.receive()

    assert sleeps == [PAUSE_S]


def test_a_full_read_is_followed_at_once_so_a_backlog_is_read_at_full_speed(sleeps: list[float]) -> None:
    full = b"x" * SHORT_READ_BYTES
    reads = _Reads(full, full, b"tail\x00")
    pause_after_short_reads(reads.transport, PAUSE_S)

    assert [reads.transport.receive() for _ in range(3)] == [full, full, b"tail\x00"]
    assert sleeps == []


def test_a_read_that_raises_is_passed_on_and_the_next_read_waits(sleeps: list[float]) -> None:
    reads = _Reads(b"x" * SHORT_READ_BYTES, OSError("reset"), b"after\x00")
    pause_after_short_reads(reads.transport, PAUSE_S)
    reads.transport.receive()

    with pytest.raises(OSError, match="reset"):
        reads.transport.receive()
    assert reads.transport.receive() == b"after\x00"
    assert sleeps == [PAUSE_S]


def test_a_closed_socket_s_empty_read_is_returned_unchanged(sleeps: list[float]) -> None:
    reads = _Reads(b"", None)
    pause_after_short_reads(reads.transport, PAUSE_S)

    assert reads.transport.receive() == b""
    assert reads.transport.receive() is None
