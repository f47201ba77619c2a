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

**A region gone for good, and a third one.** :meth:`abandon` kills everything a region ran
(nothing of it answers again); ``spare_regions`` are regions the endpoint routes from the start
but where nothing runs yet, until :meth:`add_region` starts their AWS endpoint and
:meth:`replace_broker` puts a new broker there in the lost broker's place, as an operator pairs
the survivor with a broker in a third region.
"""

from __future__ import annotations

import dataclasses
import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from brokersync.render import render_configuration
from brokersync.topology import Role, Topology
from brokersync_local.broker_process import BrokerProcess
from brokersync_local.errors import LocalWorldError, PortTakenError, ProcessFailedError
from brokersync_local.interrupts import interrupts_held
from brokersync_local.moto_server import MotoServer
from brokersync_local.pids import pid_is_ours, signal_group
from brokersync_local.ports import LOOPBACK, port_is_free, wait_until_answers
from brokersync_local.replication import DEFAULT_LAG_S
from brokersync_local.world import LocalWorld, WorldPorts, broker_heap, localise
from brokersync_local.wrapper import LocalPorts, wrap_for_local

ROUTER_MARKER = "brokersync_local.regional_endpoint"
REPLICATION_MARKER = "brokersync_local.replication"


class TwoRegionWorld(LocalWorld):
    """Two brokers in two regions, an AWS endpoint per region, and the replication between them.

    ``ports.aws`` is the one AWS address every process uses; the regions' own servers take
    the next ports (``ports.aws + 1`` for the primary's region, ``+ 2`` for the DR's, then the
    spare regions').
    """

    def __init__(
        self,
        topology: Topology,
        state_dir: Path,
        ports: WorldPorts | None = None,
        spare_regions: tuple[str, ...] = (),
    ) -> None:
        super().__init__(topology, state_dir, ports)
        regions = [self.topology.broker(role).region for role in ("primary", "dr")]
        if None in regions or regions[0] == regions[1]:
            raise LocalWorldError(f"a two-region world needs each broker in a region of its own, not {regions}")
        if set(spare_regions) & set(regions):
            raise LocalWorldError(f"spare regions {spare_regions} must differ from the pair's {regions}")
        self.regions: list[str] = [r for r in regions if r]
        every = [*self.regions, *spare_regions]
        servers = {
            region: MotoServer(self.ports.aws + 1 + i, self.state_dir / f"aws-{region}")
            for i, region in enumerate(every)
        }
        self.servers = {region: servers[region] for region in self.regions}
        #: Regions routed by the endpoint where nothing runs yet (calls there are refused).
        self.spares = {region: servers[region] for region in spare_regions}
        #: Regions gone for good: routed still, answering nothing.
        self.abandoned: set[str] = set()
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
        servers = [*self.servers.values(), *self.spares.values()]
        ports = [*(p for p, _ in self.ports.labelled()), *(s.port for s in servers)]
        for port in ports:
            if not port_is_free(port):
                raise PortTakenError(port, "two-region world")
        for server in servers:
            _ = server.function_code  # a stale build of the functions stops us before any broker starts
        started = time.monotonic()
        deadline = started + timeout_s
        try:
            for role in ("dr", "primary"):
                self.start_broker(role)
            for server in self.servers.values():
                server.start()
            routes = [a for r, s in {**self.servers, **self.spares}.items() for a in ("--region", f"{r}={s.endpoint}")]
            with interrupts_held():  # a router started is a router whose process is known
                self._router = self._spawn("router", ["-m", ROUTER_MARKER, "--port", str(self.ports.aws), *routes])
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
        """Keep ``table`` in step between the live regions (after it exists in each).

        Called again after the regions changed (a region abandoned, one added), it restarts the
        stand-in over the live regions from the start of each table's stream: a new replica is
        filled with every item, as AWS fills a replica it creates, and then kept in step.
        """
        self._stop_process(self._replication)
        endpoints = [a for r, s in self.servers.items() for a in ("--endpoint", f"{r}={s.endpoint}")]
        with interrupts_held():
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

    # -- a region gone for good, and a third one ----------------------------------------------------------
    def abandon(self, region: str) -> None:
        """``region`` is gone for good: everything it ran is killed, and nothing there answers again."""
        for group in self._region_groups(region):
            signal_group(group, signal.SIGKILL)
        self.partitioned.discard(region)
        self.abandoned.add(region)
        self.adopted[region] = []
        self.servers.pop(region).pid = None
        self.regions.remove(region)
        self._write_env()

    def add_region(self, region: str) -> None:
        """Start the AWS endpoint of a spare region (empty, as a region where nothing is deployed yet)."""
        if region not in self.spares:
            raise LocalWorldError(f"{region} is not a spare region of this world ({sorted(self.spares)})")
        server = self.spares.pop(region)
        server.start()
        self.servers[region] = server
        self.regions.append(region)
        self.adopted[region] = []
        self._write_env()

    def replace_broker(self, slot: Role, topology: Topology, ports: LocalPorts, runs_as: Role) -> BrokerProcess:
        """Start the broker ``topology`` names in ``slot`` (a lost broker's place) on ``ports``, as ``runs_as``.

        ``topology`` is the edited topology file (the lost broker's entry replaced); the slot's
        ports and the world's localised topology follow it, so every process that reads the
        world's ``env.json`` reaches the new broker. It starts with the configuration of the
        role it will play (``runs_as``), as a new Amazon MQ broker is created with one.
        """
        if slot == "primary":
            self.ports = dataclasses.replace(self.ports, primary_openwire=ports.openwire, primary_stomp=ports.stomp)
        else:
            self.ports = dataclasses.replace(self.ports, dr_openwire=ports.openwire, dr_stomp=ports.stomp)
        self.topology = localise(topology, self.ports)
        entry = self.topology.broker(slot)
        broker = BrokerProcess(
            name=entry.name,
            base_dir=self.state_dir / "brokers" / entry.name,
            ports=ports,
            heap=broker_heap(self.topology, slot),
        )
        self.brokers[slot] = broker
        rendered = self.topology if runs_as == slot else self.topology.swapped()
        broker.prepare(wrap_for_local(render_configuration(rendered, runs_as), broker.name, broker.ports))
        broker.start()
        broker.wait_ready(90.0)
        self._write_env()
        return broker

    def _stop_process(self, process: subprocess.Popen[bytes] | None) -> None:
        if process is not None and process.poll() is None:
            signal_group(process.pid, signal.SIGTERM)
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                signal_group(process.pid, signal.SIGKILL)

    def down(self, log: Any = print, *, graceful: bool = True) -> None:
        for region in list(self.partitioned):
            self.heal(region)  # a stopped process would hold its SIGTERM until continued
        for process in (self._replication, self._router):
            self._stop_process(process)
        for pids in self.adopted.values():
            for pid in pids:
                if pid_is_ours(pid, "brokersync_local"):
                    signal_group(pid, signal.SIGKILL)
        for server in self.servers.values():
            server.stop()
        super().down(log, graceful=graceful)

    def _write_env(self) -> dict[str, Any]:
        # A local Amazon MQ reboot restarted a broker under a new pid and recorded it in env.json;
        # rewriting the file must keep that pid, or the world would later stop the dead one.
        recorded = self.read_env() if self.env_file.exists() else {}
        for role, broker in self.brokers.items():
            entry = recorded.get(role) or {}
            if entry.get("name") == broker.name and entry.get("pid"):
                broker.pid = entry["pid"]
        env = super()._write_env()
        router = self._router.pid if self._router is not None else None
        env["aws"] = {"endpoint": self.endpoint, "region": self.region_of("primary"), "pid": router}
        env["regions"] = {r: {"endpoint": s.endpoint, "pid": s.pid} for r, s in self.servers.items()}
        tmp = self.env_file.with_suffix(".tmp")
        tmp.write_text(json.dumps(env, indent=2) + "\n", encoding="utf-8")
        tmp.replace(self.env_file)
        return env
