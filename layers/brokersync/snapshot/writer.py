"""Writing a broker's snapshot to S3 as gzipped JSON-lines parts.

Parts hold at most ``part_lines`` lines, so a snapshot of any depth needs the memory of one
part; the reconciliation reads ``<prefix>/<queue>/part-*.jsonl.gz`` with an explicit glob.
A ``_SUCCESS.json`` manifest per snapshot says when it was taken, from which broker, how
many lines each queue had, and whether a queue may have been cut at the browse limit.
"""

from __future__ import annotations

import gzip
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from brokersync.snapshot.browser import QueueBrowser
from brokersync.topology import MAX_QUEUE_NAME_LENGTH, Broker, Topology

#: ActiveMQ's default maxBrowsePageSize: a queue browsed to exactly this many may be cut.
DEFAULT_BROWSE_LIMIT = 400
DEFAULT_PART_LINES = 50_000
#: S3's limit on an object key, in bytes.
S3_MAX_KEY_BYTES = 1024
_PART_NAME = "part-{:05d}.jsonl.gz"
#: Longest prefix whose part keys fit S3's limit for every queue name a topology accepts:
#: ``<prefix>/<queue>/part-NNNNN.jsonl.gz``. A longer one would fail at the first part, after the
#: browse of the first queue, so it is refused before anything is browsed.
MAX_PREFIX_BYTES = S3_MAX_KEY_BYTES - MAX_QUEUE_NAME_LENGTH - len("//") - len(_PART_NAME.format(0))


@dataclass
class SnapshotReport:
    broker: str
    prefix: str
    started_ms: int
    finished_ms: int = 0
    lines: dict[str, int] = field(default_factory=dict)
    parts: list[str] = field(default_factory=list)
    possibly_truncated: list[str] = field(default_factory=list)

    def manifest(self) -> dict[str, Any]:
        return {
            "broker": self.broker,
            "started_ms": self.started_ms,
            "finished_ms": self.finished_ms,
            "lines": self.lines,
            "parts": self.parts,
            "possibly_truncated": self.possibly_truncated,
        }


class PartWriter:
    """Buffers lines of one queue and writes a gzipped part whenever ``part_lines`` are held."""

    def __init__(self, put: Callable[[str, bytes], None], prefix: str, queue: str, part_lines: int) -> None:
        self.put = put
        self.prefix = prefix.rstrip("/")
        self.queue = queue
        self.part_lines = part_lines
        self.buffer: list[str] = []
        self.parts: list[str] = []
        self.count = 0

    def add(self, line: dict[str, Any]) -> None:
        self.buffer.append(json.dumps(line, separators=(",", ":")))
        self.count += 1
        if len(self.buffer) >= self.part_lines:
            self.flush()

    def flush(self) -> None:
        if not self.buffer:
            return
        key = f"{self.prefix}/{self.queue}/{_PART_NAME.format(len(self.parts))}"
        self.put(key, gzip.compress(("\n".join(self.buffer) + "\n").encode("utf-8"), compresslevel=6))
        self.parts.append(key)
        self.buffer = []


def snapshot_broker(
    topology: Topology,
    broker: Broker,
    browser: QueueBrowser,
    put: Callable[[str, bytes], None],
    prefix: str,
    *,
    part_lines: int = DEFAULT_PART_LINES,
    browse_limit: int | None = None,
) -> SnapshotReport:
    """Browse every synced queue on ``broker`` into parts under ``prefix``; write the manifest last."""
    prefix_bytes = len(prefix.rstrip("/").encode())  # the part keys' own measure of it (PartWriter)
    if prefix_bytes > MAX_PREFIX_BYTES:
        raise ValueError(f"a snapshot prefix has at most {MAX_PREFIX_BYTES} bytes (S3 keys), not {prefix_bytes}")
    limit = browse_limit or (topology.tuning.dr.max_browse_page_size if broker.role == "dr" else DEFAULT_BROWSE_LIMIT)
    report = SnapshotReport(broker=broker.name, prefix=prefix, started_ms=int(time.time() * 1000))
    for queue in topology.queues:
        if not queue.captures_consumed:  # mirror queues are consumed on both sides: nothing to reconcile
            continue
        writer = PartWriter(put, prefix, queue.name, part_lines)
        for line in browser.lines(queue):
            writer.add(line.as_dict())
        writer.flush()
        report.lines[queue.name] = writer.count
        report.parts.extend(writer.parts)
        if writer.count >= limit:
            report.possibly_truncated.append(queue.name)
    report.finished_ms = int(time.time() * 1000)
    put(f"{prefix.rstrip('/')}/_SUCCESS.json", json.dumps(report.manifest(), indent=2).encode("utf-8"))
    return report
