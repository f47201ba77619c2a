"""A purge whose selectors are REGEX patterns removes exactly the ids it names, on the real DR broker.

The messages are sent to the DR queue directly, by one STOMP producer, so their ids differ
only in the sequence number: the case a pattern writes compactly, and the one where a wrong
digit class would select a neighbour. Each test ends with a browse of DR (which changes
nothing): the exact ids left, and none of them redelivered.
"""

from __future__ import annotations

import pytest

from brokersync.broker.stomp import StompConnector
from brokersync.purge.remover import RemoverSettings, SelectorRemover
from brokersync_local.browsing import browse
from tests.integration.stomp_helpers import produce

pytestmark = pytest.mark.broker

QUEUE = "ORDERS"


def _fill(dr: StompConnector, count: int) -> list[str]:
    """``count`` messages on DR's queue, their ids in the order sent."""
    produce(dr, QUEUE, [(f"body {n}", {}) for n in range(count)])
    ids = [f.headers["message-id"] for f in browse(dr, QUEUE)]
    assert len(ids) == count
    return ids


def _remove(dr: StompConnector, ids: list[str]) -> set[str]:
    remover = SelectorRemover(dr, RemoverSettings(regex_selectors=True))
    result = remover.remove(QUEUE, ids)
    assert result.error is None and not result.refused and not result.ambiguous
    return set(result.removed)


def test_a_run_of_consecutive_ids_with_gaps_is_removed_and_its_neighbours_stay(dr: StompConnector) -> None:
    ids = _fill(dr, 130)
    chosen = [i for n, i in enumerate(ids) if n % 3 != 1 and 5 <= n < 125]

    assert _remove(dr, chosen) == set(chosen)

    frames = browse(dr, QUEUE)
    assert {f.headers["message-id"] for f in frames} == set(ids) - set(chosen)
    assert not [f for f in frames if f.headers.get("redelivered", "false") != "false"]


def test_ids_whose_sequence_is_a_prefix_of_anothers_are_told_apart(dr: StompConnector) -> None:
    ids = _fill(dr, 120)
    by_sequence = {int(i.rpartition(":")[2]): i for i in ids}
    low = min(by_sequence)
    # 1x and 1xx share their leading digits: naming one must not select the other.
    chosen = [by_sequence[s] for s in by_sequence if str(s).startswith(str(low + 9)) and s != low + 9]

    assert _remove(dr, chosen) == set(chosen)

    left = {f.headers["message-id"] for f in browse(dr, QUEUE)}
    assert left == set(ids) - set(chosen)
    assert by_sequence[low + 9] in left


def test_more_ids_than_one_pattern_takes_are_removed_in_several_subscriptions(dr: StompConnector) -> None:
    ids = _fill(dr, 700)
    remover = SelectorRemover(dr, RemoverSettings(regex_selectors=True, prefetch=250))

    result = remover.remove(QUEUE, ids[:600])

    assert set(result.removed) == set(ids[:600])
    assert result.subscriptions == 3
    frames = browse(dr, QUEUE)
    assert {f.headers["message-id"] for f in frames} == set(ids[600:])
    assert not [f for f in frames if f.headers.get("redelivered", "false") != "false"]
