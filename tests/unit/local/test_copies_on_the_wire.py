"""A copy the lost broker had already written to the bridge's connection was in the bridge at the kill.

The survivor stores it after the kill's browse, and no copy of the dead store holds it (KahaDB
dispatches before its journal write is done); the drill tells it by the survivor's second browse.
"""

from __future__ import annotations

from brokersync_local.drill_traffic import copies_on_the_wire

LOST, SURVIVOR = "orders-use1", "orders-usw2"


def test_a_copy_of_the_lost_brokers_message_that_arrived_after_the_kill_was_on_the_wire() -> None:
    assert copies_on_the_wire(LOST, {"a"}, {"a", "b"}, {"a": LOST, "b": LOST}) == {"b"}


def test_a_copy_already_on_the_survivor_at_the_kill_was_not_on_the_wire() -> None:
    assert copies_on_the_wire(LOST, {"a"}, {"a"}, {"a": LOST}) == set()


def test_a_message_produced_on_the_survivor_after_the_kill_was_never_in_the_bridge() -> None:
    assert copies_on_the_wire(LOST, set(), {"c"}, {"c": SURVIVOR}) == set()


def test_a_message_the_drill_did_not_send_is_not_counted() -> None:
    assert copies_on_the_wire(LOST, set(), {"warm-up"}, {}) == set()


def test_a_copy_gone_from_the_survivor_by_the_second_browse_is_not_counted() -> None:
    """Purged between the browses: it was on the survivor at the kill, so it is pending purge, not wire."""
    assert copies_on_the_wire(LOST, {"a"}, set(), {"a": LOST}) == set()
