"""What the late-copy sweep's ledger lookups cost: each copy looked up alone, against a queue's copies together.

The sweep (``brokersync.purge.late_copies``) asks the ledger, for each redelivered copy on a
DR queue, whether its message was consumed. A message-id key carries no time, so each of
those lookups reads the queue's whole ``DEFAULT_CONSUME_LAG`` (15 minutes) of the ledger back
from now; a ULID key reads 15 minutes from its creation. Side by side, in one run, on the
same ledger in moto's DynamoDB (in process: real botocore requests, moto answering them):

* ``one_by_one``: ``consumed_entries`` per copy, as the sweep asked until decision 0030;
* ``together``: one ``consumed_entries_of`` for all of them, as the sweep asks now.

The ledger holds ``--minutes`` of a message-id keyed queue consumed at ``--rate`` msg/s, and
the copies are ``--copies`` redelivered messages of it, half of them consumed in that time
(found) and half not (a backlog's). Both ways must give the same answers; the figures are
this process's CPU-seconds (the kernel's accounting) and the capture items read, per lookup
of every copy. A lookup on AWS pays the same items in read units and in round trips.

Run: ``.venv/bin/python bench/late_copy_lookups.py [--rate 50] [--minutes 15] [--copies 20] [--repeat 3]``
(writes bench/results/late_copy_lookups.json; ``--no-record`` to only print)
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import boto3
from moto import mock_aws

from brokersync.ledger import Ledger, LedgerEntry, dynamodb_ledger
from brokersync.ledger.ledger import DEFAULT_CONSUME_LAG
from brokersync.ledger.schema import create_ledger_table
from brokersync_ci import bench_results

ROOT = Path(__file__).resolve().parent.parent
TABLE = "brokersync-bench-late-copies"
QUEUE = "PAYMENTS"
#: The shape the Java client gives a message id; one producer, a sequence per message.
MESSAGE_ID = "ID:ip-10-0-1-23.ec2.internal-38123-1795340000000-3:1:1:1:{}"
RECORD_BATCH = 2_000


def _filled_ledger(rate: float, minutes: float, now: float) -> tuple[Ledger, list[str]]:
    """A fresh ledger table holding ``minutes`` of ``QUEUE`` consumed at ``rate``; the message ids, oldest first."""
    client = boto3.client("dynamodb", region_name="us-east-1")
    create_ledger_table(client, TABLE, ROOT / "template.yaml")
    ledger = dynamodb_ledger(TABLE, region="us-east-1", clock=lambda: now)
    count = int(rate * minutes * 60)
    start_ms = int(now * 1000 - minutes * 60_000)
    ids = [MESSAGE_ID.format(n) for n in range(count)]
    for first in range(0, count, RECORD_BATCH):
        batch = ids[first : first + RECORD_BATCH]
        entries = [LedgerEntry(m, start_ms + int((first + i) * 1000 / rate), m) for i, m in enumerate(batch)]
        ledger.record(QUEUE, entries)
    return ledger, ids


def _counted_reads(ledger: Ledger) -> list[int]:
    """Counts the capture items every range read of ``ledger`` returns (one entry per read)."""
    reads: list[int] = []
    original = ledger.backend.captured_range

    def counted(*args: Any) -> Any:
        items = list(original(*args))
        reads.append(len(items))
        return iter(items)

    ledger.backend.captured_range = counted  # type: ignore[method-assign]
    return reads


def _cost(run: Callable[[], dict[str, list[LedgerEntry]]], reads: list[int]) -> tuple[dict[str, Any], Any]:
    reads.clear()
    cpu, wall = time.process_time(), time.perf_counter()
    answers = run()
    return {
        "cpu_s": round(time.process_time() - cpu, 4),
        "wall_s": round(time.perf_counter() - wall, 4),
        "range_reads": len(reads),
        "capture_items_read": sum(reads),
    }, answers


def measure(rate: float, minutes: float, copies: int) -> dict[str, Any]:
    now = time.time()
    with mock_aws():
        ledger, ids = _filled_ledger(rate, minutes, now)
        consumed = ids[:: max(1, len(ids) // max(1, copies // 2))][: copies // 2]
        unconsumed = [MESSAGE_ID.format(len(ids) + n) for n in range(copies - len(consumed))]
        keys = consumed + unconsumed
        reads = _counted_reads(ledger)
        window = DEFAULT_CONSUME_LAG
        one_by_one, alone = _cost(lambda: {k: ledger.consumed_entries(QUEUE, k, window) for k in keys}, reads)
        together, batched = _cost(lambda: ledger.consumed_entries_of(QUEUE, keys, window), reads)
    if alone != batched:
        raise SystemExit("the two ways answered differently: the batched lookup is wrong")
    found = sum(1 for k in keys if batched[k])
    return {
        "rate": rate,
        "minutes": minutes,
        "window_minutes": window / timedelta(minutes=1),
        "copies": len(keys),
        "found_consumed": found,
        "one_by_one": one_by_one,
        "together": together,
        "cpu_ratio": round(one_by_one["cpu_s"] / together["cpu_s"], 1) if together["cpu_s"] else None,
        "items_ratio": round(one_by_one["capture_items_read"] / together["capture_items_read"], 1)
        if together["capture_items_read"]
        else None,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=float, default=50.0, help="msg/s the queue was consumed at (50)")
    parser.add_argument("--minutes", type=float, default=15.0, help="minutes of ledger before now (15)")
    parser.add_argument("--copies", type=int, default=20, help="redelivered copies looked up (20)")
    bench_results.add_arguments(parser, "late_copy_lookups", repeat=3)
    args = parser.parse_args()
    if args.rate <= 0 or args.minutes <= 0 or args.copies < 2:
        parser.error("--rate and --minutes must be more than 0, --copies at least 2")
    result = bench_results.run_repeated(
        lambda: measure(args.rate, args.minutes, args.copies),
        args.repeat,
        lambda line: print(line, file=sys.stderr, flush=True),
    )
    return bench_results.finish("late_copy_lookups", result, args)


if __name__ == "__main__":
    sys.exit(bench_results.exit_code(main))
