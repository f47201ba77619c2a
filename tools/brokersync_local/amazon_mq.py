"""Stand-in for what moto's Amazon MQ lacks: pending revisions, reboots of the real broker, states.

moto's MQ API keeps brokers, configurations and revisions, but ``update_broker`` makes a
revision current at once, ``reboot_broker`` does nothing and a broker is always RUNNING.
Inside the local AWS server this module makes them behave as Amazon MQ documents:

* ``update_broker`` with a configuration sets it as *Pending*; the broker keeps running its
  current revision until it is rebooted;
* ``reboot_broker`` turns the broker REBOOT_IN_PROGRESS, makes the pending revision current,
  stops the real broker process and starts it again on that revision (decoded from moto and
  wrapped only in what Amazon MQ manages), and turns it RUNNING when its transports answer,
  or CRITICAL_ACTION_REQUIRED when it does not come back. A broker whose process is dead
  (a drill killed it) is simply started: that is a region coming back.
* ``promote`` (CRDR) is refused with a BadRequestException that says why: the local pair is
  two single-instance brokers, not a CRDR pair, and pretending otherwise would prove nothing.

Brokers are matched to local processes by name (the topology's broker name), through the
world's ``env.json``.
"""

from __future__ import annotations

import base64
import json
import logging
import os
import threading
from pathlib import Path
from typing import Any

from moto.mq import urls as mq_urls
from moto.mq.exceptions import BadRequestException
from moto.mq.models import Broker, MQBackend
from moto.mq.responses import MQResponse

from brokersync_local.broker_process import BrokerProcess
from brokersync_local.pids import record_pid
from brokersync_local.wrapper import LocalPorts, wrap_for_local

STATE_DIR_VARIABLE = "BROKERSYNC_LOCAL_STATE_DIR"
logger = logging.getLogger(__name__)
_env_lock = threading.Lock()


def _env_file() -> Path | None:
    state_dir = os.environ.get(STATE_DIR_VARIABLE)
    return Path(state_dir) / "env.json" if state_dir else None


def _local_broker(name: str) -> tuple[str, dict[str, Any]] | None:
    env_file = _env_file()
    if env_file is None or not env_file.exists():
        return None
    env = json.loads(env_file.read_text())
    for role in ("primary", "dr"):
        if env.get(role, {}).get("name") == name:
            return role, env[role]
    return None


def _record_pid(role: str, pid: int | None) -> None:
    env_file = _env_file()
    if env_file is None:
        return
    with _env_lock:
        record_pid(env_file, role, pid)


def _port(address: str) -> int:
    return int(address.rsplit(":", 1)[1])


def restart_with_revision(backend: MQBackend, broker: Any) -> None:
    """Restart the local process behind ``broker`` on its current configuration revision."""
    found = _local_broker(broker.name)
    if found is None:
        broker.state = "RUNNING"  # a broker with no local process: nothing to restart
        return
    role, entry = found
    current = broker.configurations["current"]
    revision = backend.describe_configuration_revision(current["Id"], str(current["Revision"]))
    document = base64.b64decode(revision.data).decode("utf-8")
    ports = LocalPorts(openwire=_port(entry["openwire"]), stomp=_port(entry["stomp"]))
    process = BrokerProcess(
        name=broker.name, base_dir=Path(entry["data_dir"]).parent, ports=ports, pid=entry.get("pid")
    )
    try:
        process.stop()
        process.prepare(wrap_for_local(document, broker.name, ports))
        process.start()
        _record_pid(role, process.pid)
        process.wait_ready(timeout_s=90)
        broker.state = "RUNNING"
    except Exception:
        logger.exception("local reboot of %s failed", broker.name)
        broker.state = "CRITICAL_ACTION_REQUIRED"


def _reboot_broker(self: MQBackend, broker_id: str) -> None:
    broker = self.describe_broker(broker_id)
    broker.state = "REBOOT_IN_PROGRESS"
    if pending := broker.configurations.pop("pending", None):
        broker.configurations["history"].append(broker.configurations["current"])
        broker.configurations["current"] = pending
    threading.Thread(target=restart_with_revision, args=(self, broker), daemon=True).start()


_original_update = Broker.update


def _update_broker(self: Broker, configuration: dict[str, Any] | None = None, **changes: Any) -> None:
    _original_update(self, configuration=None, **changes)
    if configuration:
        self.configurations["pending"] = configuration


class LocalPromoteRefused(BadRequestException):
    def __init__(self, broker_id: str) -> None:
        super().__init__(
            f"Promote is not available for broker [{broker_id}] in the local world: the local pair is two "
            "single-instance brokers, not a CRDR pair. Use a topology without crdr to drill locally."
        )


def _promote(self: MQResponse) -> None:
    raise LocalPromoteRefused(self._get_param("BrokerId"))


def install() -> None:
    """Patch moto's MQ backend in this process (the local AWS server calls this at start)."""
    MQBackend.reboot_broker = _reboot_broker  # type: ignore[method-assign]
    Broker.update = _update_broker  # type: ignore[method-assign]
    MQResponse.promote = _promote  # type: ignore[attr-defined]
    mq_urls.url_paths["{0}/v1/brokers/(?P<broker_id>[^/]+)/promote$"] = MQResponse.dispatch
