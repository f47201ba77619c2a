"""Elements decoded once across purge rounds: always what decoding the item afresh gives."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from brokersync.ledger.backend import ItemRef, KeySets
from brokersync.ledger.codec import bucket_of, decode_item, encode
from brokersync.ledger.ledger import DecodedElements

BUCKET = bucket_of(1_795_340_000_000)
ULIDS = ["01KAQ3ZC9W4T0V5GQ6N8M2R7XH", "01KAQ3ZC9W4T0V5GQ6N8M2R7XJ", "01KAQ3ZC9W4T0V5GQ6N8M2R7XK"]
PRODUCERS = ["ID:app-41000-1795340000000-1:1", "ID:app-41000-1795340000000-2:1"]


def _element(index: int) -> tuple[bytes | str, str | None]:
    """One of a few elements, ULID- or message-id-keyed, and the prefix entry it needs."""
    producer = PRODUCERS[index % 2]
    message_id = f"{producer}:-1:1:{index}"
    if index % 3 == 0:
        encoded = encode(message_id, BUCKET + index, None)
    else:
        encoded = encode(ULIDS[index % 3], BUCKET + index, message_id if index % 4 else None)
    return encoded.element, encoded.prefix_entry


def _keys(indexes: set[int], forged_prefixes: set[str]) -> KeySets:
    keys = KeySets(prefixes=set(forged_prefixes))
    for index in indexes:
        element, entry = _element(index)
        (keys.ulids if isinstance(element, bytes) else keys.message_ids).add(element)  # type: ignore[arg-type]
        if entry is not None:
            keys.prefixes.add(entry)
    return keys


def _colliding(entry: str) -> str:
    """A prefix entry with ``entry``'s hash and another prefix: the collision that makes ids ambiguous."""
    hashed, _, prefix = entry.partition("|")
    return f"{hashed}|{prefix}X"


@settings(max_examples=200)
@given(
    st.lists(
        st.tuples(st.sets(st.integers(0, 11), max_size=8), st.booleans()),
        min_size=1,
        max_size=6,
    )
)
def test_each_round_decodes_to_what_the_item_decodes_to_afresh(rounds: list[tuple[set[int], bool]]) -> None:
    """Elements come and go between rounds, and a colliding prefix entry may appear or leave."""
    memo, ref = DecodedElements(), ItemRef(0, BUCKET)
    for indexes, collide in rounds:
        forged = {_colliding(e) for i in indexes if (e := _element(i)[1]) is not None} if collide else set()
        keys = _keys(indexes, forged)

        assert memo.decode("ORDERS", ref, keys) == decode_item(BUCKET, keys.ulids, keys.message_ids, keys.prefixes)
        memo.keep_only_read("ORDERS")


def test_items_a_round_did_not_read_are_forgotten() -> None:
    memo = DecodedElements()
    memo.decode("ORDERS", ItemRef(0, BUCKET), _keys({1, 2}, set()))
    memo.keep_only_read("ORDERS")
    memo.decode("ORDERS", ItemRef(0, BUCKET + 250), _keys({3}, set()))
    memo.keep_only_read("ORDERS")

    assert len(memo) == 1


def test_one_queue_s_round_keeps_what_another_queue_read() -> None:
    memo = DecodedElements()
    memo.decode("ORDERS", ItemRef(0, BUCKET), _keys({1, 2}, set()))
    memo.keep_only_read("ORDERS")
    memo.decode("PAYMENTS", ItemRef(0, BUCKET), _keys({3}, set()))
    memo.keep_only_read("PAYMENTS")

    assert len(memo) == 2
