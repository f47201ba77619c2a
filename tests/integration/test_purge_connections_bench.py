"""``bench/purge_connections.py`` on a real DR broker: both ways remove what they are asked to and touch nothing else.

The bench alternates the remover keeping its connection and opening one per call; this runs
it small, both ways, and holds it to the invariant it reports on.
"""

from __future__ import annotations

import pytest

from tests.integration.bench_modules import load_bench


@pytest.mark.timeout(300)
def test_both_ways_remove_every_asked_message_and_leave_every_other_unredelivered() -> None:
    result = load_bench("purge_connections").measure(waves=1, calls=3, ids_per_call=2)

    assert result["stayed"] == 24  # 3 calls x 2 ids stay beside those removed, in 4 waves (2 warm-up)
    assert result["stayed_on_dr"] == result["stayed"]
    assert result["redelivered_on_dr"] == 0
    assert result["kept"]["purge_cpu_ms_per_call"]["median"] > 0 < result["per_call"]["purge_cpu_ms_per_call"]["median"]
