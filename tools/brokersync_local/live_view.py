"""What the demo shows while it runs: per queue, how far sync is behind, sampled from the real pair.

Every figure is read from where it lives, never estimated from settings:

* produced / consumed: what the demo's applications saw (a message counts as produced when
  the broker's receipt confirmed it, as consumed when the consumer's ack was written);
* on DR: the depth of the queue on the broker playing DR (broker statistics);
* pending purge and its oldest age: the ledger, as the purge loop reads it;
* loss risk: copies still in ``Q.DR`` on the primary, not yet bridged (broker statistics);
* lag p50/p99: from the consume on the primary to the copy's removal from DR, observed by
  browsing DR about four times a second (so each figure is accurate to about 0.25 s).
"""

from __future__ import annotations

import statistics as stats_mod
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pynamodb.exceptions import PynamoDBException

from brokersync.broker.statistics import StatisticsClient
from brokersync.exceptions import BrokerSyncError
from brokersync_local.background import BackgroundLoop
from brokersync_local.browsing import browse

if TYPE_CHECKING:
    from brokersync_local.drill import Drill

#: Pending keys read per queue and sample; more shows as "N+" (the ledger is not counted in full).
PENDING_LIMIT = 5000
#: Lags older than this leave the percentiles, so they describe the last minute, not the whole run.
LAG_WINDOW_S = 60.0


@dataclass
class QueueRow:
    name: str
    mode: str
    produced: int | None = None
    consumed: int | None = None
    produced_rate: float | None = None
    consumed_rate: float | None = None
    on_dr: int | None = None
    pending: int | None = None
    pending_capped: bool = False
    oldest_pending_s: float | None = None
    lag_p50_s: float | None = None
    lag_p99_s: float | None = None
    loss_risk: int | None = None


@dataclass
class Snapshot:
    elapsed_s: float
    phase: str
    primary: str
    dr: str
    rows: list[QueueRow] = field(default_factory=list)
    progress: float = 0.0


class LagWatcher:
    """Times the removal from DR of each message consumed on the primary, by browsing DR."""

    def __init__(self, drill: Drill, interval_s: float = 0.25) -> None:
        self.drill = drill
        self.interval_s = interval_s
        self._present: dict[str, tuple[float, float]] = {}  # key -> (consumed at, last seen on DR)
        self._lags: deque[tuple[float, float]] = deque()  # (removed at, lag)
        self._lock = threading.Lock()
        self._loop = BackgroundLoop(self._run, name="demo-lag-watcher")

    def start(self) -> None:
        self._loop.start()

    def stop(self) -> None:
        self._loop.stop(timeout_s=5)

    def percentiles(self) -> tuple[float | None, float | None]:
        with self._lock:
            cutoff = time.time() - LAG_WINDOW_S
            while self._lags and self._lags[0][0] < cutoff:
                self._lags.popleft()
            lags = [lag for _, lag in self._lags]
        if len(lags) < 2:
            return (lags[0], lags[0]) if lags else (None, None)
        cuts = stats_mod.quantiles(lags, n=100)
        return cuts[49], cuts[98]

    def _run(self, stop: threading.Event) -> None:
        while not stop.wait(self.interval_s):
            try:
                self._observe()
            except (BrokerSyncError, OSError, KeyError):
                continue  # a broker between roles or restarting: the next look will do

    def _observe(self) -> None:
        drill = self.drill
        dr_name = next(b.name for b in drill.topology.brokers if b.name != drill.primary_now)
        if drill.phase.endswith("running") or dr_name not in drill.connectors:
            return  # mid-switch the DR broker is about to change role: lags there mean nothing
        looked_at = time.time()
        on_dr = {
            f.headers.get("correlation-id", "")
            for f in browse(drill.connectors[dr_name], drill.queue, 2.0, partial_ok=True)
        }
        with drill.log.lock, self._lock:
            for key in on_dr:
                entries = drill.log.consumed.get(key)
                if entries and entries[0][0] == drill.primary_now:
                    self._present[key] = (entries[0][1], looked_at)
        with self._lock:
            for key, (consumed_at, last_seen) in list(self._present.items()):
                if key not in on_dr:
                    removed_at = (last_seen + looked_at) / 2
                    self._lags.append((looked_at, max(0.0, removed_at - consumed_at)))
                    del self._present[key]


