"""A DR broker that was down for a while gets its copies again within the bridge's reconnect cap.

ActiveMQ's static discovery doubles its wait after each failed connect, from 1 s up to a cap
that defaults to 30 s; the rendered connector sets the cap (``tuning.bridge.max_reconnect_delay_ms``).
The DR broker here stays down past the point where ActiveMQ's own backoff waits 16 s and
then 30 s, so only the rendered cap (5 s as shipped, decision 0053) brings the bridge back in
time. Real brokers, because the backoff is the broker's.
"""

from __future__ import annotations

import pytest
from ulid import ULID

from brokersync.broker.stomp import StompConnector
from brokersync_local.restarts import restart_dr
from brokersync_local.world import LocalWorld
from tests.integration.stomp_helpers import receive, send

pytestmark = pytest.mark.broker

#: Down longer than ActiveMQ's uncapped waits of 1 + 2 + 4 + 8 s: its next would be 16 s, then 30 s.
DOWN_S = 18
#: Beyond the cap: one connect attempt and the bridge's subscription on a loaded two-core machine.
SLACK_S = 3


def test_copies_resume_within_the_reconnect_cap_of_a_dr_broker_coming_back(
    world: LocalWorld, primary: StompConnector, dr: StompConnector
) -> None:
    cap_s = world.topology.tuning.bridge.max_reconnect_delay_ms / 1000
    key = str(ULID())

    waited = restart_dr(
        world,
        down_s=DOWN_S,
        while_down=lambda: send(primary, "ORDERS", "sent while DR was down", {"correlation-id": key}),
    )

    assert waited < cap_s + SLACK_S, f"the bridge took {waited:.1f}s, its reconnect cap is {cap_s:.0f}s"
    [copy] = receive(dr, "ORDERS", 1)
    assert copy.headers["correlation-id"] == key
    assert len(receive(primary, "ORDERS", 1)) == 1
