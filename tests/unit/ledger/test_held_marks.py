"""Marks items the purge writes, held across rounds: read again every few seconds, never trusted past what they hold."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ulid import ULID

from brokersync.ledger import Ledger, memory_ledger
from brokersync.ledger.backend import ItemRef, KeySets, Marks
from brokersync.ledger.ledger import MARKS_REREAD_S, HeldMarks
from tests.fake_clock import FakeClock
from tests.unit.ledger.conftest import NOW, spy_backend_reads

T0 = int(NOW * 1000)


def _keys(n: int) -> list[str]:
    return [str(ULID.from_timestamp((T0 - 5_000) / 1000)) for _ in range(n)]


def _record(ledger: Ledger, keys: list[str]) -> None:
    ledger.record("ORDERS", [(key, T0 + i) for i, key in enumerate(keys)])


def test_a_marks_item_this_ledger_wrote_is_not_read_again_within_the_reread_interval(
    ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    keys = _keys(20)
    _record(ledger, keys)
    ledger.mark_purged("ORDERS", ledger.pending("ORDERS")[:5])
    reads = spy_backend_reads(ledger, monkeypatch, "marks_refs")

    left = ledger.pending("ORDERS")

    assert sorted(p.key for p in left) == sorted(keys[5:])
    assert reads.refs == [[]]  # one pending call, no marks item read


def test_marks_another_process_adds_are_seen_once_the_reread_interval_has_passed(
    ledger: Ledger, clock: FakeClock
) -> None:
    keys = _keys(20)
    _record(ledger, keys)
    ledger.mark_purged("ORDERS", ledger.pending("ORDERS")[:5])
    other = Ledger(ledger.backend, clock=clock)  # another process writing the same marks items
    other.mark_purged("ORDERS", other.pending("ORDERS"))

    held_view = ledger.pending("ORDERS")
    clock.now += MARKS_REREAD_S

    assert sorted(p.key for p in held_view) == sorted(keys[5:])  # seen as pending: a removal that finds nothing
    assert ledger.pending("ORDERS") == []


def test_a_reader_that_writes_no_marks_sees_each_mark_at_once(ledger: Ledger, clock: FakeClock) -> None:
    keys = _keys(20)
    _record(ledger, keys)
    drain = Ledger(ledger.backend, clock=clock)  # a switchover's drain waiting for the purge
    assert len(drain.pending("ORDERS", read_only=True)) == 20

    ledger.mark_purged("ORDERS", ledger.pending("ORDERS"))

    assert drain.pending("ORDERS", read_only=True) == []


def test_keys_marked_from_held_marks_leave_no_work_pointer_behind(ledger: Ledger) -> None:
    _record(ledger, _keys(20))
    first = ledger.pending("ORDERS")
    ledger.mark_purged("ORDERS", first[:10])
    ledger.mark_purged("ORDERS", ledger.pending("ORDERS"))

    assert ledger.pending("ORDERS") == []
    assert ledger.backend.pointers("ORDERS", limit=10) == []


def test_a_read_without_a_mark_written_here_does_not_drop_it() -> None:
    # BatchGetItem reads are eventually consistent: a read may miss this process's last write.
    held = HeldMarks(clock=FakeClock(NOW))
    ref = ItemRef(0, T0 - T0 % 250)
    written = Marks(purged=KeySets(ulids={b"a" * 18}))
    held.read("ORDERS", [ref], {})
    held.wrote("ORDERS", ref, written)

    merged = held.read("ORDERS", [ref], {ref: Marks(purged=KeySets(ulids={b"b" * 18}))})

    assert merged[ref].purged.ulids == {b"a" * 18, b"b" * 18}


def test_a_marks_item_written_here_but_never_read_is_read_before_it_is_trusted() -> None:
    held = HeldMarks(clock=FakeClock(NOW))
    ref = ItemRef(0, T0 - T0 % 250)
    held.wrote("ORDERS", ref, Marks(purged=KeySets(ulids={b"a" * 18})))

    stale, kept = held.split("ORDERS", [ref])

    assert (stale, kept) == ([ref], {})


def test_a_clock_that_steps_back_has_held_marks_read_again() -> None:
    clock = FakeClock(NOW)
    held = HeldMarks(clock=clock)
    ref = ItemRef(0, T0 - T0 % 250)
    held.read("ORDERS", [ref], {})
    held.wrote("ORDERS", ref, Marks(purged=KeySets(ulids={b"a" * 18})))
    clock.now -= 60

    assert held.split("ORDERS", [ref])[0] == [ref]


_STEPS = st.lists(
    st.one_of(
        st.tuples(st.just("record"), st.integers(min_value=1, max_value=8)),
        st.tuples(st.just("purge"), st.integers(min_value=0, max_value=8)),
        st.tuples(st.just("other"), st.integers(min_value=0, max_value=8)),
        st.tuples(st.just("later"), st.sampled_from([0.1, 1.0, MARKS_REREAD_S])),
    ),
    max_size=25,
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=_STEPS)
def test_what_the_purge_sees_pending_is_every_unmarked_consumed_key_and_nothing_else_consumed_or_not(
    steps: list[tuple[str, object]],
) -> None:
    """Held marks only ever lag behind other writers: never an unmarked key hidden, never an unrecorded one shown."""
    clock = FakeClock(NOW)
    purge = memory_ledger(clock=clock)
    other = Ledger(purge.backend, clock=clock)
    recorded: set[str] = set()
    marked: set[str] = set()
    at = 0
    for action, argument in steps:
        if action == "record":
            keys = _keys(int(argument))  # type: ignore[call-overload]
            purge.record("ORDERS", [(key, T0 + at + i) for i, key in enumerate(keys)])
            at += 300  # the next write may fall in the next 250 ms item
            recorded.update(keys)
        elif action in ("purge", "other"):
            writer = purge if action == "purge" else other
            chosen = writer.pending("ORDERS")[: int(argument)]  # type: ignore[call-overload]
            writer.mark_purged("ORDERS", chosen)
            marked.update(p.key for p in chosen)
        else:
            clock.now += float(argument)  # type: ignore[arg-type]
        seen = {p.key for p in purge.pending("ORDERS")}
        assert recorded - marked <= seen
        assert seen <= recorded
