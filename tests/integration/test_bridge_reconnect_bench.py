"""``bench/bridge_reconnect.py`` on two real pairs: each is rendered with the cap it names and gets its bridge back."""

from __future__ import annotations

import pytest

from brokersync.topology import ACTIVEMQ_MAX_RECONNECT_DELAY_MS
from tests.integration.bench_modules import load_bench


@pytest.mark.timeout(300)
def test_both_pairs_get_their_bridge_back_after_the_same_outage() -> None:
    result = load_bench("bridge_reconnect").measure(outages=1, max_down_s=0, seed=1)

    assert result["down_s"] == [0.0]
    assert result["activemq"]["max_reconnect_delay_ms"] == ACTIVEMQ_MAX_RECONNECT_DELAY_MS
    assert result["shipped"]["max_reconnect_delay_ms"] < ACTIVEMQ_MAX_RECONNECT_DELAY_MS
    for way in ("shipped", "activemq"):
        [restart] = result[way]["restarts"]
        assert restart["outage_s"] > 0
        assert 0 <= restart["bridge_back_s"] < result[way]["max_reconnect_delay_ms"] / 1000 + 3
