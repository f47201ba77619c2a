"""Selectors match exactly the keys given, and always fit ActiveMQ's STOMP header limit."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from ulid import ULID

from brokersync.keys import InvalidKeyError
from brokersync.purge.selectors import (
    MAX_HEADER_LINE_BYTES,
    selector_batches,
    selector_for,
    split_off_partial,
    stomp_escaped_length,
)

MESSAGE_ID = "ID:ip-10-0-1-23.ec2.internal-38123-1700000000000-3:1:1:1:{}"


def _ulids(n: int) -> list[str]:
    return [str(ULID()) for _ in range(n)]


def _line_bytes(selector: str) -> int:
    return len("selector:") + stomp_escaped_length(selector) + 1


def test_a_correlation_id_selector_lists_each_key_quoted() -> None:
    assert selector_for(["A", "B"], "correlation-id") == "JMSCorrelationID IN ('A','B')"


def test_a_message_id_selector_uses_jms_message_id() -> None:
    key = MESSAGE_ID.format(1)

    [(keys, selector)] = selector_batches([key], "message-id")

    assert keys == [key]
    assert selector == f"JMSMessageID IN ('{key}')"


def test_352_ulids_fit_one_selector_and_353_do_not() -> None:
    assert len(selector_batches(_ulids(352), "correlation-id")) == 1
    assert [len(k) for k, _ in selector_batches(_ulids(353), "correlation-id")] == [352, 1]


def test_escaped_colons_make_message_ids_cost_more() -> None:
    keys = [MESSAGE_ID.format(i) for i in range(1000)]

    batches = selector_batches(keys, "message-id")

    assert 150 < len(batches[0][0]) < 260
    assert all(_line_bytes(s) <= MAX_HEADER_LINE_BYTES for _, s in batches)


def test_one_invalid_key_refuses_the_whole_list() -> None:
    with pytest.raises(InvalidKeyError):
        selector_batches([*_ulids(3), "x') OR (1=1"], "correlation-id")


def test_duplicates_are_selected_once_and_order_is_kept() -> None:
    a, b = _ulids(2)

    [(keys, _)] = selector_batches([a, b, a], "correlation-id")

    assert keys == [a, b]


@given(st.lists(st.integers(min_value=0, max_value=10**6), max_size=1500), st.integers(2_000, 10_240))
def test_batches_cover_every_key_exactly_once_within_the_limit(ids: list[int], limit: int) -> None:
    keys = [MESSAGE_ID.format(i) for i in ids]

    batches = selector_batches(keys, "message-id", max_line_bytes=limit)

    flat = [k for batch, _ in batches for k in batch]
    assert flat == list(dict.fromkeys(keys))
    assert all(_line_bytes(s) <= limit for _, s in batches)


def test_a_last_selector_with_room_for_another_key_is_split_off() -> None:
    keys = _ulids(353)

    assert split_off_partial(keys, "correlation-id") == (keys[:352], keys[352:])


def test_keys_that_fill_their_selectors_exactly_leave_nothing_partial() -> None:
    keys = _ulids(704)

    assert split_off_partial(keys, "correlation-id") == (keys, [])


def test_keys_that_fill_no_selector_are_all_partial() -> None:
    keys = _ulids(100)

    assert split_off_partial(keys, "correlation-id") == ([], keys)


def test_splitting_refuses_an_invalid_key_as_batching_does() -> None:
    with pytest.raises(InvalidKeyError):
        split_off_partial([*_ulids(3), "x') OR (1=1"], "correlation-id")


@given(st.lists(st.integers(min_value=0, max_value=10**6), max_size=1500), st.integers(2_000, 10_240))
def test_the_whole_part_is_whole_selectors_and_the_partial_one_has_room(ids: list[int], limit: int) -> None:
    keys = [MESSAGE_ID.format(i) for i in ids]

    whole, partial = split_off_partial(keys, "message-id", max_line_bytes=limit)

    assert whole + partial == list(dict.fromkeys(keys))
    whole_batches = selector_batches(whole, "message-id", max_line_bytes=limit)
    assert [k for batch, _ in whole_batches for k in batch] == whole
    longest = max((stomp_escaped_length(f"'{k}'") for k in keys), default=0)
    assert all(_line_bytes(s) + 1 + longest > limit for _, s in whole_batches)
    if partial:
        [(_, selector)] = selector_batches(partial, "message-id", max_line_bytes=limit)
        assert _line_bytes(selector) + 1 + longest <= limit
