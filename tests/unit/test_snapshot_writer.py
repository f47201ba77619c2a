"""Snapshot parts: every key they are written under fits S3's limit, whatever the queue's name."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from brokersync.snapshot.writer import MAX_PREFIX_BYTES, S3_MAX_KEY_BYTES, PartWriter, snapshot_broker
from brokersync.topology import MAX_QUEUE_NAME_LENGTH, load_topology


class _NoBrowse:
    """A browser that must never be asked: the prefix is refused before any queue is browsed."""

    def lines(self, queue: Any) -> Any:
        raise AssertionError(f"browsed {queue.name} with a prefix that cannot be written")


def test_the_longest_prefix_and_queue_name_make_a_part_key_s3_accepts() -> None:
    keys: list[str] = []
    writer = PartWriter(lambda key, body: keys.append(key), "s" * MAX_PREFIX_BYTES, "Q" * MAX_QUEUE_NAME_LENGTH, 1)

    writer.add({"message_id": "ID:x"})
    writer.flush()

    assert [len(key.encode()) for key in keys] == [S3_MAX_KEY_BYTES]


def test_a_prefix_too_long_for_s3_is_refused_before_anything_is_browsed_or_written(topology_path: Path) -> None:
    topology = load_topology(topology_path)
    written: list[str] = []

    with pytest.raises(ValueError, match="at most"):
        snapshot_broker(
            topology, topology.dr, _NoBrowse(), lambda key, body: written.append(key), "s" * (MAX_PREFIX_BYTES + 1)
        )

    assert written == []
