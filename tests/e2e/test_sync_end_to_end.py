"""Copy, capture and purge together: after the load stops, DR holds exactly what the primary still holds."""

from __future__ import annotations

import threading
import time

import pytest
import stomp
from ulid import ULID

from brokersync.broker.statistics import StatisticsClient
from brokersync.broker.stomp import StompConnector
from brokersync.capture.relay import AdvisoryRelay, RelaySettings
from brokersync.capture.writer import LedgerWriter
from brokersync.ledger import Ledger
from brokersync.purge.remover import SelectorRemover
from brokersync.purge.service import PurgeService, PurgeSettings
from brokersync.topology import Topology
from brokersync_local.browsing import browse
from tests.integration.stomp_helpers import receive

pytestmark = pytest.mark.broker

PRODUCED_PER_QUEUE = 300
CONSUMED_PER_QUEUE = 180


class _Loop(threading.Thread):
    """Runs a relay or purge pass over and over until stopped, like the deployed loops do."""

    def __init__(self, step: object) -> None:
        super().__init__(daemon=True)
        self.step = step
        self.stop = threading.Event()
        self.errors: list[BaseException] = []

    def run(self) -> None:
        while not self.stop.is_set():
            try:
                self.step(self.stop)  # type: ignore[operator]
            except BaseException as e:
                self.errors.append(e)
                return


def _produce(primary: StompConnector, rate_per_s: float) -> None:
    connection = primary.connect(name="e2e-producer")
    interval = 1 / rate_per_s
    for index in range(PRODUCED_PER_QUEUE):
        for queue in ("ORDERS", "PAYMENTS", "AUDIT"):
            headers = {"persistent": "true"}
            if queue != "PAYMENTS":
                headers["correlation-id"] = str(ULID())
            connection.send(f"/queue/{queue}", f"{queue}-{index}", headers=headers)
        time.sleep(interval)
    connection.disconnect()


def _ids(frames: list[stomp.utils.Frame], queue: str) -> set[str]:
    header = "message-id" if queue == "PAYMENTS" else "correlation-id"
    return {f.headers[header] for f in frames}


def test_after_the_load_dr_holds_exactly_the_messages_still_on_the_primary(
    topology: Topology, primary: StompConnector, dr: StompConnector, ledger: Ledger
) -> None:
    relay = AdvisoryRelay(primary, LedgerWriter(ledger), topology, settings=RelaySettings(flush_interval_s=0.1))
    purge = PurgeService(ledger, SelectorRemover(dr), topology, settings=PurgeSettings(idle_sleep_s=0.05))
    loops = [
        _Loop(lambda stop: relay.run(max_seconds=5, stop=stop)),
        _Loop(lambda stop: purge.run(max_seconds=1)),
    ]
    for loop in loops:
        loop.start()
    producer = threading.Thread(target=_produce, args=(primary, 150.0))
    producer.start()
    consumed: dict[str, list[stomp.utils.Frame]] = {}
    for queue in ("ORDERS", "PAYMENTS", "AUDIT"):
        consumed[queue] = receive(primary, queue, CONSUMED_PER_QUEUE, timeout_s=30)
    producer.join(timeout=60)

    dr_stats, primary_stats = StatisticsClient(dr), StatisticsClient(primary)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        on_dr = dr_stats.queue_stats(["ORDERS", "PAYMENTS"])
        on_primary = primary_stats.queue_stats(["ORDERS", "PAYMENTS"])
        if all(on_dr[q].size == on_primary[q].size for q in ("ORDERS", "PAYMENTS")):
            break
        time.sleep(0.5)
    for loop in loops:
        loop.stop.set()
        loop.join(timeout=30)

    assert [loop.errors for loop in loops] == [[], []]
    for queue in ("ORDERS", "PAYMENTS"):
        left_on_primary = browse(primary, queue)
        left_on_dr = browse(dr, queue)
        assert len(left_on_primary) == PRODUCED_PER_QUEUE - CONSUMED_PER_QUEUE
        assert _ids(left_on_dr, queue) == _ids(left_on_primary, queue), queue
        assert all(f.headers.get("redelivered", "false") == "false" for f in left_on_dr), queue
    assert len(browse(dr, "AUDIT")) == PRODUCED_PER_QUEUE, "a mirror queue is copied and never purged"
