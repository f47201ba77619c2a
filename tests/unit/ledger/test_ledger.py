"""The ledger contract, identical for the in-memory and the DynamoDB backend."""

from __future__ import annotations

import dataclasses
from datetime import timedelta

import boto3
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from moto import mock_aws
from ulid import ULID

from brokersync.keys import InvalidKeyError
from brokersync.ledger import (
    Ledger,
    LedgerEntry,
    LedgerError,
    LedgerRecordRefusedError,
    codec,
    dynamodb_ledger,
    memory_ledger,
)
from brokersync.ledger.ledger import LEGACY_SHARDS
from brokersync.ledger.schema import create_ledger_table
from brokersync.topology import MAX_QUEUE_NAME_LENGTH
from tests.fake_clock import FakeClock
from tests.unit.ledger.conftest import NOW, spy_backend_reads

T0 = int(NOW * 1000)
MESSAGE_ID = "ID:ip-10-0-1-23.ec2.internal-38123-1795340000000-3:1:1:1:{}"


def _ulids(n: int, at_ms: int = T0 - 5_000) -> list[str]:
    return [str(ULID.from_timestamp(at_ms / 1000)) for _ in range(n)]


def _entries(keys: list[str], start_ms: int = T0, step_ms: int = 1) -> list[tuple[str, int]]:
    return [(key, start_ms + i * step_ms) for i, key in enumerate(keys)]


def test_n_consumed_messages_are_n_pending_keys(ledger: Ledger) -> None:
    keys = _ulids(300)

    ledger.record("ORDERS", _entries(keys))

    assert sorted(p.key for p in ledger.pending("ORDERS", limit=1000)) == sorted(keys)


def test_replaying_the_same_batch_changes_nothing(ledger: Ledger) -> None:
    entries = _entries(_ulids(50))
    ledger.record("ORDERS", entries)
    before = ledger.pending("ORDERS")

    ledger.record("ORDERS", entries[10:30])
    ledger.record("ORDERS", entries)

    assert ledger.pending("ORDERS") == before
    assert len(ledger.consumed_between("ORDERS", T0, T0 + 10_000)) == 50


def test_pending_keys_come_oldest_consumed_first(ledger: Ledger) -> None:
    keys = _ulids(20)
    ledger.record("ORDERS", _entries(keys[10:], start_ms=T0 + 1_000))
    ledger.record("ORDERS", _entries(keys[:10], start_ms=T0))

    assert [p.key for p in ledger.pending("ORDERS", limit=20)] == keys


def test_queues_are_kept_apart(ledger: Ledger) -> None:
    ledger.record("ORDERS", _entries(_ulids(3)))

    assert ledger.pending("PAYMENTS") == []


def test_the_longest_queue_name_a_topology_accepts_fits_every_ledger_key(ledger: Ledger) -> None:
    queue = "Q" * MAX_QUEUE_NAME_LENGTH
    keys = _ulids(3)
    ledger.record(queue, _entries(keys))

    ledger.mark_purged(queue, ledger.pending(queue)[:2])

    assert [p.key for p in ledger.pending(queue)] == keys[2:]
    assert ledger.was_consumed(queue, keys[0])


def test_purged_keys_are_no_longer_pending_and_marking_twice_is_harmless(ledger: Ledger) -> None:
    keys = _ulids(10)
    ledger.record("ORDERS", _entries(keys))
    first_four = ledger.pending("ORDERS")[:4]

    ledger.mark_purged("ORDERS", first_four)
    ledger.mark_purged("ORDERS", first_four)

    assert [p.key for p in ledger.pending("ORDERS")] == keys[4:]


def test_missing_keys_are_no_longer_pending(ledger: Ledger) -> None:
    ledger.record("ORDERS", _entries(_ulids(3)))
    pending = ledger.pending("ORDERS")

    ledger.mark_missing("ORDERS", pending[:1])
    ledger.mark_purged("ORDERS", pending[1:])

    assert ledger.pending("ORDERS") == []


def test_a_key_recorded_twice_at_different_times_is_resolved_by_one_mark(ledger: Ledger) -> None:
    [key] = _ulids(1)
    ledger.record("ORDERS", [(key, T0)])
    ledger.record("ORDERS", [(key, T0 + 900)])

    [pending] = ledger.pending("ORDERS")
    ledger.mark_purged("ORDERS", [pending])

    assert pending.consumed_at_ms == T0
    assert ledger.pending("ORDERS") == []


