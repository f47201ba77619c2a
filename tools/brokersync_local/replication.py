"""The global-table replication stand-in: two regional DynamoDB endpoints kept in step as AWS does.

moto has DynamoDB tables and their streams, but no global tables: each moto server is one
region's DynamoDB and knows nothing of the other. This stand-in reads every region's table
stream and writes each change into the other regions with the semantics of a multi-region
eventually consistent (MREC) global table:

* **asynchronous**: a change reaches the other region about ``lag_s`` after it was made (AWS:
  "typically within a second"), never at once, so code that reads its own region sees stale items;
* **in order per item, in no order across items**: each change's lag is drawn within
  ``jitter`` of ``lag_s`` (a fraction; a change never overtakes an earlier one of its own
  item), so two items written a moment apart can arrive the other way round, as they can in
  AWS, whose replication keeps no order between items (a work pointer can land before the
  capture write it names);
* **per item, last writer wins**: each change carries its stream timestamp; a change older than the
  version the destination already holds is dropped there (ties go to the higher region name), so
  two regions that wrote one item converge on the later write. Conditional writes are evaluated
  by each region against its own replica only, exactly as in AWS;
* **stalled while a region is unreachable, then catching up**: a region whose endpoint does not
  answer (paused with SIGSTOP, or partitioned) neither sends nor receives; its stream keeps its
  changes and the others keep theirs for it, and both flow once it answers again.

It is not AWS's algorithm (AWS does not publish one), only its documented behaviour, and it
replicates whole items (``NEW_AND_OLD_IMAGES``), as global tables do.
"""

from __future__ import annotations

import argparse
import base64
import collections
import dataclasses
import json
import logging
import random
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import boto3
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

logger = logging.getLogger("brokersync.replication")

DEFAULT_LAG_S = 1.0
#: Each change's lag is ``lag_s`` times a draw from ``[1 - jitter, 1 + jitter]``.
DEFAULT_JITTER = 0.15
#: Images remembered per region and item as our own writes there (a partition's backlog of versions).
ECHOES_KEPT = 64
#: A paused region must not stall the others: every call is one attempt that gives up quickly, and
#: the loop is the retry. (``max_attempts`` would count retries, not attempts: two timeouts a call.)
_CLIENT = Config(
    connect_timeout=1, read_timeout=2, retries={"total_max_attempts": 1}, account_id_endpoint_mode="disabled"
)


@dataclass(frozen=True)
class RegionEndpoint:
    region: str
    url: str

    @classmethod
    def parse(cls, text: str) -> RegionEndpoint:
        region, _, url = text.partition("=")
        if not region or not url:
            raise argparse.ArgumentTypeError(f"expected REGION=URL, got {text!r}")
        return cls(region, url)


@dataclass(order=True)
class Change:
    """One item change read from a region's stream, due in the other regions at ``due``."""

    due: float
    at: float = field(compare=False)
    origin: str = field(compare=False)
    key: str = field(compare=False)
    #: The whole item after the change; None for a delete.
    image: dict[str, Any] | None = field(compare=False)


def _canonical(value: Any) -> str:
    """One text per item image; binary attributes (the ledger's ``B`` values) included."""
    return json.dumps(value, sort_keys=True, default=lambda b: base64.b64encode(bytes(b)).decode())


def _key(keys: dict[str, Any]) -> str:
    return _canonical(keys)


def _timestamp(value: Any) -> float:
    return value.timestamp() if isinstance(value, datetime) else float(value)


