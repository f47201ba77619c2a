"""Queue snapshots: what is on a broker's synced queues, read without changing anything."""

from brokersync.snapshot.browser import QueueBrowser, SnapshotLine, snapshot_line
from brokersync.snapshot.writer import PartWriter, SnapshotReport, snapshot_broker

__all__ = ["PartWriter", "QueueBrowser", "SnapshotLine", "SnapshotReport", "snapshot_broker", "snapshot_line"]
