"""The sync bench's relay and purge, each in a process of its own, on the code and Python Lambda runs.

``bench/sync.py`` starts this script twice per step: ``relay`` and ``purge``. By default it runs
under python3.13 with ``-I -S`` and only ``sam build``'s layer on ``sys.path``, as the relay and
purge functions run in Lambda (:mod:`brokersync_local.function_code`, decision 0044), so their
CPU figures are the deployed package's on the deployed runtime. With
``BROKERSYNC_LOCAL_FUNCTIONS=source`` the bench runs it under the virtualenv's Python on
``layers/`` instead. It imports nothing but the standard library until the layer is on its path.

    python3.13 -I -S -u bench/sync_functions.py LAYER_DIR relay|purge REPLY_FD < config

The first line on stdin is the step's configuration (``{"topology": ..., "endpoint": ...}``); a
second line, or the end of stdin, stops it. Replies are JSON lines on ``REPLY_FD`` (stdout and
stderr are the library's logs): ``{"ready": true}``, then, for the purge, ``{"purged": N}`` as
removals are confirmed, and last ``{"result": {...}}`` with what it counted.
"""

from __future__ import annotations

import contextlib
import cProfile
import json
import os
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

#: A folder: the relay and the purge write a cProfile of each step there (see ``profiled``).
ENV_PROFILE = "BROKERSYNC_BENCH_PROFILE"
#: Set by ``--ledger-shards`` for the relay and purge processes.
ENV_LEDGER_SHARDS = "BROKERSYNC_BENCH_LEDGER_SHARDS"
#: Queues the relay's writes and audit counts and the purge's rounds work on at once (``--queue-workers``).
ENV_QUEUE_WORKERS = "BROKERSYNC_BENCH_QUEUE_WORKERS"
#: The relay's read pause in milliseconds (``--relay-read-pause-ms``).
ENV_RELAY_READ_PAUSE_MS = "BROKERSYNC_BENCH_RELAY_READ_PAUSE_MS"
#: "1": the purge opens a DR connection per removal call (``--purge-connection-per-call``).
ENV_PURGE_CONNECTION_PER_CALL = "BROKERSYNC_BENCH_PURGE_CONNECTION_PER_CALL"
#: "1": the purge's connections leave Nagle and the delayed ACK on (``--purge-tcp-delays``).
ENV_PURGE_TCP_DELAYS = "BROKERSYNC_BENCH_PURGE_TCP_DELAYS"
TABLE = "brokersync-bench-ledger"
REGION = "us-east-1"


class Tally:
    """A number the relay's or the purge's threads add to (``get_lock`` as a shared value has it)."""

    def __init__(self) -> None:
        self.value: float = 0
        self._lock = threading.Lock()

    def get_lock(self) -> threading.Lock:
        return self._lock


class Replies:
    """JSON lines to the bench, one writer at a time."""

    def __init__(self, fd: int) -> None:
        self._out = os.fdopen(fd, "w", encoding="utf-8", buffering=1)
        self._lock = threading.Lock()

    def send(self, **reply: Any) -> None:
        with self._lock:
            self._out.write(json.dumps(reply) + "\n")


class CountingLedger:
    """The ledger with its write units counted (by DynamoDB's rules, per request) and its ``pending`` calls."""

    def __init__(self, inner: Any, write_units: Tally, reads: Tally) -> None:
        self.inner = inner
        self.write_units = write_units
        self.reads = reads
        # ``pending`` deletes the work pointers it finished inside the ledger, where no report
        # counts them; DynamoDB bills a delete by the item it removes, and a pointer is under 1 KB.
        backend = inner.backend
        delete_pointer = backend.delete_pointer

        def counted_delete(queue: str, sk: str) -> None:
            delete_pointer(queue, sk)
            with write_units.get_lock():
                write_units.value += 1

        backend.delete_pointer = counted_delete

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def _count(self, report: Any) -> Any:
        with self.write_units.get_lock():
            self.write_units.value += report.write_units
        return report

    def record(self, *args: Any, **kwargs: Any) -> Any:
        return self._count(self.inner.record(*args, **kwargs))

    def mark_purged(self, *args: Any, **kwargs: Any) -> Any:
        return self._count(self.inner.mark_purged(*args, **kwargs))

    def mark_missing(self, *args: Any, **kwargs: Any) -> Any:
        return self._count(self.inner.mark_missing(*args, **kwargs))

    def pending(self, *args: Any, **kwargs: Any) -> Any:
        with self.reads.get_lock():
            self.reads.value += 1
        return self.inner.pending(*args, **kwargs)