class _Region:
    def __init__(self, endpoint: RegionEndpoint, table: str, credentials: dict[str, str]) -> None:
        self.name = endpoint.region
        kwargs = {"region_name": endpoint.region, "endpoint_url": endpoint.url, "config": _CLIENT, **credentials}
        self.dynamodb = boto3.client("dynamodb", **kwargs)
        self.streams = boto3.client("dynamodbstreams", **kwargs)
        self.table = table
        self.stream_arn: str | None = None
        #: Shard id -> last sequence number read.
        self.positions: dict[str, str | None] = {}
        self.reachable = True

    def _stream(self) -> str:
        if self.stream_arn is None:
            streams = self.streams.list_streams(TableName=self.table)["Streams"]
            if not streams:
                raise LookupError(f"{self.table} in {self.name} has no stream (StreamSpecification)")
            self.stream_arn = streams[0]["StreamArn"]
        return self.stream_arn

    def read(self) -> list[dict[str, Any]]:
        """Every stream record written since the last read, in order per shard."""
        arn = self._stream()
        records: list[dict[str, Any]] = []
        for shard in self.streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"]:
            shard_id = shard["ShardId"]
            after = self.positions.get(shard_id)
            position = (
                {"ShardIteratorType": "AFTER_SEQUENCE_NUMBER", "SequenceNumber": after}
                if after
                else {"ShardIteratorType": "TRIM_HORIZON"}
            )
            iterator = self.streams.get_shard_iterator(StreamArn=arn, ShardId=shard_id, **position)["ShardIterator"]
            for _ in range(100):  # bounded: a shard read in pages of up to 1,000 records
                page = self.streams.get_records(ShardIterator=iterator, Limit=1000)
                records.extend(page["Records"])
                if page["Records"]:
                    self.positions[shard_id] = page["Records"][-1]["dynamodb"]["SequenceNumber"]
                iterator = page.get("NextShardIterator")
                if not page["Records"] or not iterator:
                    break
        return records

    def apply(self, change: Change) -> None:
        if change.image is None:
            self.dynamodb.delete_item(TableName=self.table, Key=json.loads(change.key))
        else:
            self.dynamodb.put_item(TableName=self.table, Item=change.image)


