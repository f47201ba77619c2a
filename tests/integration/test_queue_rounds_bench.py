"""``bench/queue_rounds.py`` on a real pair: every consumed message removed, every other one kept untouched.

The bench alternates the purge working its queues one after another and side by side; this
runs it small, both ways, and holds it to the invariant it reports on.
"""

from __future__ import annotations

import pytest

from tests.integration.bench_modules import load_bench


@pytest.mark.timeout(300)
def test_both_ways_remove_every_consumed_message_and_touch_nothing_else() -> None:
    result = load_bench("queue_rounds").measure([3], waves=1, keys=9, latency_s=0.001)

    three = result["by_queues"]["3"]
    assert three["unconsumed"] == 18  # 9 a wave, two waves (one each way)
    assert three["unconsumed_kept"] == three["left_on_dr"] == 18
    assert three["redelivered_on_dr"] == 0
    assert three["one_by_one"]["purge_s"]["median"] > 0 < three["side_by_side"]["purge_s"]["median"]
