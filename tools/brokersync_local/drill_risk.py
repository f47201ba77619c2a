"""What is at risk during a drill, sampled over time for its report: the figures the health probe emits.

* copy backlog: copies in ``Q.DR`` outflows not yet on the peer (summed over every broker that
  answers, so the new primary's outflow counts after a failover), and the **loss window**, the
  age of the oldest of them (what a failover at that moment would lose);
* pending purge: keys consumed on the primary whose copy the purge has not removed yet (the
  ledger's replica the drill reads), and the **duplicate window**, the age of the oldest.

The sampler reads without side effects (statistics, a browse of one message, a read-only
ledger query), skips a broker that did not answer for a while (a killed or partitioned one),
and never stops the drill: a sample it cannot take is recorded as unmeasured (None).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from brokersync.broker.statistics import StatisticsClient
from brokersync.broker.stomp import StompConnector
from brokersync.exceptions import BrokerSyncError
from brokersync.health import PENDING_CAP
from brokersync.ledger.base import LedgerStore
from brokersync.snapshot.browser import oldest_timestamp_ms
from brokersync.topology import Topology

#: Seconds between samples: fine enough for a 30 s drill, light enough not to load it.
SAMPLE_EVERY_S = 1.0
#: A broker that did not answer is left alone this long (a frozen one holds a connect for seconds).
UNREACHABLE_BACKOFF_S = 10.0


@dataclass(frozen=True)
class RiskSample:
    at_s: float
    copy_backlog: int | None
    loss_window_s: float | None
    pending_purge: int | None
    duplicate_window_s: float | None


class RiskSampler:
    def __init__(
        self,
        topology: Topology,
        queue: str,
        connectors: dict[str, StompConnector],
        ledger: Callable[[], LedgerStore | None],
        started: Callable[[], float],
        every_s: float = SAMPLE_EVERY_S,
    ) -> None:
        self.topology = topology
        self.queue = queue
        self.connectors = connectors
        self.ledger = ledger
        self.started = started
        self.every_s = every_s
        self.samples: list[RiskSample] = []
        self._skip_until: dict[str, float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="drill-risk-sampler", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=30)

    def _run(self) -> None:
        while not self._stop.is_set():
            began = time.monotonic()
            try:
                self.samples.append(self.sample())
            except Exception:  # a sample never stops the sampling: this one is unmeasured
                elapsed = round(time.time() - self.started(), 3)
                self.samples.append(RiskSample(elapsed, None, None, None, None))
            self._stop.wait(max(0.0, self.every_s - (time.monotonic() - began)))

    def sample(self) -> RiskSample:
        at = time.time()
        backlog, loss_window = self._copy_backlog(at)
        pending, duplicate_window = self._pending_purge(at)
        return RiskSample(round(at - self.started(), 3), backlog, loss_window, pending, duplicate_window)

    def _copy_backlog(self, now: float) -> tuple[int | None, float | None]:
        outflow = self.topology.dr_name(self.queue)
        total, oldest_ms, measured = 0, None, False
        # A copy: a drill adds a broker while it runs (new-dr-region's third), from another thread.
        for name, connector in list(self.connectors.items()):
            if time.monotonic() < self._skip_until.get(name, 0.0):
                continue
            try:
                size = StatisticsClient(connector).queue_stats([outflow]).get(outflow)
                measured = True
                if size is None or size.size == 0:
                    continue
                total += size.size
                queue = self.topology.queue(self.queue).model_copy(update={"name": outflow})
                head = oldest_timestamp_ms(connector, queue, idle_timeout_s=2.0)
                if head is not None:
                    oldest_ms = head if oldest_ms is None else min(oldest_ms, head)
            except (BrokerSyncError, OSError):
                self._skip_until[name] = time.monotonic() + UNREACHABLE_BACKOFF_S
        if not measured:
            return None, None
        return total, (max(0.0, now - oldest_ms / 1000) if oldest_ms is not None else 0.0)

    def _pending_purge(self, now: float) -> tuple[int | None, float | None]:
        ledger = self.ledger()  # None while the replica's region is cut off
        if ledger is None:
            return None, None
        try:
            pending = ledger.pending(self.queue, limit=PENDING_CAP, read_only=True)
        except Exception:  # a sample never stops the drill: unmeasured
            return None, None
        oldest = min((p.consumed_at_ms for p in pending), default=None)
        return len(pending), (max(0.0, now - oldest / 1000) if oldest is not None else 0.0)


def peaks(samples: list[RiskSample]) -> dict[str, float | int | None]:
    """The highest of each figure over the drill (None: never measured)."""
    out: dict[str, float | int | None] = {}
    for name in ("copy_backlog", "loss_window_s", "pending_purge", "duplicate_window_s"):
        values = [v for v in (getattr(s, name) for s in samples if s.at_s >= 0) if v is not None]
        out[f"peak_{name}"] = round(max(values), 3) if values else None
    return out
