"""What the sync bench counts as the ledger's writes: every request DynamoDB bills, pointer deletes included."""

from __future__ import annotations

from ulid import ULID

from brokersync.ledger import LedgerEntry, memory_ledger
from tests.integration.bench_modules import load_bench

NOW = 1_795_340_000.0


def test_a_pointer_the_purge_finished_is_counted_as_the_write_its_delete_is() -> None:
    functions = load_bench("sync_functions")
    units, reads = functions.Tally(), functions.Tally()
    ledger = functions.CountingLedger(memory_ledger(clock=lambda: NOW), units, reads)
    ledger.record("ORDERS", [LedgerEntry(str(ULID()), int(NOW * 1000), "ID:app-1-1795340000000-1:1:1:1:1")])
    pending = ledger.pending("ORDERS")
    ledger.mark_purged("ORDERS", pending)
    before = units.value

    assert ledger.pending("ORDERS") == []
    assert units.value == before + 1
