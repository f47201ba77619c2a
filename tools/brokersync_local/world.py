"""The local world: two real brokers running the rendered configurations, and moto as AWS.

``up`` is idempotent: when ``env.json`` describes processes that are all still ours and
answering, it does nothing. Processes recorded but gone (a stale pid after a reboot or a
``kill -9``) are reported and cleaned up; a port taken by some other process is refused
before anything starts.
"""

from __future__ import annotations

import json
import shutil
import signal
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import astuple, dataclass
from pathlib import Path
from typing import Any

from brokersync.render import render_configuration
from brokersync.render.parts import role_parts
from brokersync.topology import Role, Topology
from brokersync_local.broker_process import DEFAULT_HEAP_MB, BrokerProcess, heap_for_queue_memory
from brokersync_local.errors import LocalWorldError, PortTakenError, ProcessFailedError
from brokersync_local.moto_server import DEFAULT_REGION, PROCESS_MARKER, MotoServer
from brokersync_local.pids import pid_is_ours, pids_with_argument, record_pid, signal_group
from brokersync_local.ports import LOOPBACK, port_answers, port_is_free
from brokersync_local.tls import LocalTls
from brokersync_local.wrapper import LocalPorts, wrap_for_local

ROLES: tuple[Role, Role] = ("primary", "dr")


@dataclass(frozen=True)
class WorldPorts:
    primary_openwire: int = 61616
    primary_stomp: int = 61613
    dr_openwire: int = 62616
    dr_stomp: int = 62613
    aws: int = 5005

    def for_role(self, role: Role) -> LocalPorts:
        if role == "primary":
            return LocalPorts(self.primary_openwire, self.primary_stomp)
        return LocalPorts(self.dr_openwire, self.dr_stomp)

    def shifted(self, offset: int) -> WorldPorts:
        """The same layout moved by ``offset``, so two checkouts can run their worlds side by side."""
        return WorldPorts(*(port + offset for port in astuple(self)))

    def labelled(self) -> list[tuple[int, str]]:
        return [
            (self.primary_openwire, "primary openwire"),
            (self.primary_stomp, "primary stomp"),
            (self.dr_openwire, "DR openwire"),
            (self.dr_stomp, "DR stomp"),
            (self.aws, "moto AWS endpoint"),
        ]


def ports_from_env(env: dict[str, Any]) -> WorldPorts:
    """The ports a running world recorded in its env.json."""

    def port(address: str) -> int:
        return int(address.rsplit(":", 1)[1])

    return WorldPorts(
        primary_openwire=port(env["primary"]["openwire"]),
        primary_stomp=port(env["primary"]["stomp"]),
        dr_openwire=port(env["dr"]["openwire"]),
        dr_stomp=port(env["dr"]["stomp"]),
        aws=port(env["aws"]["endpoint"]),
    )


def localise(topology: Topology, ports: WorldPorts, *, tls: bool = False) -> Topology:
    """The topology with each broker's endpoints pointed at its loopback ports (TLS ones with ``tls``)."""
    openwire, stomp = ("ssl", "stomp+ssl") if tls else ("tcp", "stomp")
    endpoints = {}
    for role in ROLES:
        local = ports.for_role(role)
        endpoints[topology.broker(role).name] = (
            [f"{openwire}://{LOOPBACK}:{local.openwire}"],
            [f"{stomp}://{LOOPBACK}:{local.stomp}"],
        )
    return topology.with_endpoints(endpoints)


def broker_heap(topology: Topology, role: Role) -> str:
    """The ``-Xmx`` of the local broker in ``role``: DR's sized for its queues' memory limit,
    as an Amazon MQ instance type is chosen for it (:func:`heap_for_queue_memory`)."""
    return heap_for_queue_memory(topology.tuning.dr.memory_limit_mb) if role == "dr" else f"{DEFAULT_HEAP_MB}m"


def with_dr_memory_limit(topology: Topology, memory_limit_mb: int | None) -> Topology:
    """``topology`` with the DR queues' memory limit set (None: as it is); the DR heap follows it."""
    if memory_limit_mb is None:
        return topology
    dr = topology.tuning.dr.model_copy(update={"memory_limit_mb": memory_limit_mb})
    return topology.model_copy(update={"tuning": topology.tuning.model_copy(update={"dr": dr})})