class CountingAudits:
    """The ledger's capture-audit items with their writes counted: one write unit each (an item under 1 KB)."""

    def __init__(self, inner: Any, write_units: Tally) -> None:
        self.inner = inner
        self.write_units = write_units

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def _count(self) -> None:
        with self.write_units.get_lock():
            self.write_units.value += 1

    def add_audit(self, *args: Any, **kwargs: Any) -> Any:
        self._count()
        return self.inner.add_audit(*args, **kwargs)

    def set_audit(self, *args: Any, **kwargs: Any) -> Any:
        self._count()
        return self.inner.set_audit(*args, **kwargs)


class LedgerCalls:
    """The ledger's DynamoDB calls by operation, as botocore is asked for them (a retry is not another call).

    What the relay's and the purge's CPU per message is partly made of: each call costs the
    process about a millisecond (decision 0046, ``bench/ledger_requests.py``).
    """

    def __init__(self) -> None:
        self.by_operation: Counter[str] = Counter()
        self._lock = threading.Lock()

    def watch(self, ledger: Any) -> None:
        """Count every call the ledger's DynamoDB client makes from now on."""
        client = ledger.backend.model._get_connection().connection.client
        client.meta.events.register("before-call.dynamodb", self._count)

    def _count(self, model: Any, **_: Any) -> None:
        with self._lock:
            self.by_operation[model.name] += 1


@contextlib.contextmanager
def profiled(name: str) -> Iterator[None]:
    """With ``BROKERSYNC_BENCH_PROFILE=DIR``, a cProfile of the block into ``DIR/<name>-<pid>.prof``.

    Where a process's CPU goes, measured in the process as it runs in the bench; off by
    default, since profiling slows the process it measures.
    """
    folder = os.environ.get(ENV_PROFILE)
    if not folder:
        yield
        return
    profile = cProfile.Profile()
    profile.enable()
    try:
        yield
    finally:
        profile.disable()
        Path(folder).mkdir(parents=True, exist_ok=True)
        profile.dump_stats(Path(folder) / f"{name}-{os.getpid()}.prof")


def _bench_ledger(endpoint: str) -> Any:
    """The ledger as the relay and the purge use it, with the run's shard count (both must agree)."""
    from brokersync.ledger import dynamodb_ledger  # noqa: PLC0415 (the layer is on the path only now)
    from brokersync.ledger.ledger import DEFAULT_SHARDS  # noqa: PLC0415

    shards = int(os.environ.get(ENV_LEDGER_SHARDS, DEFAULT_SHARDS))
    return dynamodb_ledger(TABLE, region=REGION, host=endpoint, shards=shards)


def queue_workers() -> int:
    """The run's queues at once: the product's unless ``--queue-workers`` measures another."""
    from brokersync.side_by_side import QUEUE_WORKERS  # noqa: PLC0415 (the layer is on the path only now)

    return int(os.environ.get(ENV_QUEUE_WORKERS, QUEUE_WORKERS))


def relay_read_pause_ms() -> float:
    """The relay's read pause: the product's unless ``--relay-read-pause-ms`` measures another."""
    from brokersync.capture.relay import RelaySettings  # noqa: PLC0415 (the layer is on the path only now)

    return float(os.environ.get(ENV_RELAY_READ_PAUSE_MS, RelaySettings().read_pause_s * 1000))


