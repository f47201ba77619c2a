"""A drill that finds consumed messages left on the old primary says which of three causes each sample has."""

from __future__ import annotations

import time

from ulid import ULID

from brokersync.ledger import LedgerEntry, memory_ledger
from brokersync_local.drill import Drill, Timeline
from brokersync_local.drill_traffic import TrafficLog


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
    drill.ledger, drill.queue, drill.log, drill.timeline = ledger, "ORDERS", TrafficLog(), Timeline()

    why = drill._why_left({purged.key, pending.key, never_captured.key}, None)  # no sync control, no browse

    assert (why["sampled"], why["in_ledger"], why["pending"]) == (3, 2, 1)
    assert why["purge_loop_running"] is None


def test_left_messages_say_where_the_drill_produced_and_consumed_them() -> None:
    """The drill's own log tells a copy the relay never recorded (consumed on the other broker)
    from a message consumed where it is left (a late copy)."""
    log, timeline = TrafficLog(), Timeline()
    keys = [str(ULID()) for _ in range(3)]
    for key, produced_on, consumed_on in zip(
        keys, ("orders-use1", "orders-usw2", "orders-usw2"), ("orders-usw2", "orders-usw2", "orders-use1"), strict=True
    ):
        log.sent_to[key] = produced_on
        log.consumed[key] = [(consumed_on, timeline.started + 5)]
    drill = Drill.__new__(Drill)
    drill.ledger, drill.queue, drill.log, drill.timeline = memory_ledger(), "ORDERS", log, timeline

    why = drill._why_left(set(keys), None)

    assert why["consumed_on"] == {"orders-usw2": 2, "orders-use1": 1}
    assert why["produced_on"] == {"orders-use1": 1, "orders-usw2": 2}
    assert why["consumed_at_s"] == [5.0, 5.0]
    assert why["redelivered_here"] is None  # not browsed


def test_left_messages_count_those_whose_copy_the_browse_found_redelivered() -> None:
    """A redelivered copy is the late-copy sweep's to remove; a first delivery is not."""
    keys = sorted(str(ULID()) for _ in range(3))
    drill = Drill.__new__(Drill)
    drill.ledger, drill.queue, drill.log, drill.timeline = memory_ledger(), "ORDERS", TrafficLog(), Timeline()

    why = drill._why_left(set(keys), {keys[0], str(ULID())})  # one more, redelivered but not left

    assert why["redelivered_here"] == 1
