"""A deployed two-region pair that stays up for the operator CLI tests: nothing runs on it but what they run.

It is the region drills' world (two AWS endpoints, both stacks deployed from
``template.yaml``, the replication stand-in, a relay worker per region, the purge loop in the
DR region), set up and warmed up the same way, with no applications and no clock: each test
drives it with ``brokersync`` as an operator's shell would (:meth:`cli`).
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict
from pathlib import Path
from typing import Any

from brokersync.broker.statistics import StatisticsClient
from brokersync.failover.steps import TRANSITION_RECORD
from brokersync.ledger.control import ControlRecords, control_model
from brokersync.roles import ROLES_RECORD
from brokersync.topology import CONSUMED_QUEUE
from brokersync_local.browsing import browse
from brokersync_local.deploy import LEDGER_TABLE
from brokersync_local.drill import DrillSettings
from brokersync_local.ports import port_answers
from brokersync_local.region_drill import RegionLossDrill
from brokersync_local.world import WorldPorts


class OperatorPair(RegionLossDrill):
    """The region-loss drill's set-up without its traffic: a pair an operator looks after."""

    def cli(self, region: str, *args: str) -> tuple[int, dict[str, Any]]:
        """``brokersync ARGS --pair local`` in ``region``'s shell: exit code and the JSON it printed."""
        return self._run_cli(region, *args)

    def text_cli(self, region: str, *args: str) -> tuple[int, str]:
        """``brokersync ARGS --pair local`` in ``region``'s shell: exit code and what it printed for people."""
        done = self._cli_process(region, *args)
        return done.returncode, done.stdout

    def broker_state(self, name: str) -> dict[str, Any]:
        """What ``name`` holds: each synced queue's and outflow's messages (ids) and counters, and the advisories."""
        queues = [q.name for q in self.topology.queues] + [self.topology.dr_name(q) for q in self.topology.queues]
        # Browsed first: a browse creates a destination that did not exist (a DR broker's unused
        # outflow), and the counters read after it then exist in every reading.
        ids = {q: sorted(f.headers["message-id"] for f in browse(self.connectors[name], q)) for q in queues}
        stats = StatisticsClient(self.connectors[name]).queue_stats([*queues, CONSUMED_QUEUE])
        counters = {q: (s.size, s.enqueue_count, s.dequeue_count) for q, s in stats.items()}
        return {"ids": ids, "counters": counters}

    def stop_broker(self, name: str) -> None:
        """Stop broker ``name`` in the process running it now (the Amazon MQ stand-in reboots into new ones)."""
        slot = next(role for role, broker in self.world.brokers.items() if broker.name == name)
        broker = self.world.brokers[slot]
        broker.pid = self.world.read_env()[slot].get("pid") or broker.pid
        broker.stop()
        if port_answers(broker.ports.stomp):
            raise AssertionError(f"{name} still answers after stop")

    def records(self) -> dict[str, Any]:
        """The role and transition records as each region's replica holds them, versions included."""
        found: dict[str, Any] = {}
        for region in self.world.regions:
            records = ControlRecords(control_model(LEDGER_TABLE, region, self.world.endpoint))
            for name in (ROLES_RECORD, TRANSITION_RECORD):
                record = records.get(name)
                found[f"{region}/{name}"] = asdict(record) if record else None
        return found

    def status_until(self, region: str, code: int, timeout_s: float = 90.0) -> tuple[int, dict[str, Any]]:
        """``status --json`` polled until it exits ``code`` (the last reading when it never does)."""
        deadline = time.monotonic() + timeout_s
        while True:
            found, status = self.cli(region, "status", "--json")
            if found == code or time.monotonic() > deadline:
                return found, status
            time.sleep(3)


@contextmanager
def operator_pair(topology: Path, base: Path, ports: WorldPorts) -> Iterator[OperatorPair]:
    """A warmed-up two-region pair for the length of the block; everything it started is stopped after."""
    saved = dict(os.environ)
    settings = DrillSettings(mode="region-loss", topology=topology, state_dir=base / "pair", ports=ports)
    pair = OperatorPair(settings, out=lambda _line: None)
    pair.world.destroy()
    pair.world.up(log=lambda _line: None)
    try:
        pair._deploy()
        pair._warm_up()
        yield pair
    finally:
        try:
            pair._stop_sync()
        finally:
            pair.world.destroy()
            os.environ.clear()
            os.environ.update(saved)