def purge_keeps_connections() -> bool:
    """Whether the purge keeps its DR connection from round to round: the product's unless
    ``--purge-connection-per-call`` measures a connection per removal call."""
    from brokersync.purge.remover import RemoverSettings  # noqa: PLC0415 (the layer is on the path only now)

    return RemoverSettings().keep_connections and os.environ.get(ENV_PURGE_CONNECTION_PER_CALL) != "1"


def purge_without_tcp_delays() -> bool:
    """Whether the purge's DR connections turn off Nagle and the delayed ACK: the product's unless
    ``--purge-tcp-delays`` measures them left on."""
    from brokersync.purge.remover import RemoverSettings  # noqa: PLC0415 (the layer is on the path only now)

    return RemoverSettings().no_tcp_delays and os.environ.get(ENV_PURGE_TCP_DELAYS) != "1"


def relay_main(topology: Any, endpoint: str, stop: threading.Event, replies: Replies) -> dict[str, Any]:
    """The relay as its scheduled function runs it: built as the function builds it (its statistics
    reads and its capture audit, written per batch and checked per invocation), its settings,
    passes of its length, again and again."""
    from brokersync.broker.statistics import StatisticsClient  # noqa: PLC0415
    from brokersync.broker.stomp import StompConnector  # noqa: PLC0415
    from brokersync.capture.audit import CaptureAudit  # noqa: PLC0415
    from brokersync.capture.relay import AdvisoryRelay, RelaySettings  # noqa: PLC0415
    from brokersync.capture.writer import LedgerWriter  # noqa: PLC0415
    from brokersync.config import DEFAULT_RELAY_MAX_SECONDS  # noqa: PLC0415
    from brokersync.exceptions import BrokerSyncError  # noqa: PLC0415

    units, reads, calls = Tally(), Tally(), LedgerCalls()
    ledger = CountingLedger(_bench_ledger(endpoint), units, reads)
    calls.watch(ledger)
    primary = StompConnector(topology.primary.stomp)
    statistics = StatisticsClient(primary)
    workers = queue_workers()
    audit = CaptureAudit(
        CountingAudits(ledger.backend, units),  # type: ignore[arg-type]
        statistics,
        topology,
        queue_workers=workers,
    )
    writer = LedgerWriter(ledger, queue_workers=workers)
    settings = RelaySettings(read_pause_s=relay_read_pause_ms() / 1000)
    relay = AdvisoryRelay(primary, writer, topology, settings=settings, statistics=statistics, audit=audit)
    replies.send(ready=True)
    with profiled("relay"):
        while not stop.is_set():
            try:
                relay.run(max_seconds=DEFAULT_RELAY_MAX_SECONDS, stop=stop)
                audit.check()
            except BrokerSyncError:
                stop.wait(1.0)
    return {"units": units.value, "reads": reads.value, "calls": dict(calls.by_operation)}


