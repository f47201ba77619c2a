"""The consumed-message ledger: a DynamoDB global table, written in batches.

``Ledger`` holds the logic once; ``DynamoDBBackend`` and ``MemoryBackend`` hold the items.
See ``ledger.py`` for the layout and why it costs what it costs.
"""

from __future__ import annotations

from collections.abc import Callable

from brokersync.ledger.base import LedgerEntry, LedgerStore, PendingKey, WriteReport
from brokersync.ledger.dynamodb import DynamoDBBackend, ledger_model
from brokersync.ledger.exceptions import LedgerError, LedgerRecordRefusedError, LedgerUnavailableError
from brokersync.ledger.ledger import Ledger
from brokersync.ledger.memory import MemoryBackend

__all__ = [
    "DynamoDBBackend",
    "Ledger",
    "LedgerEntry",
    "LedgerError",
    "LedgerRecordRefusedError",
    "LedgerStore",
    "LedgerUnavailableError",
    "MemoryBackend",
    "PendingKey",
    "WriteReport",
    "dynamodb_ledger",
    "ledger_model",
    "memory_ledger",
    "peer_replicas",
]


def memory_ledger(**options: object) -> Ledger:
    return Ledger(MemoryBackend(), **options)  # type: ignore[arg-type]


def dynamodb_ledger(
    table_name: str, region: str | None = None, host: str | None = None, *, peer: bool = False, **options: object
) -> Ledger:
    """The ledger in ``region``'s replica of the table (``peer``: another region's, read with short timeouts)."""
    return Ledger(DynamoDBBackend(ledger_model(table_name, region, host, peer=peer)), **options)  # type: ignore[arg-type]


def peer_replicas(table_name: str, own_region: str | None, host: str | None = None) -> Callable[[str], Ledger | None]:
    """The ledger in another region's replica, read with a peer's short timeouts; None for ``own_region``'s.

    A switchover's drain reads where the old primary's relay wrote (``drain_figures``); the
    Lambdas and ``switchover --plan`` both choose the replica here. ``own_region`` None means one
    stack plays every role, with one replica for both. Each region's ledger is opened once.
    """
    opened: dict[str, Ledger] = {}

    def replica(region: str) -> Ledger | None:
        if own_region is None or region == own_region:
            return None
        if region not in opened:
            opened[region] = dynamodb_ledger(table_name, region=region, host=host, peer=True)
        return opened[region]

    return replica