def test_consumed_between_is_exact_at_both_boundaries(ledger: Ledger) -> None:
    keys = _ulids(5)
    ledger.record("ORDERS", _entries(keys, start_ms=T0, step_ms=100))

    assert ledger.consumed_between("ORDERS", T0 + 100, T0 + 300) == keys[1:3]
    assert ledger.consumed_between("ORDERS", T0, T0 + 1) == keys[:1]


def test_message_id_keys_are_recorded_and_resolved_too(ledger: Ledger) -> None:
    keys = [MESSAGE_ID.format(i) for i in range(5)]
    ledger.record("PAYMENTS", _entries(keys))

    ledger.mark_purged("PAYMENTS", ledger.pending("PAYMENTS")[:2])

    assert [p.key for p in ledger.pending("PAYMENTS")] == keys[2:]


def test_was_consumed_finds_a_ulid_consumed_after_its_creation(ledger: Ledger) -> None:
    consumed, other = _ulids(2)
    ledger.record("ORDERS", [(consumed, T0)])

    assert ledger.was_consumed("ORDERS", consumed, timedelta(minutes=15))
    assert not ledger.was_consumed("ORDERS", other, timedelta(minutes=15))
    assert not ledger.was_consumed("PAYMENTS", consumed, timedelta(minutes=15))


def test_was_consumed_finds_a_recent_message_id(ledger: Ledger) -> None:
    ledger.record("PAYMENTS", [(MESSAGE_ID.format(7), T0 - 1_000)])

    assert ledger.was_consumed("PAYMENTS", MESSAGE_ID.format(7), timedelta(minutes=5))
    assert not ledger.was_consumed("PAYMENTS", MESSAGE_ID.format(8), timedelta(minutes=5))


def test_an_invalid_key_is_refused_and_nothing_is_written(ledger: Ledger) -> None:
    with pytest.raises(LedgerError, match="not a valid"):
        ledger.record("ORDERS", [*_entries(_ulids(2)), ("order-42", T0)])

    assert ledger.pending("ORDERS") == []


def test_repair_adds_keys_as_new_pending_work(ledger: Ledger, clock: FakeClock) -> None:
    keys = _ulids(3, at_ms=T0 - 86_400_000)
    clock.now += 60

    ledger.add_pending("ORDERS", [(k, 0) for k in keys])

    assert {p.key for p in ledger.pending("ORDERS")} == set(keys)


def test_a_full_batch_costs_well_under_fifty_write_units_per_thousand_keys(ledger: Ledger) -> None:
    units = 0.0
    for batch in range(4):
        report = ledger.record("ORDERS", _entries(_ulids(500), start_ms=T0 + batch * 100, step_ms=0))
        units += report.write_units

    assert units / 2_000 * 1_000 <= 50


def test_marking_a_bucket_in_two_rounds_costs_the_second_what_marking_it_at_once_would(ledger: Ledger) -> None:
    # The purge marks a bucket round after round; each write is billed for the whole marks item
    # it leaves, whether the backend reads it back or sizes it from what it read before.
    keys = _ulids(400)
    ledger.record("ORDERS", _entries(keys, step_ms=0))
    pending = ledger.pending("ORDERS")
    once = memory_ledger(clock=FakeClock(NOW))
    once.record("ORDERS", _entries(keys, step_ms=0))

    ledger.mark_purged("ORDERS", pending[:200])
    ledger.pending("ORDERS")
    second = ledger.mark_purged("ORDERS", pending[200:])

    assert second.write_units == once.mark_purged("ORDERS", once.pending("ORDERS")).write_units > 1


