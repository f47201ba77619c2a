"""``brokersync drill --mode region-loss``: the primary's whole region lost, then back, on two regions.

The drill runs on :class:`~brokersync_local.regions.TwoRegionWorld`: each region has its own
AWS endpoint and its own stack deployed from ``template.yaml`` (the functions play the roles
of their own region only), the ledger is two regional tables kept in step by the replication
stand-in, and a relay worker runs in each region as each stack's scheduled relay would. Then:

1. steady load on the primary (region A), sync running, the purge loop in region B;
2. **region A is partitioned** at a random moment: its broker, its AWS endpoint and functions
   and its relay stop answering (SIGSTOP), state intact. The copies still in A's ``Q.DR``
   outflow are read exactly from a copy of A's store (what the failover can lose);
3. the failover is started **in region B** (A's endpoint does not answer) and the applications
   move to B;
4. **region A returns** (SIGCONT): its broker still runs the primary configuration. The drill
   checks it is fenced: A's relay starts no pass (it reads the peer's newer epoch), and A's
   health probe reports the stale primary (what raises the alarm);
5. the failback (rejoin) makes A the DR broker again; the purge loop now runs in A.

It counts what :mod:`drill` counts (lost against the copies in the bridge, duplicates against
what was consumed and not yet purged at the partition, RTO) and adds what only two regions
show: relay passes that overlapped across regions, relay passes A started after it returned,
the stale primary seen, and where purge loops run at the end (one, in the DR's region).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import boto3

from brokersync.failover.sync_control import SyncControl, SyncSwitches
from brokersync.ledger import dynamodb_ledger
from brokersync.ledger.base import LedgerStore
from brokersync.topology import Role, load_topology
from brokersync_local.deploy import LEDGER_TABLE, PAIR_NAME, RELAY_RULE, deploy, register_brokers
from brokersync_local.drill import Drill, DrillSettings
from brokersync_local.drill_traffic import duplicates_between
from brokersync_local.errors import LocalWorldError
from brokersync_local.forensics import copy_store, read_dead_store
from brokersync_local.regions import TwoRegionWorld
from brokersync_local.sync import SyncWorkers
from brokersync_local.sync_worker import aws_environment

#: How long the returning region is watched before the failback (replication lag and a few polls).
FENCE_WATCH_S = 6.0


class RegionLossDrill(Drill):
    #: The lost broker's KahaDB store, copied at the partition, and the outflow to read from it.
    _store_at_partition: tuple[Path, str] | None = None

    def __init__(self, settings: DrillSettings, out: Callable[[str], None] = print) -> None:
        super().__init__(settings, out)
        self.world: TwoRegionWorld = self._make_world()
        self.workers = SyncWorkers(self.world, settings.topology)  # the relays of this world's regions
        self.topology = self.world.topology
        self.home = self.world.region_of("primary")
        self.away = self.world.region_of("dr")

    def _make_world(self) -> TwoRegionWorld:
        return TwoRegionWorld(load_topology(self.settings.topology), self.settings.state_dir, self.settings.ports)

    # -- set-up -------------------------------------------------------------------------------------
    def _client(self, service: str, region: str) -> Any:
        return boto3.client(service, endpoint_url=self.world.endpoint, region_name=region)

    def _deploy(self) -> None:
        endpoint = self.world.endpoint
        aws_environment(endpoint, self.home)
        ids = register_brokers(self.topology, endpoint, self.home)
        #: moto's broker ids, which an operator's topology would carry as each broker's id.
        self.broker_ids = ids
        self.stacks: dict[str, dict[str, str]] = {}
        for region, peer in ((self.home, self.away), (self.away, self.home)):
            self.stacks[region] = deploy(
                self.topology,
                self.world.state_dir / f"stack-{region}",
                endpoint,
                region,
                broker_ids=ids,
                overrides=self._overrides(),
                role_region=region,
                peer_region=peer,
            )
        self.world.start_replication(LEDGER_TABLE)
        self.machines = self.stacks[self.home]
        self.sfn = self._client("stepfunctions", self.home)
        self.sync = self._sync_control(self.home)
        self._use_ledger_in(self.away)
        for region in (self.home, self.away):
            pids = self.workers.start(log=lambda _m: None, only=("relay",), role_region=region)
            self.world.adopt(region, pids[f"relay-{region}"])
        self.sync.start(self.away)
        self.ready.set()

    def _use_ledger_in(self, region: str) -> None:
        """Count pending keys in ``region``'s replica: the DR's, where the purge marks them first."""
        self.ledger = dynamodb_ledger(LEDGER_TABLE, region=region, host=self.world.endpoint)
        self.ledger_region = region

    def _risk_ledger(self) -> LedgerStore | None:
        """No sample from a partitioned replica: its endpoint would hold the sampler for minutes."""
        if getattr(self, "ledger_region", None) in self.world.partitioned:
            return None
        return super()._risk_ledger()

    def _overrides(self) -> dict[str, dict[str, str]]:
        """Function environment beyond the template's: short purge invocations, so a drill sees many."""
        return {"PurgeDrFunction": {"BROKERSYNC_PURGE_MAX_SECONDS": "5"}}

    def _sync_control(self, region: str) -> SyncControl:
        return SyncControl(
            SyncSwitches(RELAY_RULE, None, self.stacks[region]["PurgeLoopStateMachine"]),
            self._client("events", region),
            self._client("lambda", region),
            self._client("stepfunctions", region),
            regional_sfn=lambda other: self._client("stepfunctions", other),
        )

    def _run_cli(self, region: str, *args: str, ids: dict[str, str] | None = None) -> tuple[int, dict[str, Any]]:
        """``brokersync ARGS`` run as an operator runs it against ``region`` (exit code, JSON on stdout)."""
        done = self._cli_process(region, *args, ids=ids)
        try:
            return done.returncode, dict(json.loads(done.stdout))
        except ValueError as e:
            raise LocalWorldError(f"brokersync {' '.join(args)} exited {done.returncode}: {done.stderr[-2000:]}") from e

    def _cli_process(
        self, region: str, *args: str, ids: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        """``brokersync ARGS --pair local`` run to its end in ``region``'s shell.

        The CLI is given what an operator's shell has: an endpoint (AWS's, here the local one),
        a region, credentials, and the stack's topology file; locally also moto's broker ids (``ids``, else
        the ones registered at deploy), where an operator's topology holds the real ones.
        """
        env = {
            **os.environ,
            "AWS_ENDPOINT_URL": self.world.endpoint,
            "AWS_REGION": region,
            "AWS_DEFAULT_REGION": region,
            "AWS_ACCESS_KEY_ID": "local",
            "AWS_SECRET_ACCESS_KEY": "local",
            "BROKERSYNC_TOPOLOGY": str(self.world.state_dir / f"stack-{region}" / "topology.local.yaml"),
        }
        ids = ids if ids is not None else getattr(self, "broker_ids", None)
        if ids is not None:
            env["BROKERSYNC_BROKER_IDS"] = json.dumps(ids)
        return subprocess.run(  # our own CLI, our own interpreter
            [sys.executable, "-m", "brokersync_cli.main", *args, "--pair", PAIR_NAME],
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )

    def _execute_in(self, region: str, machine: str, payload: dict[str, Any]) -> dict[str, Any]:
        self.sfn, self.machines = self._client("stepfunctions", region), self.stacks[region]
        return self._execute(machine, payload)

    # -- the region loss ------------------------------------------------------------------------------
    def _failover(self) -> None:
        new = self.topology.dr.name
        self.world.partition(self.home)
        partitioned = self.timeline.mark(f"region {self.home} partitioned (broker, AWS endpoint, functions)")
        self.facts["partitioned_at"] = partitioned
        # What was on DR at the partition; those of them the applications consumed on the old
        # primary are the duplicates a region loss may cause (``pending_purge_at_kill``, counted
        # by :meth:`Drill._counts` at the end: frames already delivered are consumed after this moment).
        self.facts["on_dr_at_kill"] = self._keys_on(new)
        self._copy_store_at_partition("primary", self.topology.dr_name(self.queue))
        self.facts["execution"] = self._execute_in(self.away, "FailoverStateMachine", {"mode": "FAILOVER"})
        self.facts["rto_s"] = round(self.timeline.mark(f"failover succeeded in {self.away}") - partitioned, 3)
        # Read again before the applications move: a copy that reached DR after the partition's
        # browse was on the wire at the partition (:func:`copies_on_the_wire`), in the bridge.
        self.facts["on_dr_after_failover"] = self._keys_on(new)

    def _after_switch(self) -> None:
        self.world.heal(self.home)
        healed = self.timeline.mark(f"region {self.home} back")
        self.facts["healed_at"] = healed
        time.sleep(FENCE_WATCH_S)
        probe = self._client("lambda", self.home).invoke(FunctionName="brokersync-HealthProbeFunction", Payload=b"{}")
        report = json.loads(probe["Payload"].read() or b"{}")
        if probe.get("FunctionError"):
            raise LocalWorldError(f"the health probe in {self.home} failed: {report}")
        self.facts["stale_primary_seen"] = report.get("stale_primaries", [])
        self.facts["relay_passes_after_return"] = len([p for p in self._passes(self.home) if p["start"] > healed + 0.5])
        started = self.timeline.mark(f"failback (rejoin of {self.topology.primary.name}) started in {self.away}")
        self.facts["failback_result"] = self._execute_in(self.away, "FailbackStateMachine", {})
        self.facts["failback_s"] = round(self.timeline.mark("failback succeeded") - started, 3)
        # The rejoined broker's region holds DR now: its purge loop marks keys in its replica first.
        self._use_ledger_in(self.home)

    # -- what only two regions show ---------------------------------------------------------------------
    def _passes(self, region: str) -> list[dict[str, float]]:
        path: Path = self.world.state_dir / f"passes-relay-{region}.jsonl"
        if not path.exists():
            return []
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]

    def _relay_overlap_s(self) -> float:
        """Seconds during which both regions' relays were in a pass (time frozen in a partition excluded)."""
        cut_from, cut_to = self.facts.get("partitioned_at", 0.0), self.facts.get("healed_at", 0.0)

        def running(passes: list[dict[str, float]], frozen: bool) -> list[tuple[float, float]]:
            spans = []
            for p in passes:
                start, end = p["start"], p["end"]
                if frozen and start < cut_to and end > cut_from:
                    spans += [(start, min(end, cut_from)), (max(start, cut_to), end)]
                else:
                    spans.append((start, end))
            return [(a, b) for a, b in spans if b > a]

        home = running(self._passes(self.home), frozen=True)
        away = running(self._passes(self.away), frozen=False)
        return sum(max(0.0, min(b1, b2) - max(a1, a2)) for a1, b1 in home for a2, b2 in away)

    def _purge_loops(self) -> dict[str, int]:
        loops = {}
        for region, stack in self.stacks.items():
            sfn = self._client("stepfunctions", region)
            running = sfn.list_executions(stateMachineArn=stack["PurgeLoopStateMachine"], statusFilter="RUNNING")
            loops[region] = len(running["executions"])
        return loops

    def _copy_store_at_partition(self, role: Role, outflow: str) -> None:
        """Copy the lost broker's store as it stands, to read ``outflow`` from it when counting.

        Copying takes a moment; a reader broker takes seconds to start, and started here those
        seconds would be the drill's, counted in the RTO (or delaying a move back).
        """
        into = self.world.state_dir / f"{role}-store-at-partition"
        self._store_at_partition = (copy_store(self.world.brokers[role].data_dir, into), outflow)

    def _read_bridge_at_partition(self, lost: str, at_partition: set[str], after_switch: set[str]) -> None:
        """The copies that were in the ``lost`` broker's bridge at the partition.

        Those in its outflow are read from its store's copy; those it had already written to the
        bridge's connection reached the survivor between its two browses (``at_partition``, and
        ``after_switch`` before any application moved there).
        """
        if self._store_at_partition is not None:
            store, outflow = self._store_at_partition
            in_outflow = set(read_dead_store(store, [outflow])[outflow])
            self._in_the_bridge(in_outflow, self._copies_on_the_wire(lost, at_partition, after_switch))

    def _read_primary_bridge_at_partition(self, old: str) -> None:
        at_partition = self.facts.get("on_dr_at_kill", set())
        self._read_bridge_at_partition(old, at_partition, self.facts.get("on_dr_after_failover", at_partition))

    def _counts(self, old: str, new: str) -> dict[str, Any]:
        self._read_primary_bridge_at_partition(old)
        result = super()._counts(old, new)
        result["unexplained_duplicates"] = self._unexplained_duplicates(old, new)
        result |= {
            "regions": {"lost_and_returned": self.home, "survivor": self.away},
            "relay_overlap_s": round(self._relay_overlap_s(), 3),
            "relay_passes_after_return": self.facts.get("relay_passes_after_return"),
            "stale_primary_seen": self.facts.get("stale_primary_seen"),
            "purge_loops_running": self._purge_loops(),
        }
        return result

    def _unexplained_duplicates(self, old: str, new: str) -> dict[str, int]:
        """Duplicates neither on DR at the partition nor in the lost broker's bridge, split by what is known of them.

        The drill's bound says there are none. Should a run find some, this says whether the
        application had consumed them on the old primary before the partition, whether DR held
        their copy once the failover was done, and whether they were produced on the lost
        broker, so that the run explains itself.
        """
        partitioned = self.facts.get("partitioned_at")
        with self.log.lock:
            duplicates = duplicates_between(self.log.brokers_consumed_on(), old, new)
        unexplained = duplicates - self.facts.get("on_dr_at_kill", set()) - self.facts.get("in_bridge_keys", set())
        before = self.log.consumed_on(old, before=partitioned) if partitioned is not None else set()
        later_on_dr = self.facts.get("on_dr_after_failover", set())
        with self.log.lock:
            sent_to_old = {key for key in unexplained if self.log.sent_to.get(key) == old}
        return {
            "count": len(unexplained),
            "consumed_on_old_before_partition": len(unexplained & before),
            "on_dr_after_failover": len(unexplained & later_on_dr),
            "produced_on_old": len(sent_to_old),
        }

    def _stop_sync(self) -> None:
        self.workers.stop(log=lambda _m: None)
        for region in self.stacks if hasattr(self, "stacks") else ():
            try:
                self._sync_control(region).stop("drill finished")
            except Exception as e:  # a region's endpoint may be gone already
                self.out(f"drill tear-down in {region}: {e}")


def run_region_drill(settings: DrillSettings, out: Callable[[str], None] = print) -> dict[str, Any]:
    return RegionLossDrill(settings, out).run()