def purge_main(topology: Any, endpoint: str, stop: threading.Event, replies: Replies) -> dict[str, Any]:
    """The purge as its loop runs it, against the ledger in DynamoDB; reports when each id was removed.

    Each invocation's service is built as the function builds it: with both brokers' statistics
    (the depths it reads and emits) and the late-copy sweep, whose state, like the ids not found,
    outlives an invocation in a warm environment.
    """
    from brokersync.broker.statistics import StatisticsClient  # noqa: PLC0415
    from brokersync.broker.stomp import StompConnector  # noqa: PLC0415
    from brokersync.config import DEFAULT_PURGE_MAX_SECONDS  # noqa: PLC0415
    from brokersync.exceptions import BrokerSyncError  # noqa: PLC0415
    from brokersync.purge.late_copies import LateCopySweep  # noqa: PLC0415
    from brokersync.purge.remover import (  # noqa: PLC0415
        PurgeInvariantError,
        RemovalResult,
        RemoverSettings,
        SelectorRemover,
    )
    from brokersync.purge.service import PurgeService, PurgeSettings  # noqa: PLC0415

    class TimedRemover(SelectorRemover):
        """Records when each message id was removed, for the lag figures, and what each call did.

        The tallies say where the DR broker's depth-dependent work comes from: every dispatch pass
        walks the whole backlog once per open subscription that is not yet full, and a
        subscription is not full while some of its ids are not on DR (it then waits out the
        remover's settle time, and every copy that arrives meanwhile starts another pass).
        """

        def __init__(self, connector: StompConnector) -> None:
            super().__init__(
                connector,
                RemoverSettings(keep_connections=purge_keeps_connections(), no_tcp_delays=purge_without_tcp_delays()),
            )
            self.removed_at: dict[str, float] = {}
            self._lock = threading.Lock()  # a round's queues remove side by side
            self.tally = {
                "calls": 0, "subscriptions": 0, "ids": 0, "not_found": 0, "calls_not_all_found": 0, "open_s": 0.0
            }  # fmt: skip

        def remove(self, queue: str, keys: list[str], *, deadline: float | None = None) -> RemovalResult:
            result = super().remove(queue, keys, deadline=deadline)
            now = time.time()
            with self._lock:
                for key in result.removed:
                    self.removed_at.setdefault(key, now)
                replies.send(purged=len(self.removed_at))
                self.tally["calls"] += 1
                self.tally["subscriptions"] += result.subscriptions
                self.tally["ids"] += len(keys)
                self.tally["not_found"] += len(result.not_found)
                self.tally["calls_not_all_found"] += bool(result.not_found)
                self.tally["open_s"] += result.elapsed_s
            return result

    units, reads, calls = Tally(), Tally(), LedgerCalls()
    ledger = CountingLedger(_bench_ledger(endpoint), units, reads)
    calls.watch(ledger)
    dr = StompConnector(topology.dr.stomp)
    remover = TimedRemover(dr)
    sweep = LateCopySweep()
    not_found: dict[str, dict[str, float]] = {}
    errors: list[str] = []
    replies.send(ready=True)
    with profiled("purge"):
        while not stop.is_set():
            purge = PurgeService(
                ledger,  # type: ignore[arg-type]
                remover,
                topology,
                settings=PurgeSettings(queue_workers=queue_workers()),
                dr_statistics=StatisticsClient(dr),
                primary_statistics=StatisticsClient(StompConnector(topology.primary.stomp)),
                late_copies=sweep,
                waiting=not_found,
            )
            try:
                purge.run(max_seconds=DEFAULT_PURGE_MAX_SECONDS, stop=stop)
            except PurgeInvariantError as e:
                errors.append(f"PurgeInvariantError: {e}")
                break
            except BrokerSyncError as e:
                errors.append(f"{type(e).__name__}: {e}")
                stop.wait(1.0)
    return {
        "units": units.value,
        "reads": reads.value,
        "calls": dict(calls.by_operation),
        "removed_at": remover.removed_at,
        "errors": errors,
        "remover": remover.tally,
    }


def main() -> None:
    layer, role, reply_fd = sys.argv[1], sys.argv[2], int(sys.argv[3])
    sys.path.insert(0, layer)
    from brokersync.topology import parse_topology  # noqa: PLC0415 (the layer is on the path only now)

    replies = Replies(reply_fd)
    config = json.loads(sys.stdin.readline())
    topology = parse_topology(config["topology"], source="the bench's topology")
    stop = threading.Event()

    def stop_on_input() -> None:
        sys.stdin.readline()  # a line, or the end of stdin (the bench went away)
        stop.set()

    threading.Thread(target=stop_on_input, daemon=True, name="stop").start()
    run = {"relay": relay_main, "purge": purge_main}[role]
    replies.send(result=run(topology, config["endpoint"], stop, replies))


if __name__ == "__main__":
    main()
