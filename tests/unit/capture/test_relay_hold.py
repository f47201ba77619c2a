"""Which advisories a full relay batch holds back: always a suffix, so one cumulative ACK covers the rest."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from brokersync.capture.relay import hold_point

BUCKETS = st.lists(st.integers(min_value=0, max_value=5).map(lambda b: b * 250), max_size=60)


def test_the_newest_bucket_at_the_tail_is_held_and_the_rest_acked() -> None:
    assert hold_point([0, 0, 250, 250, 500, 500], limit=10) == 4


def test_a_late_older_advisory_after_the_newest_bucket_starts_is_held_with_it() -> None:
    # The ACK can only cover a prefix: the 250 after the first 500 waits too (written next batch).
    assert hold_point([0, 250, 500, 250, 500], limit=10) == 2


def test_a_batch_that_starts_in_its_newest_bucket_holds_nothing() -> None:
    assert hold_point([500, 0, 250], limit=10) is None
    assert hold_point([500, 500], limit=10) is None


def test_nothing_is_held_when_the_held_part_would_outgrow_the_limit() -> None:
    assert hold_point([0] + [250] * 5, limit=4) is None


def test_an_empty_batch_holds_nothing() -> None:
    assert hold_point([], limit=10) is None


@given(BUCKETS, st.integers(min_value=1, max_value=60))
def test_what_is_acked_never_includes_the_newest_bucket_and_what_is_held_fits(buckets: list[int], limit: int) -> None:
    cut = hold_point(buckets, limit)
    if cut is None:
        return
    assert 0 < cut < len(buckets)
    assert max(buckets) not in buckets[:cut]
    assert buckets[cut] == max(buckets)
    assert len(buckets) - cut <= limit
