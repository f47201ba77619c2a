"""The ledger port: what capture, purge, dedupe and repair need of the consumed-message ledger."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, NamedTuple


class LedgerEntry(NamedTuple):
    """One consumed message: its sync key, when it was consumed, and its own JMS message id.

    ``message_id`` is what makes removal exact: two messages can share a correlation id (a
    producer's retry, an application reusing one), and only the one consumed on the primary
    may leave DR. For message-id keys it is the key itself and may be left out.
    """

    key: str
    consumed_at_ms: int
    message_id: str | None = None


@dataclass(frozen=True, slots=True)
class WriteReport:
    items: int
    write_units: float


@dataclass(frozen=True, slots=True)
class PendingKey:
    """A key consumed on the primary and not yet removed from DR (nor given up on as missing)."""

    key: str
    consumed_at_ms: int
    #: The JMS message id of the consumed message: the purge removes exactly the DR copies
    #: carrying it. ``None`` when the ledger cannot name it exactly (the purge never guesses).
    message_id: str | None = None
    #: Where the ledger holds this key (a key recorded twice, by an advisory and a receipt,
    #: has two places); marking resolves all of them. Opaque to callers.
    locations: tuple[Any, ...] = field(default=(), compare=False, repr=False)


class LedgerStore(ABC):
    """Where consumed keys are recorded (primary region) and resolved (DR region).

    Writes are idempotent at the key level: recording a key again, or marking it purged
    again, changes nothing any read returns.
    """

    @abstractmethod
    def record(self, queue: str, entries: Sequence[LedgerEntry | tuple[str, int]]) -> WriteReport:
        """Record entries consumed from ``queue``, as one batch (a bare ``(key, ms)`` has no message id)."""

    @abstractmethod
    def pending(self, queue: str, limit: int = 1000, *, read_only: bool = False) -> list[PendingKey]:
        """Up to ``limit`` unresolved keys of ``queue``, oldest consume first (``read_only``: no tidying writes)."""

    @abstractmethod
    def mark_purged(self, queue: str, keys: Sequence[PendingKey]) -> WriteReport:
        """The purge removed these keys' messages from DR."""

    @abstractmethod
    def mark_missing(self, queue: str, keys: Sequence[PendingKey]) -> WriteReport:
        """These keys never showed up on DR within the cutoff: counted, no longer pending."""

    @abstractmethod
    def consumed_between(self, queue: str, start_ms: int, end_ms: int) -> list[str]:
        """Keys consumed from ``queue`` in ``[start_ms, end_ms)``, each once, in consume order."""

    @abstractmethod
    def was_consumed(self, queue: str, key: str, window: timedelta) -> bool:
        """Whether ``key`` was consumed from ``queue`` within ``window`` of its creation (or of now)."""

    @abstractmethod
    def consumed_entries(self, queue: str, key: str, window: timedelta) -> list[LedgerEntry]:
        """Every consumed message recorded under ``key`` (each with its message id), searched as ``was_consumed``."""

    @abstractmethod
    def consumed_entries_of(
        self, queue: str, keys: Sequence[str], window: timedelta, *, from_ms: Mapping[str, int] | None = None
    ) -> dict[str, list[LedgerEntry]]:
        """:meth:`consumed_entries` of each key, read together; a key the ledger cannot hold is left out.

        ``from_ms`` starts a message-id key's window at the time it gives instead of back from
        now, as a ULID key's starts at its creation.
        """

    def add_pending(self, queue: str, entries: Sequence[LedgerEntry | tuple[str, int]]) -> WriteReport:
        """Repair path: keys reconciliation found on DR although consumed; the purge removes them."""
        return self.record(queue, entries)
