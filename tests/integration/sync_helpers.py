"""Capture and purge run in the test's own process, to the end: what several broker tests need."""

from __future__ import annotations

import time

from brokersync.broker.stomp import StompConnector
from brokersync.capture.relay import AdvisoryRelay, RelaySettings
from brokersync.capture.writer import LedgerWriter
from brokersync.ledger import Ledger
from brokersync.purge.remover import SelectorRemover
from brokersync.purge.service import PurgeService, PurgeSettings
from brokersync.topology import Topology

#: Short relay passes, so a test waits for advisories, not for batches to fill.
FAST = RelaySettings(batch_size=500, flush_interval_s=0.05, stall_timeout_s=5)


def capture_and_purge(
    topology: Topology, primary: StompConnector, dr: StompConnector, ledger: Ledger, queue: str = "ORDERS"
) -> PurgeService:
    """Relay every advisory, then purge until nothing is pending any more."""
    relay = AdvisoryRelay(primary, LedgerWriter(ledger), topology, settings=FAST)
    for _ in range(30):
        if relay.run(max_seconds=1.0).captured == 0:
            break
    purge = PurgeService(ledger, SelectorRemover(dr), topology, settings=PurgeSettings(retry_not_found_s=0))
    deadline = time.monotonic() + 30
    while ledger.pending(queue) and time.monotonic() < deadline:
        purge.purge_queue(queue)
    assert ledger.pending(queue) == [], "consumed messages stayed pending"
    return purge
