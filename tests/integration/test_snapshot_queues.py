"""Queue snapshots on a real DR broker: every message as a line, parts bounded, nothing changed."""

from __future__ import annotations

import gzip
import json

import pytest
from ulid import ULID

from brokersync.broker.stomp import StompConnector
from brokersync.snapshot import QueueBrowser, snapshot_broker
from brokersync.topology import Topology
from brokersync_local.browsing import browse
from tests.integration.stomp_helpers import send

pytestmark = pytest.mark.broker


def _fill(dr: StompConnector, count: int) -> list[str]:
    keys = [str(ULID()) for _ in range(count)]
    for key in keys:
        send(dr, "ORDERS", f"body {key}", {"correlation-id": key, "persistent": "true"})
    return keys


def _lines(store: dict[str, bytes], queue: str) -> list[dict[str, object]]:
    parts = sorted(k for k in store if f"/{queue}/part-" in k)
    return [json.loads(line) for k in parts for line in gzip.decompress(store[k]).decode().splitlines()]


def test_every_message_on_a_synced_queue_becomes_one_line_keyed_as_the_ledger_keys_it(
    topology: Topology, dr: StompConnector
) -> None:
    keys = _fill(dr, 25)
    store: dict[str, bytes] = {}

    report = snapshot_broker(topology, topology.dr, QueueBrowser(dr), store.__setitem__, "snap/1/dr")

    lines = _lines(store, "ORDERS")
    assert sorted(line["key"] for line in lines) == sorted(keys)
    assert all(line["size"] == len(f"body {line['key']}") and line["timestamp"] > 0 for line in lines)
    assert report.lines == {"ORDERS": 25, "PAYMENTS": 0}
    assert json.loads(store["snap/1/dr/_SUCCESS.json"])["lines"]["ORDERS"] == 25


def test_a_snapshot_changes_nothing_on_the_broker(topology: Topology, dr: StompConnector) -> None:
    _fill(dr, 10)

    snapshot_broker(topology, topology.dr, QueueBrowser(dr), {}.__setitem__, "snap/2/dr")

    frames = browse(dr, "ORDERS")
    assert len(frames) == 10
    assert all(f.headers.get("redelivered", "false") == "false" for f in frames)


def test_parts_hold_at_most_part_lines_so_memory_is_bounded(topology: Topology, dr: StompConnector) -> None:
    _fill(dr, 25)
    store: dict[str, bytes] = {}

    report = snapshot_broker(topology, topology.dr, QueueBrowser(dr), store.__setitem__, "snap/3/dr", part_lines=10)

    assert [len(gzip.decompress(store[k]).decode().splitlines()) for k in report.parts] == [10, 10, 5]


def test_a_browse_that_reaches_the_page_limit_is_reported_as_possibly_cut(
    topology: Topology, dr: StompConnector
) -> None:
    _fill(dr, 12)
    store: dict[str, bytes] = {}

    report = snapshot_broker(topology, topology.dr, QueueBrowser(dr), store.__setitem__, "snap/4/dr", browse_limit=12)

    assert report.possibly_truncated == ["ORDERS"]
