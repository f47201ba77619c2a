"""``bench/purge_connections.py`` on a real DR broker: every way removes what it is asked to and touches nothing else.

The bench alternates the remover keeping its connection, opening one per call, and keeping it
with Nagle and the delayed ACK left on; this runs it small, every way, and holds it to the
invariant it reports on.
"""

from __future__ import annotations

import pytest

from tests.integration.bench_modules import load_bench


@pytest.mark.timeout(300)
def test_every_way_removes_every_asked_message_and_leaves_every_other_unredelivered() -> None:
    result = load_bench("purge_connections").measure(waves=1, calls=3, ids_per_call=2)

    assert result["stayed"] == 36  # 3 calls x 2 ids stay beside those removed, in 6 waves (3 warm-up)
    assert result["stayed_on_dr"] == result["stayed"]
    assert result["redelivered_on_dr"] == 0
    for way in ("kept", "per_call", "kept_tcp_delays"):
        assert result[way]["purge_cpu_ms_per_call"]["median"] > 0
