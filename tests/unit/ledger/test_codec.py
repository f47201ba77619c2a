"""The ledger element codec: every key and message id comes back exactly as written."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from ulid import ULID

from brokersync.keys import MESSAGE_ID_PATTERN
from brokersync.ledger.codec import BUCKET_MS, ULID_ELEMENT_HEAD, decode_item, encode, ulid_bytes, ulid_from_bytes

message_ids = st.from_regex(MESSAGE_ID_PATTERN, fullmatch=True)
ulids = st.builds(lambda raw: str(ULID.from_bytes(raw)), st.binary(min_size=16, max_size=16))
times = st.integers(min_value=0, max_value=2**41)


@given(key=ulids, message_id=message_ids, at=times)
def test_a_ulid_element_names_its_key_time_and_exact_message_id(key: str, message_id: str, at: int) -> None:
    encoded = encode(key, at, message_id)

    [decoded] = decode_item(at - at % BUCKET_MS, [encoded.element], [], [encoded.prefix_entry])  # type: ignore[list-item]

    assert (decoded.key, decoded.consumed_at_ms, decoded.message_id) == (key, at, message_id)
    assert not decoded.ambiguous


@given(message_id=message_ids, at=times)
def test_a_message_id_element_names_its_exact_id(message_id: str, at: int) -> None:
    encoded = encode(message_id, at, None)

    [decoded] = decode_item(at - at % BUCKET_MS, [], [encoded.element], [encoded.prefix_entry])  # type: ignore[list-item]

    assert (decoded.key, decoded.message_id, decoded.consumed_at_ms) == (message_id, message_id, at)


def test_a_ulid_element_keeps_its_first_18_bytes_for_positional_readers() -> None:
    key = str(ULID())

    with_reference = encode(key, 1_000, "ID:vm-40237-1795342445090-7:1:-1:1:12345").element
    without = encode(key, 1_000, None).element

    assert with_reference[:ULID_ELEMENT_HEAD] == without
    assert len(with_reference) <= 32  # the write-cost budget rests on this (bench/capture.py)


def test_an_element_whose_producer_prefix_is_unknown_is_ambiguous() -> None:
    encoded = encode(str(ULID()), 1_000, "ID:vm-40237-1795342445090-7:1:-1:1:1")

    [decoded] = decode_item(1_000, [encoded.element], [], [])  # type: ignore[list-item]

    assert decoded.ambiguous
    assert decoded.message_id is None


@given(raw=st.binary(min_size=16, max_size=16))
def test_a_ulids_text_is_what_python_ulid_writes(raw: bytes) -> None:
    assert ulid_from_bytes(raw) == str(ULID.from_bytes(raw))


@given(raw=st.binary(min_size=16, max_size=16))
def test_a_ulids_bytes_are_what_python_ulid_reads(raw: bytes) -> None:
    text = str(ULID.from_bytes(raw))

    assert ulid_bytes(text) == ULID.from_str(text).bytes == raw


@given(text=st.text(alphabet="0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcz-", min_size=25, max_size=27))
def test_text_that_is_not_a_canonical_ulid_is_read_or_refused_as_python_ulid_does(text: str) -> None:
    try:
        expected: bytes | type[Exception] = ULID.from_str(text).bytes
    except ValueError:
        expected = ValueError
    try:
        got: bytes | type[Exception] = ulid_bytes(text)
    except ValueError:
        got = ValueError

    assert got == expected