class LocalWorld:
    """The brokers and moto of one state directory."""

    def __init__(
        self,
        topology: Topology,
        state_dir: Path,
        ports: WorldPorts | None = None,
        base_configuration: str | None = None,
        tls: LocalTls | None = None,
    ) -> None:
        """``base_configuration`` is a customer's own ``<broker>`` document that both brokers'
        configurations are rendered into (``brokersync render --base``), as on Amazon MQ.
        ``tls``: the brokers take TLS only and bridge over ``ssl://``, as on Amazon MQ; their
        clients then need :meth:`LocalTls.client_environment` (the sync bench's ``--tls``)."""
        self.ports = ports or WorldPorts()
        self.base_configuration = base_configuration
        self.tls = tls
        self.topology = localise(topology, self.ports, tls=tls is not None)
        self.state_dir = Path(state_dir).resolve()
        self.brokers: dict[Role, BrokerProcess] = {
            role: BrokerProcess(
                name=self.topology.broker(role).name,
                base_dir=self.state_dir / "brokers" / self.topology.broker(role).name,
                ports=self.ports.for_role(role),
                heap=broker_heap(self.topology, role),
            )
            for role in ROLES
        }
        self.moto = MotoServer(self.ports.aws, self.state_dir / "moto")

    @property
    def env_file(self) -> Path:
        return self.state_dir / "env.json"

    # -- lifecycle ----------------------------------------------------------------------------
    def up(self, timeout_s: float = 60.0, log: Any = print) -> dict[str, Any]:
        """Start everything that is not already running; return the env.json contents."""
        if self.running():
            log(f"local world already running (see {self.env_file})")
            return self.read_env()
        self._clear_stale(log)
        for port, purpose in self.ports.labelled():
            if not port_is_free(port):
                raise PortTakenError(port, purpose)
        _ = self.moto.function_code  # a stale build of the functions stops us before any broker starts
        started = time.monotonic()
        try:
            # DR first: the primary's bridge then connects on its first attempt.
            for role in ("dr", "primary"):
                self.start_broker(role)
            self.moto.start()
            deadline = started + timeout_s
            for broker in self.brokers.values():
                broker.wait_ready(max(1.0, deadline - time.monotonic()))
            self.wait_for_bridges(deadline)
        except BaseException:
            self.down(log=lambda _msg: None)
            raise
        env = self._write_env()
        log(f"local world up in {time.monotonic() - started:.1f}s: {self.env_file}")
        return env

    def start_broker(self, role: Role) -> BrokerProcess:
        """(Re)write the broker's configuration for its current role and start it.

        In a world that is up, the new pid goes into env.json, so that the world still owns
        (and ``down`` still stops) a broker restarted under a new pid.
        """
        broker = self.brokers[role]
        configuration = render_configuration(self.topology, role, base=self.base_configuration)
        bridge_user = self.topology.tuning.bridge.user
        broker.prepare(wrap_for_local(configuration, broker.name, broker.ports, self.tls, bridge_user))
        broker.start()
        if self.env_file.exists():
            record_pid(self.env_file, role, broker.pid)
        return broker

    def wait_for_bridges(self, deadline: float) -> None:
        """Wait until each broker reports every network connector its role renders established.

        The primary always bridges to DR; the DR broker bridges back only for active-active queues.
        """
        if self.topology.is_crdr:
            return
        for role, broker in self.brokers.items():
            expected = len(role_parts(self.topology, role).connectors)
            while broker.bridges_established() < expected:
                if not broker.alive():
                    raise ProcessFailedError(f"broker {broker.name} exited\n{broker.log_tail()}")
                if time.monotonic() > deadline:
                    raise ProcessFailedError(
                        f"{broker.bridges_established()} of {expected} network bridges of {broker.name} established "
                        f"in time\n{broker.log_tail()}"
                    )
                time.sleep(0.1)

    def down(self, log: Any = print, *, graceful: bool = True) -> None:
        """Stop, by pid, every process this state directory records or holds.

        The brokers stop side by side: each may take its shutdown timeout, and a Ctrl-C'd demo
        waits for the slower, not the sum. Not ``graceful`` (the data is about to be deleted),
        they are killed at once. moto goes first: a local Amazon MQ reboot runs in its process
        and could otherwise start a broker after the brokers were stopped.
        """
        self.moto.pid = self.moto.pid or self._recorded_pids().get("aws")
        if self.moto.alive():
            log(f"stopping moto (pid {self.moto.pid})")
        self.moto.stop()
        recorded = self._recorded_pids()

        def stop(role: Role, broker: BrokerProcess) -> None:
            # A local Amazon MQ reboot restarts a broker under a new pid, recorded in env.json.
            for pid in dict.fromkeys(p for p in (recorded.get(role), broker.pid) if p):
                broker.pid = pid
                if not broker.alive():  # gone, or a recycled pid that is not ours: never signalled
                    broker.pid = None
                    continue
                log(f"stopping broker {broker.name} (pid {pid})")
                if graceful:
                    broker.stop()
                else:
                    broker.kill()

        with ThreadPoolExecutor(max_workers=len(self.brokers)) as pool:
            for stopped in [pool.submit(stop, role, broker) for role, broker in self.brokers.items()]:
                stopped.result()
        for broker in self.brokers.values():
            # A JVM started a moment before an interrupt (ours, or a local Amazon MQ reboot's)
            # whose PID was never recorded: found by the base directory it runs from.
            for pid in pids_with_argument(broker.base_argument):
                log(f"stopping broker {broker.name} (pid {pid}, started but not recorded)")
                signal_group(pid, signal.SIGKILL)
        self.env_file.unlink(missing_ok=True)

    def destroy(self) -> None:
        """Stop everything and delete the state directory (brokers' data included)."""
        self.down(log=lambda _msg: None, graceful=False)
        shutil.rmtree(self.state_dir, ignore_errors=True)

    # -- state ----------------------------------------------------------------------------------
    def running(self) -> bool:
        if not self.env_file.exists():
            return False
        recorded = self._recorded_pids()
        for role, broker in self.brokers.items():
            pid = recorded.get(role)
            if pid is None or not pid_is_ours(pid, broker.base_dir) or not port_answers(broker.ports.stomp):
                return False
            broker.pid = pid
        moto_pid = recorded.get("aws")
        if moto_pid is None or not pid_is_ours(moto_pid, PROCESS_MARKER) or not port_answers(self.ports.aws):
            return False
        self.moto.pid = moto_pid
        return True

    def status(self) -> dict[str, dict[str, Any]]:
        recorded = self._recorded_pids()
        result: dict[str, dict[str, Any]] = {}
        for role, broker in self.brokers.items():
            pid = recorded.get(role)
            alive = pid is not None and pid_is_ours(pid, broker.base_dir)
            result[role] = {
                "name": broker.name,
                "pid": pid,
                "state": _state(pid, alive, port_answers(broker.ports.stomp)),
                "stomp": f"{LOOPBACK}:{broker.ports.stomp}",
                "openwire": f"{LOOPBACK}:{broker.ports.openwire}",
            }
        pid = recorded.get("aws")
        alive = pid is not None and pid_is_ours(pid, PROCESS_MARKER)
        result["aws"] = {
            "pid": pid,
            "state": _state(pid, alive, port_answers(self.ports.aws)),
            "endpoint": self.moto.endpoint,
        }
        return result

    def read_env(self) -> dict[str, Any]:
        if not self.env_file.exists():
            raise LocalWorldError(f"no local world in {self.state_dir} (no env.json): `brokersync local up` first")
        try:
            return json.loads(self.env_file.read_text(encoding="utf-8"))
        except (OSError, ValueError) as e:
            raise LocalWorldError(f"cannot read {self.env_file}: {e}") from e

    def _recorded_pids(self) -> dict[str, int]:
        if not self.env_file.exists():
            return {}
        try:
            env = self.read_env()
        except LocalWorldError:
            return {}
        return {key: value["pid"] for key, value in env.items() if isinstance(value, dict) and "pid" in value}

    def _clear_stale(self, log: Any) -> None:
        if not self.env_file.exists():
            return
        for key, pid in self._recorded_pids().items():
            log(f"{self.env_file}: recorded {key} process {pid} is not running; cleaning up")
        self.down(log=log)

    def _write_env(self) -> dict[str, Any]:
        env: dict[str, Any] = {}
        for role, broker in self.brokers.items():
            env[role] = {
                "name": broker.name,
                "stomp": f"{LOOPBACK}:{broker.ports.stomp}",
                "openwire": f"{LOOPBACK}:{broker.ports.openwire}",
                "pid": broker.pid,
                "data_dir": str(broker.data_dir),
                "log": str(broker.log_file),
            }
        env["aws"] = {"endpoint": self.moto.endpoint, "region": DEFAULT_REGION, "pid": self.moto.pid}
        self.state_dir.mkdir(parents=True, exist_ok=True)
        tmp = self.env_file.with_suffix(".tmp")
        tmp.write_text(json.dumps(env, indent=2) + "\n", encoding="utf-8")
        tmp.replace(self.env_file)
        return env


def _state(pid: int | None, alive: bool, answering: bool) -> str:
    if pid is None:
        return "stopped"
    if not alive:
        return f"stale (pid {pid} is gone)"
    return "running" if answering else "starting"