class Sampler:
    """One :class:`Snapshot` per call, from the drill's brokers, ledger and traffic log."""

    def __init__(self, drill: Drill, total_s: float) -> None:
        self.drill = drill
        self.total_s = total_s
        self.started = time.time()
        self.lag = LagWatcher(drill)
        self._last: dict[str, tuple[float, int, int]] = {}

    def sample(self) -> Snapshot:
        drill = self.drill
        primary = drill.primary_now
        dr = next(b.name for b in drill.topology.brokers if b.name != primary)
        phase = drill.timeline.events[-1][1] if drill.phase.endswith("running") and drill.timeline.events else ""
        elapsed = time.time() - drill.timeline.started if drill.ready.is_set() else 0.0
        snapshot = Snapshot(
            elapsed_s=elapsed,
            phase=phase or drill.phase,
            primary=primary,
            dr=dr,
            progress=min(1.0, elapsed / self.total_s) if self.total_s else 0.0,
        )
        if not drill.ready.is_set():
            return snapshot
        names = [q.name for q in drill.topology.queues]
        dr_sizes = self._sizes(dr, names)
        backlog = self._sizes(primary, [drill.topology.dr_name(n) for n in names])
        p50, p99 = self.lag.percentiles()
        for queue in drill.topology.queues:
            row = QueueRow(queue.name, queue.mode, on_dr=dr_sizes.get(queue.name))
            row.loss_risk = backlog.get(drill.topology.dr_name(queue.name)) if queue.mode == "sync" else None
            if queue.mode == "sync":
                self._pending(row)
            if queue.name == drill.queue:
                self._traffic(row)
                row.lag_p50_s, row.lag_p99_s = p50, p99
            snapshot.rows.append(row)
        return snapshot

    def _sizes(self, broker: str, names: list[str]) -> dict[str, int]:
        try:
            return {n: s.size for n, s in StatisticsClient(self.drill.connectors[broker]).queue_stats(names).items()}
        except (BrokerSyncError, OSError):
            return {}  # the broker is down (a failover drill killed it) or restarting

    def _pending(self, row: QueueRow) -> None:
        try:
            pending = self.drill.ledger.pending(row.name, limit=PENDING_LIMIT)
        except (BrokerSyncError, PynamoDBException, OSError):  # moto busy: show a gap, not a crash
            return
        row.pending, row.pending_capped = len(pending), len(pending) >= PENDING_LIMIT
        if pending:
            row.oldest_pending_s = max(0.0, time.time() - min(p.consumed_at_ms for p in pending) / 1000)
        else:
            row.oldest_pending_s = 0.0

    def _traffic(self, row: QueueRow) -> None:
        log = self.drill.log
        with log.lock:
            row.produced, row.consumed = len(log.confirmed), len(log.consumed)
        now = time.time()
        last = self._last.get(row.name)
        if last:
            span = max(1e-6, now - last[0])
            row.produced_rate = (row.produced - last[1]) / span
            row.consumed_rate = (row.consumed - last[2]) / span
        self._last[row.name] = (now, row.produced, row.consumed)


# -- rendering ------------------------------------------------------------------------------------
COLUMNS = ("queue", "produced", "consumed", "on DR", "pending purge", "oldest pending", "lag p50/p99", "loss risk")


def _count(value: int | None, rate: float | None = None, capped: bool = False) -> str:
    if value is None:
        return "-"
    text = f"{value:,}{'+' if capped else ''}"
    return f"{text} ({rate:,.0f}/s)" if rate is not None else text


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}s"


def cells(row: QueueRow) -> list[str]:
    lag = "-" if row.lag_p50_s is None else f"{row.lag_p50_s:.2f}/{row.lag_p99_s or 0:.2f}s"
    return [
        f"{row.name} ({row.mode})",
        _count(row.produced, row.produced_rate),
        _count(row.consumed, row.consumed_rate),
        _count(row.on_dr),
        _count(row.pending, capped=row.pending_capped),
        _seconds(row.oldest_pending_s),
        lag,
        _count(row.loss_risk),
    ]


def progress_line(snapshot: Snapshot, width: int = 30) -> str:
    filled = int(snapshot.progress * width)
    bar = "#" * filled + "-" * (width - filled)
    return f"[{bar}] {snapshot.elapsed_s:5.1f}s  primary {snapshot.primary}, DR {snapshot.dr}  - {snapshot.phase}"


def plain_lines(snapshot: Snapshot) -> list[str]:
    """The snapshot as plain text, for logs and pipes."""
    lines = [progress_line(snapshot)]
    for row in snapshot.rows:
        lines.append("  " + "  ".join(f"{c}={v}" for c, v in zip(COLUMNS, cells(row), strict=True)))
    return lines


def rich_view(snapshot: Snapshot) -> Any:
    """The snapshot as a rich renderable: a progress line over a table."""
    from rich.console import Group  # noqa: PLC0415 (rich only on a terminal)
    from rich.table import Table  # noqa: PLC0415
    from rich.text import Text  # noqa: PLC0415

    table = Table(title="BrokerSync local demo", title_justify="left", expand=False)
    for column in COLUMNS:
        table.add_column(column, justify="left" if column == "queue" else "right")
    for row in snapshot.rows:
        table.add_row(*cells(row))
    return Group(Text(progress_line(snapshot)), table)
