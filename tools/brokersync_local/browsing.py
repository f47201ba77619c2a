"""Reading a queue without changing it: ActiveMQ's STOMP browser subscription.

A browse is the one read that leaves a message exactly as it was (no delivery, no redelivery
counter), so the demo, the drill and the tests look at brokers only this way.
"""

from __future__ import annotations

import time

import stomp

from brokersync.broker.stomp import StompConnector
from brokersync_local.errors import LocalWorldError


class _Browser(stomp.ConnectionListener):
    def __init__(self) -> None:
        self.frames: list[stomp.utils.Frame] = []
        self.done = False

    def on_message(self, frame: stomp.utils.Frame) -> None:
        if frame.headers.get("browser") == "end":
            self.done = True
        else:
            self.frames.append(frame)


def browse(
    connector: StompConnector, queue: str, timeout_s: float = 10.0, *, partial_ok: bool = False
) -> list[stomp.utils.Frame]:
    """Every message on ``queue`` without consuming it (ActiveMQ's STOMP browser subscription).

    A browse that does not reach the broker's end marker in time raises, unless ``partial_ok``
    (a live view): counted as complete, a cut browse would hide what a drill exists to find.
    """
    browser = _Browser()
    connection = connector.connect(browser, name="brokersync-demo-browser")
    try:
        connection.subscribe(f"/queue/{queue}", id="browse", ack="auto", headers={"browser": "true"})
        deadline = time.monotonic() + timeout_s
        while not browser.done and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        connection.disconnect()
    if not browser.done and not partial_ok:
        raise LocalWorldError(
            f"browsing {queue} did not finish within {timeout_s:.0f}s ({len(browser.frames)} messages read)"
        )
    return browser.frames
