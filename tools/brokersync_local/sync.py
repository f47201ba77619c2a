"""``brokersync sync start|stop|status``: the relay and purge loops as background processes.

The workers are recorded by pid in ``sync.json`` beside ``env.json`` and stopped by pid,
like the brokers. ``status`` joins what the workers report with the DR broker's own depth.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import boto3

from brokersync.broker.statistics import StatisticsClient
from brokersync.broker.stomp import StompConnector
from brokersync.ledger.schema import create_ledger_table
from brokersync_local.errors import LocalWorldError
from brokersync_local.interrupts import interrupts_held
from brokersync_local.pids import pid_is_ours, signal_group
from brokersync_local.sync_worker import LEDGER_TABLE, aws_environment
from brokersync_local.world import LocalWorld

WORKERS = ("relay", "purge")
ROOT = Path(__file__).resolve().parents[2]


class SyncWorkers:
    def __init__(self, world: LocalWorld, topology_path: Path) -> None:
        self.world = world
        self.topology_path = Path(topology_path).resolve()
        self.pid_file = world.state_dir / "sync.json"
        #: Workers this object started: a process just spawned may not show its command line yet.
        self._started: dict[str, int] = {}

    def _pids(self) -> dict[str, int]:
        try:
            return json.loads(self.pid_file.read_text())
        except (OSError, ValueError):
            return {}

    def alive(self, pid: int | None) -> bool:
        """Whether ``pid`` is a sync worker still running (not a reused pid, not a zombie)."""
        return pid is not None and pid_is_ours(pid, "brokersync_local.sync_worker")

    def ensure_ledger(self) -> None:
        env = self.world.read_env()
        aws_environment(env["aws"]["endpoint"], env["aws"]["region"])
        client = boto3.client("dynamodb", endpoint_url=env["aws"]["endpoint"], region_name=env["aws"]["region"])
        create_ledger_table(client, LEDGER_TABLE, ROOT / "template.yaml")

    def start(
        self, log: Any = print, only: tuple[str, ...] = WORKERS, role_region: str | None = None
    ) -> dict[str, int]:
        """Start the workers not yet running (``only`` some: a drill runs the real purge loop instead).

        ``role_region`` starts the region's own worker (the two-region world runs one relay per
        region, as each stack has its own scheduled relay); it acts only in that region's roles.
        """
        if not self.world.running() and role_region is None:
            raise LocalWorldError("the local world is not running: `brokersync local up` first")
        if role_region is None:
            self.ensure_ledger()
        pids = {name: pid for name, pid in self._pids().items() if self.alive(pid) or self._started.get(name) == pid}
        for worker in only:
            key = f"{worker}-{role_region}" if role_region else worker
            if key in pids:
                log(f"{key} already running (pid {pids[key]})")
                continue
            region_args = ["--role-region", role_region] if role_region else []
            log_file = (self.world.state_dir / f"sync-{key}.log").open("ab")
            with interrupts_held():  # a worker started is a worker whose PID is known
                process = subprocess.Popen(
                    [
                        sys.executable,
                        "-m",
                        "brokersync_local.sync_worker",
                        worker,
                        "--topology",
                        str(self.topology_path),
                        "--state-dir",
                        str(self.world.state_dir),
                        *region_args,
                    ],
                    stdout=log_file,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    start_new_session=True,
                )
                pids[key] = self._started[key] = process.pid
            log_file.close()
            log(f"started {key} (pid {process.pid})")
        self.pid_file.write_text(json.dumps(pids), encoding="utf-8")
        return pids

    def stop(self, log: Any = print, timeout_s: float = 20.0) -> None:
        # The ones this object started too: an interrupt can come before the PID file is written.
        for worker, pid in (self._pids() | self._started).items():
            if not self.alive(pid):
                continue
            log(f"stopping {worker} (pid {pid})")
            signal_group(pid, signal.SIGTERM)
            deadline = time.monotonic() + timeout_s
            while self.alive(pid) and time.monotonic() < deadline:
                time.sleep(0.1)
            if self.alive(pid):
                signal_group(pid, signal.SIGKILL)
        self._started.clear()
        self.pid_file.unlink(missing_ok=True)

    def status(self) -> list[dict[str, Any]]:
        topology = self.world.topology
        purge = self._worker_status("purge")
        relay = self._worker_status("relay")
        names = [q.name for q in topology.queues]
        dr_depth = StatisticsClient(StompConnector(topology.dr.stomp)).queue_stats(names)
        copy_backlog = StatisticsClient(StompConnector(topology.primary.stomp)).queue_stats(
            [topology.dr_name(n) for n in names]
        )
        rows = []
        for queue in topology.queues:
            age = purge.get("oldest_pending_age_ms", {}).get(queue.name)
            rows.append(
                {
                    "queue": queue.name,
                    "mode": queue.mode,
                    "captured": relay.get("by_queue", {}).get(queue.name, 0),
                    "pending": purge.get("pending", {}).get(queue.name, 0),
                    "oldest_pending_s": round(age / 1000, 1) if age is not None else None,
                    "purged": purge.get("purged", {}).get(queue.name, 0),
                    "missing": purge.get("missing", {}).get(queue.name, 0),
                    "dr_depth": dr_depth[queue.name].size if queue.name in dr_depth else 0,
                    "copy_backlog": copy_backlog[topology.dr_name(queue)].size
                    if topology.dr_name(queue) in copy_backlog
                    else 0,
                }
            )
        return rows

    def _worker_status(self, worker: str) -> dict[str, Any]:
        return _read_status(self.world.state_dir / f"sync-{worker}.json")

    def region_statuses(self, worker: str) -> list[dict[str, Any]]:
        """The running totals of every ``worker`` process, the two-region world's one per region included."""
        return [_read_status(path) for path in sorted(self.world.state_dir.glob(f"sync-{worker}*.json"))]


def _read_status(path: Path) -> dict[str, Any]:
    """A worker's status file, or nothing when it is not written (yet) or half written."""
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def format_status(rows: list[dict[str, Any]]) -> str:
    columns = [
        "queue",
        "mode",
        "captured",
        "pending",
        "oldest_pending_s",
        "purged",
        "missing",
        "dr_depth",
        "copy_backlog",
    ]
    widths = {c: max(len(c), *(len(str(r[c])) for r in rows)) for c in columns}
    lines = ["  ".join(c.ljust(widths[c]) for c in columns)]
    lines += ["  ".join(str(r[c]).ljust(widths[c]) for c in columns) for r in rows]
    return "\n".join(lines)