class GlobalTableReplication:
    """Replicates one table between regional endpoints; ``step`` once, or ``run`` until stopped."""

    def __init__(
        self,
        table: str,
        endpoints: list[RegionEndpoint],
        *,
        lag_s: float = DEFAULT_LAG_S,
        jitter: float = DEFAULT_JITTER,
        credentials: dict[str, str] | None = None,
        clock: Callable[[], float] = time.time,
        seed: int | None = None,
    ) -> None:
        if len({e.region for e in endpoints}) != len(endpoints) or len(endpoints) < 2:
            raise ValueError("replication needs two or more endpoints of different regions")
        if not 0 <= jitter < 1:
            raise ValueError(f"jitter is a fraction of the lag in [0, 1), got {jitter}")
        creds = credentials or {"aws_access_key_id": "local", "aws_secret_access_key": "local"}
        self.regions = {e.region: _Region(e, table, creds) for e in endpoints}
        self.lag_s = lag_s
        self.jitter = jitter
        self._random = random.Random(seed)
        #: (destination region, item key) -> when its latest change is due: none overtakes another.
        self._due: dict[tuple[str, str], float] = {}
        self.clock = clock
        #: Changes waiting for each destination region.
        self.outbox: dict[str, list[Change]] = {name: [] for name in self.regions}
        #: (region, item key) -> (timestamp, origin) of the version that region holds.
        self.versions: dict[tuple[str, str], tuple[float, str]] = {}
        #: (region, item key) -> the latest images we wrote there, to recognise our own writes in its
        #: stream: a backlog delivered after a partition holds several versions of one item, each an
        #: echo, and one delivery may land more than once.
        self.echoes: dict[tuple[str, str], collections.deque[str | None]] = {}
        #: (region, item key) -> the newest change delivered there.
        self.delivered: dict[tuple[str, str], Change] = {}
        #: Items whose newest delivered version has been seen back in that region's stream.
        self.newest_landed: set[tuple[str, str]] = set()
        self.applied = 0
        self.dropped_older = 0

    def step(self) -> int:
        """Read every reachable region's new changes, then deliver those due; the number delivered.

        A region whose stream did not answer in this step is sent nothing in it either: one
        timeout per step, not two, so a paused region delays reading the others' streams by
        one read timeout at most."""
        answered = [region.name for region in self.regions.values() if self._collect(region)]
        delivered = 0
        now = self.clock()
        for name, waiting in self.outbox.items():
            region = self.regions[name]
            if name not in answered:
                continue  # unreachable: its changes wait, in order, for the step it answers in
            waiting.sort()
            while waiting and waiting[0].due <= now:
                if not self._deliver(region, waiting[0]):
                    break  # unreachable: the rest wait with it, in order
                waiting.pop(0)
                delivered += 1
        return delivered

    def _collect(self, region: _Region) -> bool:
        """Queue the region's new changes for the others; False if its stream did not answer."""
        try:
            records = region.read()
        except (BotoCoreError, ClientError, LookupError) as e:
            self._unreachable(region, e)
            return False
        self._reachable(region)
        for record in records:
            data = record["dynamodb"]
            key = _key(data["Keys"])
            image = data.get("NewImage") if record["eventName"] != "REMOVE" else None
            written = _canonical(image) if image is not None else None
            mine = (region.name, key)
            if written in self.echoes.get(mine, ()):
                # Our own replicated write coming back: not a new change. Kept, not consumed: one
                # delivery can land several times (each attempt that timed out while the region was
                # paused lands when it resumes), and every landing is the same echo.
                latest = self.delivered.get(mine)
                newest = None if latest is None or latest.image is None else _canonical(latest.image)
                if written == newest:
                    self.newest_landed.add(mine)
                elif latest is not None and mine in self.newest_landed:
                    # An older version landed after the newest one (a request that waited out a
                    # pause): the region holds it now, so the newest version goes to it again. An
                    # older echo read before the newest one's is a backlog arriving in order: no resend.
                    self.newest_landed.discard(mine)
                    self.outbox[region.name].append(dataclasses.replace(latest, due=self.clock()))
                continue
            at = _timestamp(data.get("ApproximateCreationDateTime", self.clock()))
            self.versions[mine] = (at, region.name)
            for other in self.regions:
                if other != region.name:
                    self.outbox[other].append(Change(self._due_at(other, key, at), at, region.name, key, image))
        return True

    def _due_at(self, destination: str, key: str, at: float) -> float:
        """When a change made at ``at`` lands in ``destination``: late by a drawn lag, never
        before an earlier change of the same item."""
        lag = self.lag_s * self._random.uniform(1 - self.jitter, 1 + self.jitter)
        due = max(at + lag, self._due.get((destination, key), 0.0))
        self._due[(destination, key)] = due
        return due

    def _deliver(self, region: _Region, change: Change) -> bool:
        held = self.versions.get((region.name, change.key))
        if held is not None and held > (change.at, change.origin):
            self.dropped_older += 1  # the destination holds a later write: last writer wins
            return True
        # The echo is expected before the call: a write that times out may still land (a region
        # paused mid-request processes it when it resumes), and its stream record must then be
        # known as ours. Unrecognised, it would come back as that region's own change, stamped
        # with the time it landed, and overwrite the newer versions its origin wrote meanwhile
        # (the dr-region-loss drill lost capture items' keys this way). An expected echo that
        # never shows costs nothing: the item is written by one region, or the next version differs.
        written = _canonical(change.image) if change.image is not None else None
        expected = self.echoes.setdefault((region.name, change.key), collections.deque(maxlen=ECHOES_KEPT))
        if written not in expected:
            expected.append(written)
        try:
            region.apply(change)
        except (BotoCoreError, ClientError) as e:
            self._unreachable(region, e)
            return False
        self._reachable(region)
        self.versions[(region.name, change.key)] = (change.at, change.origin)
        self.delivered[(region.name, change.key)] = change
        self.newest_landed.discard((region.name, change.key))
        self.applied += 1
        return True

    def _unreachable(self, region: _Region, error: Exception) -> None:
        if region.reachable:
            logger.warning("region %s unreachable, replication to and from it stalls: %s", region.name, error)
        region.reachable = False

    def _reachable(self, region: _Region) -> None:
        if not region.reachable:
            logger.info("region %s reachable again: catching up", region.name)
        region.reachable = True

    def backlog(self) -> dict[str, int]:
        """Changes waiting per destination region (the replication lag a test or a drill reads)."""
        return {name: len(waiting) for name, waiting in self.outbox.items()}

    def run(self, stop: threading.Event, poll_s: float = 0.1) -> None:
        while not stop.is_set():
            self.step()
            stop.wait(poll_s)


def main() -> int:
    parser = argparse.ArgumentParser(description="global-table replication between regional DynamoDB endpoints")
    parser.add_argument("--table", required=True)
    parser.add_argument("--endpoint", action="append", type=RegionEndpoint.parse, required=True, help="REGION=URL")
    parser.add_argument("--lag", type=float, default=DEFAULT_LAG_S, help="seconds before a change reaches a peer")
    parser.add_argument(
        "--jitter",
        type=float,
        default=DEFAULT_JITTER,
        help="each change's lag varies by this fraction of --lag, so items arrive in no order across items",
    )
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    GlobalTableReplication(args.table, args.endpoint, lag_s=args.lag, jitter=args.jitter).run(stop)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
