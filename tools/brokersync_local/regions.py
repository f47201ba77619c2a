"""The two-region local world: each region its own AWS endpoint, its own broker, its own functions.

Where :class:`~brokersync_local.world.LocalWorld` runs one moto server that stands in for
both regions, this world keeps the regions' state apart as AWS does:

* one moto server per region (the topology's two broker regions), each with its own Lambda
  execution environments (:mod:`warm_functions`), Step Functions, DynamoDB and Amazon MQ;
* one local address for AWS (:mod:`regional_endpoint`) that sends each call to the region it
  was signed for, so every process is configured with one ``AWS_ENDPOINT_URL`` and reaches a
  region only by naming it, as in AWS;
* the ledger's two regional tables kept in step by the global-table replication stand-in
  (:mod:`replication`: asynchronous, last writer wins per item, stalled while a region is
  cut off);
* each broker in its topology region.

**Region loss is a partition, not a wipe.** :meth:`partition` SIGSTOPs everything a region
runs (its broker, its AWS endpoint with its functions, and the processes registered with
:meth:`adopt`, such as that region's relay worker); :meth:`heal` SIGCONTs them, state intact.
Calls into a partitioned region hang until the caller's timeout, as calls into a lost region
do. A broker kill stays available (``brokers[role].kill()``).
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from brokersync.topology import Role, Topology
from brokersync_local.errors import LocalWorldError, PortTakenError, ProcessFailedError
from brokersync_local.moto_server import MotoServer
from brokersync_local.pids import pid_is_ours, signal_group
from brokersync_local.ports import LOOPBACK, port_is_free, wait_until_answers
from brokersync_local.replication import DEFAULT_LAG_S
from brokersync_local.world import LocalWorld, WorldPorts

ROUTER_MARKER = "brokersync_local.regional_endpoint"
REPLICATION_MARKER = "brokersync_local.replication"


class TwoRegionWorld(LocalWorld):
    """Two brokers in two regions, an AWS endpoint per region, and the replication between them.

    ``ports.aws`` is the one AWS address every process uses; the regions' own servers take
    the next ports (``ports.aws + 1`` for the primary's region, ``+ 2`` for the DR's).
    """

    def __init__(self, topology: Topology, state_dir: Path, ports: WorldPorts | None = None) -> None:
        super().__init__(topology, state_dir, ports)
        regions = [self.topology.broker(role).region for role in ("primary", "dr")]
        if None in regions or regions[0] == regions[1]:
            raise LocalWorldError(f"a two-region world needs each broker in a region of its own, not {regions}")
        self.regions: list[str] = [r for r in regions if r]
        self.servers = {
            region: MotoServer(self.ports.aws + 1 + i, self.state_dir / f"aws-{region}")
            for i, region in enumerate(self.regions)
        }
        self._router: subprocess.Popen[bytes] | None = None
        self._replication: subprocess.Popen[bytes] | None = None
        #: Further processes that belong to a region (its relay worker), stopped with it.
        self.adopted: dict[str, list[int]] = {region: [] for region in self.regions}
        self.partitioned: set[str] = set()

    @property
    def endpoint(self) -> str:
        return f"http://{LOOPBACK}:{self.ports.aws}"

    def region_of(self, role: Role) -> str:
        region = self.topology.broker(role).region
        assert region is not None
        return region

    # -- lifecycle ----------------------------------------------------------------------------------
    def up(self, timeout_s: float = 90.0, log: Any = print) -> dict[str, Any]:
        ports = [*(p for p, _ in self.ports.labelled()), *(s.port for s in self.servers.values())]
        for port in ports:
            if not port_is_free(port):
                raise PortTakenError(port, "two-region world")
        started = time.monotonic()
        deadline = started + timeout_s
        try:
            for role in ("dr", "primary"):
                self.start_broker(role)
            for server in self.servers.values():
                server.start()
            self._router = self._spawn(
                "router",
                [
                    "-m",
                    ROUTER_MARKER,
                    "--port",
                    str(self.ports.aws),
                    *(a for r, s in self.servers.items() for a in ("--region", f"{r}={s.endpoint}")),
                ],
            )
            self._wait_for_router(deadline)
            for broker in self.brokers.values():
                broker.wait_ready(max(1.0, deadline - time.monotonic()))
            self.wait_for_bridges(deadline)
        except BaseException:
            self.down(log=lambda _m: None)
            raise
        env = self._write_env()
        log(f"two-region world up in {time.monotonic() - started:.1f}s: {', '.join(self.regions)}")
        return env

    def _wait_for_router(self, deadline: float) -> None:
        router = self._router
        if router is None or not wait_until_answers(self.ports.aws, deadline, lambda: router.poll() is None):
            raise ProcessFailedError(f"the regional endpoint did not start on port {self.ports.aws}")

    def start_replication(self, table: str, lag_s: float = DEFAULT_LAG_S) -> None:
        """Keep ``table`` in step between the regions (after it exists in both)."""
        endpoints = [a for r, s in self.servers.items() for a in ("--endpoint", f"{r}={s.endpoint}")]
        self._replication = self._spawn(
            "replication", ["-m", REPLICATION_MARKER, "--table", table, "--lag", str(lag_s), *endpoints]
        )

    def _spawn(self, name: str, args: list[str]) -> subprocess.Popen[bytes]:
        self.state_dir.mkdir(parents=True, exist_ok=True)
        with (self.state_dir / f"{name}.log").open("ab") as log:
            return subprocess.Popen(  # our own module, our own interpreter
                [sys.executable, *args],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )

    def adopt(self, region: str, pid: int) -> None:
        """Count ``pid`` (a session leader) as part of ``region``: it is partitioned and healed with it."""
        self.adopted[region].append(pid)

    # -- partitions -----------------------------------------------------------------------------------
    def _region_groups(self, region: str) -> list[int]:
        env = self.read_env()
        groups = [env[role]["pid"] for role in ("primary", "dr") if self.region_of(role) == region]  # type: ignore[arg-type]
        server = self.servers[region]
        return [g for g in [*groups, server.pid, *self.adopted[region]] if g]

    def partition(self, region: str) -> None:
        """Cut ``region`` off: its broker, AWS endpoint, functions and adopted processes stop answering."""
        for group in self._region_groups(region):
            signal_group(group, signal.SIGSTOP)
        self.partitioned.add(region)

    def heal(self, region: str) -> None:
        """Bring ``region`` back with everything it held; replication catches up by itself."""
        for group in self._region_groups(region):
            signal_group(group, signal.SIGCONT)
        self.partitioned.discard(region)

    def down(self, log: Any = print) -> None:
        for region in list(self.partitioned):
            self.heal(region)  # a stopped process would hold its SIGTERM until continued
        for process in (self._replication, self._router):
            if process is not None and process.poll() is None:
                signal_group(process.pid, signal.SIGTERM)
                try:
                    process.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    signal_group(process.pid, signal.SIGKILL)
        for pids in self.adopted.values():
            for pid in pids:
                if pid_is_ours(pid, "brokersync_local"):
                    signal_group(pid, signal.SIGKILL)
        for server in self.servers.values():
            server.stop()
        super().down(log)

    def _write_env(self) -> dict[str, Any]:
        env = super()._write_env()
        router = self._router.pid if self._router is not None else None
        env["aws"] = {"endpoint": self.endpoint, "region": self.region_of("primary"), "pid": router}
        env["regions"] = {r: {"endpoint": s.endpoint, "pid": s.pid} for r, s in self.servers.items()}
        tmp = self.env_file.with_suffix(".tmp")
        tmp.write_text(json.dumps(env, indent=2) + "\n", encoding="utf-8")
        tmp.replace(self.env_file)
        return env