def test_a_marks_write_asks_dynamodb_for_nothing_back(project_root, monkeypatch: pytest.MonkeyPatch) -> None:
    # Asking for the item back made botocore decode the whole bucket's marks on every write.
    from pynamodb.connection import TableConnection  # noqa: PLC0415

    asked: list[str | None] = []
    original = TableConnection.update_item

    def spied(self: TableConnection, *args: object, **kwargs: object) -> object:
        asked.append(kwargs.get("return_values"))  # type: ignore[arg-type]
        return original(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(TableConnection, "update_item", spied)
    with mock_aws():
        create_ledger_table(boto3.client("dynamodb", region_name="us-east-1"), "t", project_root / "template.yaml")
        ledger = dynamodb_ledger("t", region="us-east-1", clock=FakeClock(NOW))
        ledger.record("ORDERS", _entries(_ulids(3)))
        asked.clear()
        ledger.mark_purged("ORDERS", ledger.pending("ORDERS"))

        assert asked == ["NONE"]
        assert ledger.pending("ORDERS") == []


def test_every_item_carries_a_ttl(project_root) -> None:
    with mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1")
        create_ledger_table(client, "ttl-test", project_root / "template.yaml")
        ledger = dynamodb_ledger("ttl-test", region="us-east-1", clock=FakeClock(NOW))
        ledger.record("ORDERS", _entries(_ulids(20)))
        ledger.mark_purged("ORDERS", ledger.pending("ORDERS")[:5])

        items = client.scan(TableName="ttl-test")["Items"]

    assert items
    assert all(int(item["expires_at"]["N"]) == int(NOW) + 7 * 86_400 for item in items)


def test_keys_of_one_queue_spread_over_the_shards() -> None:
    ledger = memory_ledger(shards=4)
    ledger.record("ORDERS", _entries(_ulids(400), step_ms=0))

    shards = {ref.shard for (_queue, ref) in ledger.backend._captured}  # type: ignore[attr-defined]

    assert shards == {0, 1, 2, 3}


@settings(max_examples=40, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.integers(0, 39), st.integers(0, 2_000), st.booleans()), max_size=60))
def test_pending_is_always_recorded_minus_resolved(operations: list[tuple[int, int, bool]]) -> None:
    ledger = memory_ledger()
    universe = _ulids(40)
    recorded: set[tuple[str, int]] = set()
    resolved: set[tuple[str, int]] = set()
    for index, offset, purge in operations:
        key = universe[index]
        if purge:
            ledger.mark_purged("Q", [p for p in ledger.pending("Q", limit=100) if p.key == key])
            resolved |= {element for element in recorded if element[0] == key}
        else:
            ledger.record("Q", [(key, T0 + offset)])
            recorded.add((key, T0 + offset))

    assert {p.key for p in ledger.pending("Q", limit=100)} == {key for key, _ in recorded - resolved}


def test_pending_reads_past_the_first_page_of_small_writes(ledger: Ledger) -> None:
    keys = _ulids(130)
    for index, key in enumerate(keys):
        ledger.record("ORDERS", [(key, T0 + index)])

    assert [p.key for p in ledger.pending("ORDERS", limit=1000)] == keys


def test_two_messages_consumed_under_one_key_are_two_pending_entries(ledger: Ledger) -> None:
    [key] = _ulids(1)
    ledger.record(
        "ORDERS", [LedgerEntry(key, T0, MESSAGE_ID.format(1)), LedgerEntry(key, T0 + 5, MESSAGE_ID.format(2))]
    )

    pending = ledger.pending("ORDERS")

    assert [(p.key, p.message_id) for p in pending] == [(key, MESSAGE_ID.format(1)), (key, MESSAGE_ID.format(2))]


def test_marking_one_of_two_messages_under_one_key_leaves_the_other_pending(ledger: Ledger) -> None:
    [key] = _ulids(1)
    ledger.record("ORDERS", [LedgerEntry(key, T0, MESSAGE_ID.format(1)), LedgerEntry(key, T0, MESSAGE_ID.format(2))])

    ledger.mark_purged("ORDERS", [p for p in ledger.pending("ORDERS") if p.message_id == MESSAGE_ID.format(1)])

    assert [p.message_id for p in ledger.pending("ORDERS")] == [MESSAGE_ID.format(2)]


def test_a_lower_case_ulid_is_recorded_as_the_same_key(ledger: Ledger) -> None:
    [key] = _ulids(1)

    ledger.record("ORDERS", [LedgerEntry(key.lower(), T0, MESSAGE_ID.format(1))])

    assert [p.key for p in ledger.pending("ORDERS")] == [key]


