"""A drill that finds consumed messages left on the old primary says which of three causes each sample has."""

from __future__ import annotations

import time

from ulid import ULID

from brokersync.ledger import LedgerEntry, memory_ledger
from brokersync_local.drill import Drill


def test_left_messages_are_told_apart_by_what_the_ledger_holds() -> None:
    keys = [str(ULID()) for _ in range(3)]
    consumed_ms = int(time.time() * 1000)  # after the keys were made, as a consumption always is
    purged, pending, never_captured = (
        LedgerEntry(key, consumed_ms, f"ID:app-41000-1795340000000-1:1:-1:1:{n}") for n, key in enumerate(keys, 1)
    )
    ledger = memory_ledger()
    ledger.record("ORDERS", [purged, pending])
    ledger.mark_purged("ORDERS", [p for p in ledger.pending("ORDERS") if p.key == purged.key])
    drill = Drill.__new__(Drill)  # only what _why_left reads: no world, no brokers
    drill.ledger, drill.queue = ledger, "ORDERS"

    why = drill._why_left({purged.key, pending.key, never_captured.key})  # no sync control: loop unknown

    assert (why["sampled"], why["in_ledger"], why["pending"]) == (3, 2, 1)
    assert why["purge_loop_running"] is None
