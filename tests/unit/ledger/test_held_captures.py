"""Capture items held across purge rounds: read again exactly when a pointer names a write they may lack."""

from __future__ import annotations

from brokersync.ledger.backend import ItemRef, KeySets, Pointer
from brokersync.ledger.ledger import HeldCaptures


def test_a_capture_item_read_back_shorter_than_the_one_held_does_not_replace_it() -> None:
    # BatchGetItem reads are eventually consistent: a later read may come from a node that
    # has not seen the last write yet. Sets only grow, so the fuller item is the newer one.
    held = HeldCaptures()
    ref = ItemRef(0, 1_795_340_000_000)
    fuller = KeySets(ulids={b"a" * 16, b"b" * 16})
    held.hold("ORDERS", {ref: fuller})
    held.hold("ORDERS", {ref: KeySets(ulids={b"a" * 16})})

    stale, kept = held.split("ORDERS", [Pointer(sk="1", refs=(ref,), counts=(2,))])

    assert stale == []
    assert kept == {ref: fuller}


def test_a_pointer_without_counts_always_has_its_item_read() -> None:
    held = HeldCaptures()
    ref = ItemRef(0, 1_795_340_000_000)
    held.hold("ORDERS", {ref: KeySets(ulids={b"a" * 16})})

    stale, kept = held.split("ORDERS", [Pointer(sk="1", refs=(ref,), counts=())])

    assert stale == [ref]
    assert kept == {}