def test_a_prefix_hash_collision_names_no_message_and_is_never_pending(
    ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two producers' prefixes with one hash in one item: neither element may be taken for the other."""
    monkeypatch.setattr(codec, "prefix_hash", lambda _prefix: "AAAAAAAA")
    [key] = _ulids(1)
    one = "ID:host-a-38123-1795340000000-3:1:1:1:1"
    other = "ID:host-b-38123-1795340000000-3:1:1:1:1"
    ledger.record("ORDERS", [LedgerEntry(key, T0, one)])
    ledger.record("ORDERS", [LedgerEntry(key, T0 + 1, other)])  # same key, same bucket: the same item

    assert ledger.pending("ORDERS") == []


def test_a_message_id_key_whose_prefix_collides_is_never_pending(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(codec, "prefix_hash", lambda _prefix: "AAAAAAAA")
    ledger = memory_ledger(shards=1)
    ledger.record("PAYMENTS", [LedgerEntry("ID:host-a-1-1795340000000-3:1:1:1:1", T0)])
    ledger.record("PAYMENTS", [LedgerEntry("ID:host-b-1-1795340000000-3:1:1:1:1", T0)])

    assert ledger.pending("PAYMENTS") == []


def test_a_record_with_a_message_id_that_is_not_one_is_refused(ledger: Ledger) -> None:
    with pytest.raises(LedgerRecordRefusedError):
        ledger.record("ORDERS", [LedgerEntry(_ulids(1)[0], T0, "ID:nope\n")])


@pytest.mark.parametrize("at", [True, 1_795_342_453, 10**40, 1.5e12], ids=["bool", "seconds", "10**40", "float"])
def test_a_record_whose_time_is_no_epoch_millisecond_is_refused_and_nothing_is_written(
    ledger: Ledger, at: object
) -> None:
    key = _ulids(1)[0]
    with pytest.raises(LedgerRecordRefusedError, match="not epoch milliseconds"):
        ledger.record("ORDERS", [(key, T0), (_ulids(1)[0], at)])  # type: ignore[list-item]

    assert ledger.pending("ORDERS") == []


def test_a_page_of_work_pointers_is_read_in_one_items_read_not_two_per_pointer(
    ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    keys = _ulids(40)
    for index, key in enumerate(keys):
        ledger.record("ORDERS", [(key, T0 + index * 300)])  # 40 pointers over several buckets
    reads = spy_backend_reads(ledger, monkeypatch, "captured_refs")

    assert [p.key for p in ledger.pending("ORDERS", limit=1000)] == keys
    assert reads.calls == 1


def _upgraded(keys: list[str], message_ids: list[str]) -> tuple[Ledger, Ledger]:
    """A ledger written by a release with two shards, and the same table read by this release."""
    before = memory_ledger(shards=LEGACY_SHARDS[0], clock=FakeClock(NOW))
    before.record("ORDERS", _entries(keys))
    before.record("PAYMENTS", [LedgerEntry(m, T0) for m in message_ids])
    return before, Ledger(before.backend, clock=FakeClock(NOW))


def test_a_ledger_written_with_two_shards_answers_every_key_after_the_upgrade_to_one() -> None:
    keys = _ulids(40)
    message_ids = [MESSAGE_ID.format(i) for i in range(40)]
    before, after = _upgraded(keys, message_ids)

    assert {ref.shard for (_queue, ref) in before.backend._captured} == {0, 1}  # type: ignore[attr-defined]
    assert all(after.was_consumed("ORDERS", key) for key in keys)
    assert all(after.was_consumed("PAYMENTS", m) for m in message_ids)
    assert sorted(after.consumed_between("ORDERS", T0 - 1, T0 + 1_000)) == sorted(keys)
    assert all(len(after.consumed_entries("PAYMENTS", m)) == 1 for m in message_ids)


def test_keys_written_with_two_shards_are_purged_by_a_ledger_with_one_and_stay_purged() -> None:
    keys = _ulids(40)
    _before, after = _upgraded(keys, [])
    after.record("ORDERS", _entries(_ulids(10), start_ms=T0 + 500))  # new keys, the new layout

    pending = after.pending("ORDERS")
    after.mark_purged("ORDERS", pending)

    assert len(pending) == 50
    assert after.pending("ORDERS") == []


def test_a_key_was_never_consumed_is_still_answered_false_across_both_layouts() -> None:
    _before, after = _upgraded(_ulids(5), [])

    assert not after.was_consumed("ORDERS", _ulids(1)[0])


def test_once_no_earlier_layout_is_read_every_query_still_answers(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("brokersync.ledger.ledger.LEGACY_SHARDS", ())
    ledger = memory_ledger(clock=FakeClock(NOW))
    keys = _ulids(10)
    ledger.record("ORDERS", _entries(keys))

    assert sorted(ledger.consumed_between("ORDERS", T0 - 1, T0 + 1_000)) == sorted(keys)
    assert all(ledger.was_consumed("ORDERS", key) for key in keys)


def _replicate_pointers_only(primary: Ledger, replica: Ledger, queue: str) -> None:
    """Global tables replicate item by item in no order: here the pointers arrive first."""
    for pointer in primary.backend.pointers(queue, limit=1000):
        replica.backend.put_pointer(queue, pointer, int(NOW) + 3600)


def _replicate_items(primary: Ledger, replica: Ledger, queue: str) -> None:
    refs = [ref for p in primary.backend.pointers(queue, limit=1000) for ref in p.refs]
    for ref, keys in primary.backend.captured(queue, refs).items():
        replica.backend.add_captured(queue, ref, keys, int(NOW) + 3600)


def test_a_pointer_read_before_the_write_it_names_stays_until_that_write_arrives(ledger: Ledger) -> None:
    primary = memory_ledger(clock=FakeClock(NOW))
    keys = _ulids(30)
    primary.record("ORDERS", _entries(keys))
    _replicate_pointers_only(primary, ledger, "ORDERS")

    assert ledger.pending("ORDERS") == []
    _replicate_items(primary, ledger, "ORDERS")

    assert sorted(p.key for p in ledger.pending("ORDERS")) == sorted(keys)


def test_a_pointer_whose_item_holds_only_an_earlier_write_stays_and_its_keys_are_found_later(
    ledger: Ledger,
) -> None:
    primary = memory_ledger(clock=FakeClock(NOW))
    first, second = _ulids(10), _ulids(10)
    primary.record("ORDERS", _entries(first))
    _replicate_pointers_only(primary, ledger, "ORDERS")
    _replicate_items(primary, ledger, "ORDERS")
    ledger.mark_purged("ORDERS", ledger.pending("ORDERS"))
    primary.record("ORDERS", _entries(second, start_ms=T0 + 20))  # the same 250 ms item
    _replicate_pointers_only(primary, ledger, "ORDERS")

    assert ledger.pending("ORDERS") == []  # the item here still holds only the first write
    _replicate_items(primary, ledger, "ORDERS")

    assert sorted(p.key for p in ledger.pending("ORDERS")) == sorted(second)


def test_a_capture_item_already_read_is_not_read_again_while_no_pointer_names_a_later_write(
    ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    keys = _ulids(20)
    ledger.record("ORDERS", _entries(keys))
    asked = spy_backend_reads(ledger, monkeypatch, "captured_refs").refs
    first = ledger.pending("ORDERS")
    ledger.mark_purged("ORDERS", first[:5])

    again = ledger.pending("ORDERS")

    assert len(asked[0]) == 1
    assert asked[1] == []
    assert again == first[5:]


def test_a_later_write_to_an_item_already_read_is_read_and_its_keys_are_pending(
    ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    first, second = _ulids(10), _ulids(10)
    ledger.record("ORDERS", _entries(first))
    asked = spy_backend_reads(ledger, monkeypatch, "captured_refs").refs
    ledger.pending("ORDERS")
    ledger.record("ORDERS", _entries(second, start_ms=T0 + 20))  # the same 250 ms item

    assert sorted(p.key for p in ledger.pending("ORDERS")) == sorted(first + second)
    assert len(asked[1]) == 1


def test_a_capture_item_is_held_only_for_the_queue_it_was_read_for(ledger: Ledger) -> None:
    keys = _ulids(4)
    ledger.record("ORDERS", _entries(keys))
    ledger.record("PAYMENTS", _entries(keys))
    ledger.pending("ORDERS")

    assert sorted(p.key for p in ledger.pending("PAYMENTS")) == sorted(keys)


def test_a_pointer_written_before_pointers_counted_is_read_and_resolved_as_before(ledger: Ledger) -> None:
    keys = _ulids(5)
    ledger.record("ORDERS", _entries(keys))
    for pointer in ledger.backend.pointers("ORDERS", limit=10):  # rewritten the old way: no counts
        ledger.backend.put_pointer("ORDERS", dataclasses.replace(pointer, counts=()), int(NOW) + 3600)

    pending = ledger.pending("ORDERS")
    ledger.mark_purged("ORDERS", pending)

    assert sorted(p.key for p in pending) == sorted(keys)
    assert ledger.pending("ORDERS") == []
    assert ledger.backend.pointers("ORDERS", limit=10) == []


def test_a_pointer_with_one_element_left_unmarked_stays(ledger: Ledger) -> None:
    ledger.record("ORDERS", _entries(_ulids(20)))
    pending = ledger.pending("ORDERS")

    ledger.mark_purged("ORDERS", pending[1:])

    assert len(ledger.backend.pointers("ORDERS", limit=10)) == 1
    assert ledger.pending("ORDERS") == pending[:1]


# Keys a late-copy sweep may ask about: ULIDs made across an hour (windows that overlap or not),
# message ids (every window the same stretch back from now), lower-case ULIDs, and odd text.
_SWEEP_KEYS = [str(ULID.from_timestamp((T0 - minutes * 60_000) / 1000)) for minutes in (0, 1, 7, 14, 16, 40, 61)]
_SWEEP_KEYS += [MESSAGE_ID.format(i) for i in range(4)] + [_SWEEP_KEYS[2].lower(), "not a key", "ID:odd:1"]


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    shards=st.sampled_from([1, LEGACY_SHARDS[0]]),
    records=st.lists(
        st.tuples(
            st.sampled_from(_SWEEP_KEYS[:11]),
            st.integers(-3_600_000, 600_000),
            st.integers(0, 5),
        ),
        max_size=40,
    ),
    asked=st.lists(st.sampled_from(_SWEEP_KEYS), max_size=14),
)
def test_many_keys_asked_together_answer_as_each_asked_alone(
    shards: int, records: list[tuple[str, int, int]], asked: list[str]
) -> None:
    """Whatever was recorded where (two shard layouts, a message id twice, a key consumed late), the batched
    read gives each key exactly what ``consumed_entries`` gives it, and leaves out keys the ledger cannot hold."""
    written = memory_ledger(shards=shards, clock=FakeClock(NOW))
    for key, offset_ms, copy in records:
        message_id = key if key.startswith("ID:") else MESSAGE_ID.format(100 + copy)
        written.record("ORDERS", [LedgerEntry(key, T0 + offset_ms, message_id)])
    ledger = Ledger(written.backend, clock=FakeClock(NOW))

    together = ledger.consumed_entries_of("ORDERS", asked, timedelta(minutes=15))

    alone = {}
    for key in asked:
        try:
            alone[key] = ledger.consumed_entries("ORDERS", key, timedelta(minutes=15))
        except (InvalidKeyError, ValueError):  # a key the ledger cannot hold is left out
            continue
    assert together == alone


def test_message_id_keys_asked_together_read_their_window_once(ledger: Ledger, monkeypatch: pytest.MonkeyPatch) -> None:
    message_ids = [MESSAGE_ID.format(i) for i in range(200)]
    ledger.record("PAYMENTS", [LedgerEntry(m, T0 - 60_000 + i) for i, m in enumerate(message_ids)])
    reads = []
    original = ledger.backend.captured_range

    def counted(*args: object) -> object:
        reads.append(args)
        return original(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(ledger.backend, "captured_range", counted)

    answers = ledger.consumed_entries_of("PAYMENTS", message_ids, timedelta(minutes=15))

    assert all([e.message_id for e in answers[m]] == [m] for m in message_ids)
    assert len(reads) == len(ledger._shards_of(message_ids[0]))  # one read per shard layout, not one per key


def test_a_message_id_consumed_long_ago_is_found_from_a_time_given_for_it(ledger: Ledger) -> None:
    """A failback hours after the loss asks for heads consumed just before it: back from now finds nothing."""
    message_id = MESSAGE_ID.format(7)
    consumed = T0 - 7_200_000
    ledger.record("PAYMENTS", [LedgerEntry(message_id, consumed)])

    back_from_now = ledger.consumed_entries_of("PAYMENTS", [message_id], timedelta(minutes=15))
    from_then = ledger.consumed_entries_of(
        "PAYMENTS", [message_id], timedelta(minutes=15), from_ms={message_id: consumed - 60_000}
    )

    assert back_from_now == {message_id: []}
    assert [e.message_id for e in from_then[message_id]] == [message_id]


def test_a_message_id_consumed_after_the_window_from_the_time_given_is_not_found(ledger: Ledger) -> None:
    message_id = MESSAGE_ID.format(8)
    consumed = T0 - 7_200_000
    ledger.record("PAYMENTS", [LedgerEntry(message_id, consumed)])

    answers = ledger.consumed_entries_of(
        "PAYMENTS", [message_id], timedelta(minutes=15), from_ms={message_id: consumed - 16 * 60_000}
    )

    assert answers == {message_id: []}


@pytest.mark.parametrize("given", [0, -5, 10**19])
def test_a_time_the_ledger_cannot_hold_is_looked_up_back_from_now(ledger: Ledger, given: int) -> None:
    message_id = MESSAGE_ID.format(9)
    ledger.record("PAYMENTS", [LedgerEntry(message_id, T0 - 60_000)])

    answers = ledger.consumed_entries_of("PAYMENTS", [message_id], timedelta(minutes=15), from_ms={message_id: given})

    assert [e.message_id for e in answers[message_id]] == [message_id]
