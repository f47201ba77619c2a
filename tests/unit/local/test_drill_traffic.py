"""The drill's producer opens as many connections as its rate needs, and no more."""

from __future__ import annotations

from brokersync_local.drill_traffic import RATE_PER_CONNECTION, Producer, TrafficLog


def test_a_drill_at_the_usual_rates_produces_over_one_connection() -> None:
    assert Producer("ORDERS", TrafficLog(), rate=RATE_PER_CONNECTION).connections == 1


def test_a_drill_at_1000_msg_s_spreads_its_sends_with_receipts_over_four_connections() -> None:
    assert Producer("ORDERS", TrafficLog(), rate=1000).connections == 4


def test_a_caller_may_choose_the_connections() -> None:
    assert Producer("ORDERS", TrafficLog(), rate=1000, connections=2).connections == 2
