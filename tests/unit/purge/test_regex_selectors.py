"""REGEX selectors name exactly the message ids they were built from, and no other id.

ActiveMQ evaluates ``REGEX(pattern, JMSMessageID)`` with ``java.util.regex``'s ``find()``. The
patterns use only anchors, escaped literals, non-capturing groups, alternation and classes
of digits, which mean the same in Python's ``re`` (``\\z`` is Python's ``\\Z``), so these
specifications check them with ``re.search``. ``tests/integration/test_regex_removal.py``
checks them on the real broker.
"""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from brokersync.keys import InvalidKeyError
from brokersync.purge.regex_selectors import regex_batches, regex_selector, split_message_id
from brokersync.purge.selectors import MAX_HEADER_LINE_BYTES, stomp_escaped_length

PRODUCERS = [
    "ID:vm-40123-1733571234567-1:1:1:1",
    "ID:vm-40123-1733571234567-1:1:1:11",
    "ID:vm-40123-1733571234567-1:1:-1:1",
    "ID:ip-10-0-1-23.ec2.internal-36211-1701234567890-1:12:1:1",
    "ID:vm_x-40123-1733571234567-1:1:1:1",
]


def _matcher(selector: str) -> re.Pattern[str]:
    pattern = selector.removeprefix("REGEX('").removesuffix("', JMSMessageID)")
    return re.compile(pattern.replace("\\z", "\\Z"))


def _near_misses(message_id: str) -> list[str]:
    """Ids a wrong pattern would also match: the sequence's neighbours, prefixes and extensions,
    a leading zero, a sign, a trailing line break, another producer's."""
    producer, _, sequence = message_id.rpartition(":")
    number = int(sequence)
    sequences = {str(number - 1), str(number + 1), sequence[:-1], sequence + "0", sequence + "9", "0" + sequence}
    sequences |= {"-" + sequence, str(number * 10 + 5)}
    misses = [f"{producer}:{s}" for s in sequences if s and s != sequence]
    misses += [message_id + "\n", "x" + message_id, message_id + ":1", f"{producer}1:{sequence}"]
    return misses


@given(
    st.lists(
        st.tuples(st.sampled_from(PRODUCERS), st.integers(min_value=0, max_value=10**12)), min_size=1, max_size=400
    )
)
def test_a_pattern_matches_exactly_the_ids_it_was_built_from(picks: list[tuple[str, int]]) -> None:
    ids = [f"{producer}:{number}" for producer, number in picks]
    matcher = _matcher(regex_selector(ids))

    assert all(matcher.search(i) for i in ids)
    chosen = set(ids)
    misses = {m for i in ids for m in _near_misses(i)} - chosen
    assert not [m for m in misses if matcher.search(m)]


def test_a_run_of_consecutive_sequence_numbers_is_written_as_digit_classes() -> None:
    ids = [f"ID:vm-1-1700000000000-1:1:1:1:{n}" for n in range(100, 200)]

    selector = regex_selector(ids)

    assert selector.count("[0-9]") == 10  # 10[0-9] to 19[0-9]: the stem written out, the last digit a class
    assert len(selector) < 300


@pytest.mark.parametrize("sequence", ["007", "-5", "1e3", ""])
def test_an_id_whose_sequence_is_not_a_canonical_number_is_left_for_a_list(sequence: str) -> None:
    assert split_message_id(f"ID:vm-1-1700000000000-1:1:1:1:{sequence}") is None


def test_ids_no_pattern_can_name_come_back_for_list_selectors() -> None:
    ids = ["ID:vm-1-1700000000000-1:1:1:1:5", "ID:vm-1-1700000000000-1:1:1:1:05"]

    batches, rest = regex_batches(ids, max_ids=500)

    assert [b for b, _ in batches] == [[ids[0]]]
    assert rest == [ids[1]]


def test_batches_hold_at_most_max_ids_and_fit_the_header_line() -> None:
    ids = [f"{PRODUCERS[n % 4]}:{n * 7919}" for n in range(1200)]

    batches, rest = regex_batches(ids, max_ids=500)

    assert rest == []
    assert [k for b, _ in batches for k in b] == ids
    assert all(len(b) <= 500 for b, _ in batches)
    assert all(len("selector:") + stomp_escaped_length(s) + 1 <= MAX_HEADER_LINE_BYTES for _, s in batches)


def test_a_batch_too_long_for_one_header_line_is_halved_until_it_fits() -> None:
    ids = [f"{PRODUCERS[3]}:{n * 104729}" for n in range(500)]

    batches, _ = regex_batches(ids, max_ids=500, max_line_bytes=2000)

    assert len(batches) > 1
    assert [k for b, _ in batches for k in b] == ids


def test_a_bad_key_refuses_the_whole_call() -> None:
    with pytest.raises(InvalidKeyError):
        regex_batches(["ID:vm-1-1700000000000-1:1:1:1:5", "x') OR 1=1 OR ('"], max_ids=500)
