"""``brokersync drill --mode new-dr-region``: the primary's region lost for good, and a third region.

The drill follows the runbook's "A new DR region" step by step, on the local world's regions:

1. steady load on the primary (region A), sync running, the purge loop in region B;
2. **region A is partitioned** and the failover runs in B, as in ``region-loss``; then A is
   **abandoned** (everything it ran killed: it never answers again) and the applications stay on B;
3. the operator pairs B with a broker in a third region C (a spare region of the world, whose
   AWS endpoint starts empty):

   * a new broker in C, created with the DR configuration (``brokersync render --role dr``);
   * the topology edited: the lost broker's entry replaced with the new one (the role record
     still names B primary, and decides);
   * a ledger replica in C (the replication stand-in restarted over B and C fills it from B's
     stream, as AWS fills a replica it creates), C's stack deployed, B's stack updated
     (``PeerRegion`` C, the new topology);
   * B's primary configuration re-applied with ``brokersync apply-config --role primary --reboot``
     (its network connector pointed at the lost broker);
   * the failback run in B: the new broker is configured as DR, what is consumed is removed from
     it, the role record names it, and the purge loop starts in C;
4. load continues; the drill checks that copies reach the new DR broker, then drains and counts.

What it adds to the region-loss counts: how long the re-pair took, the messages that were on B
when it began (they have no copy until consumed: the copy path starts at the composite queue),
copies made after the re-pair that did not reach C, messages consumed on B still on C, and where
purge loops run (C only).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from brokersync.broker.stomp import StompConnector
from brokersync.topology import Topology, load_topology
from brokersync_local.deploy import LEDGER_TABLE, deploy, register_brokers, write_local_topology
from brokersync_local.errors import LocalWorldError
from brokersync_local.region_drill import RegionLossDrill
from brokersync_local.regions import TwoRegionWorld
from brokersync_local.sync import SyncWorkers
from brokersync_local.wrapper import LocalPorts

THIRD_REGION = "eu-west-1"
#: The new broker's name (the lost broker's entry is replaced with it).
THIRD_BROKER = "orders-euw1"
#: The new broker's local ports sit this far from the lost one's, never on them: the survivor's
#: stale network connector must keep failing until its configuration is re-applied, as in AWS.
THIRD_PORT_STEP = 4
#: How long copies made after the re-pair have to reach the new DR broker.
COPY_CHECK_S = 20.0


def third_broker_entry(topology: Topology, lost: str) -> Topology:
    """``topology`` with the lost broker's entry replaced by a broker in the third region (step 2)."""
    entry = next(b for b in topology.brokers if b.name == lost)
    arn = f"arn:aws:mq:{THIRD_REGION}:111122223333:broker:{THIRD_BROKER}:b-3c4d5e6f-7a8b-4c9d-8e0f-1a2b3c4d5e6f"
    host = f"b-3c4d5e6f-7a8b-4c9d-8e0f-1a2b3c4d5e6f-1.mq.{THIRD_REGION}.amazonaws.com"
    new = entry.model_copy(
        update={
            "name": THIRD_BROKER,
            "broker_id": arn,
            "region": THIRD_REGION,
            "openwire": [f"ssl://{host}:61617"],
            "stomp": [f"stomp+ssl://{host}:61614"],
            "credentials_secret": f"brokersync/{THIRD_BROKER}",
        }
    )
    return topology.model_copy(update={"brokers": [new if b.name == lost else b for b in topology.brokers]})


class NewDrRegionDrill(RegionLossDrill):
    def _make_world(self) -> TwoRegionWorld:
        return TwoRegionWorld(
            load_topology(self.settings.topology), self.settings.state_dir, self.settings.ports, (THIRD_REGION,)
        )

    def _old_primary_alive(self) -> bool:
        return False  # its region is gone for good

    def _after_switch(self) -> None:
        lost, survivor = self.home, self.away
        survivor_broker = self.topology.dr.name
        self.world.abandon(lost)
        self.stacks.pop(lost)
        self.timeline.mark(f"region {lost} gone for good")
        started = self.timeline.mark(f"re-pairing {survivor_broker} with a new broker in {THIRD_REGION}")
        self.facts["on_survivor_at_repair"] = self._keys_on(survivor_broker)

        self.phase = f"re-pair: a new broker in {THIRD_REGION}, the topology edited"
        edited = third_broker_entry(load_topology(self.settings.topology), self.topology.primary.name)
        topology_file = write_local_topology(edited, self.world.state_dir / "topology-repaired.yaml")
        self.world.add_region(THIRD_REGION)
        lost_ports = self.world.ports.for_role("primary")
        ports = LocalPorts(lost_ports.openwire + THIRD_PORT_STEP, lost_ports.stomp + THIRD_PORT_STEP)
        self.world.replace_broker("primary", edited, ports, runs_as="dr")
        self.topology = self.world.topology
        self.connectors[THIRD_BROKER] = StompConnector(self.topology.broker("primary").stomp)
        ids = register_brokers(self.topology.swapped(), self.world.endpoint, survivor)
        self.broker_ids = ids

        self.phase = f"re-pair: ledger replica and stack in {THIRD_REGION}, {survivor}'s stack updated"
        self.stacks[THIRD_REGION] = self._deploy_stack(THIRD_REGION, survivor, ids)
        self.world.start_replication(LEDGER_TABLE)
        self.stacks[survivor] = self._deploy_stack(survivor, THIRD_REGION, ids)
        self._restart_relays(topology_file)
        self.timeline.mark(f"{THIRD_REGION}: broker, ledger replica and stack; {survivor} updated")

        # The runbook: consumers stop for the primary's reboot, so that apply-config can wait
        # until the relay has taken every consumed advisory (a reboot drops those not taken).
        self.phase = f"re-pair: {survivor_broker}'s primary configuration re-applied (a reboot)"
        consumer = self.applications[1]
        consumer.pause()
        self.timeline.mark(f"consumer stopped for {survivor_broker}'s reboot")
        self.facts["apply_config"] = self._apply_primary_configuration(survivor, ids)
        consumer.move_to(survivor_broker, self.connectors[survivor_broker])
        self.timeline.mark(f"{survivor_broker} rebooted onto its re-rendered primary configuration; consumer back")

        self.phase = f"re-pair: the failback in {survivor} makes {THIRD_BROKER} the DR broker"
        self.facts["failback_result"] = self._execute_in(survivor, "FailbackStateMachine", {})
        self.facts["repair_s"] = round(self.timeline.mark(f"{THIRD_BROKER} is the DR broker") - started, 3)
        self._use_ledger_in(THIRD_REGION)
        self.facts["not_copied_after_repair"] = self._copies_reach_new_dr(survivor_broker)

    # -- the runbook's steps, in the local world ------------------------------------------------------
    def _deploy_stack(self, region: str, peer: str, ids: dict[str, str]) -> dict[str, str]:
        return deploy(
            self.topology,
            self.world.state_dir / f"stack-{region}",
            self.world.endpoint,
            region,
            broker_ids=ids,
            overrides=self._overrides(),
            role_region=region,
            peer_region=peer,
        )

    def _restart_relays(self, topology_file: Path) -> None:
        """Each stack's scheduled relay, now reading the edited topology (a stack update does that)."""
        self.workers.stop(log=lambda _m: None)
        self.workers = SyncWorkers(self.world, topology_file)
        for region in self.world.regions:
            pids = self.workers.start(log=lambda _m: None, only=("relay",), role_region=region)
            self.world.adopt(region, pids[f"relay-{region}"])

    def _apply_primary_configuration(self, region: str, ids: dict[str, str]) -> dict[str, Any]:
        """``brokersync apply-config --role primary --reboot``, run as an operator runs it."""
        code, applied = self._run_cli(
            region, "apply-config", "--role", "primary", "--reboot", "--poll", "1", "--timeout", "180", ids=ids
        )
        if code != 0:
            raise LocalWorldError(f"brokersync apply-config failed ({code}): {applied}")
        return applied

    def _copies_reach_new_dr(self, primary: str) -> int:
        """Messages produced after the re-pair and held on the primary whose copy is not on the new DR in time.

        The consumer pauses for the check (a message it took would leave the primary and, once
        purged, the new DR too, proving nothing); the producer then pauses so that the last
        copies can arrive. Both resume afterwards.
        """
        producer, consumer = self.applications
        repaired_at = time.time()
        consumer.pause()
        time.sleep(3.0)
        producer.pause()
        with self.log.lock:
            recent = {k for k, at in self.log.confirmed.items() if at > repaired_at}
        deadline = time.monotonic() + COPY_CHECK_S
        while True:
            missing = (self._keys_on(primary) & recent) - self._keys_on(THIRD_BROKER)
            if not missing or time.monotonic() > deadline:
                break
            time.sleep(1.0)
        self.facts["copied_after_repair"] = len(self._keys_on(primary) & recent)
        for client in (producer, consumer):
            client.move_to(primary, self.connectors[primary])
        self.phase = f"load on {primary}, synced with {THIRD_BROKER}"
        time.sleep(self.settings.min_after_switch_s)  # the re-paired pair under load before the drain
        return len(missing)

    # -- counting -------------------------------------------------------------------------------------
    def _counts(self, old: str, new: str) -> dict[str, Any]:
        self._read_primary_bridge_at_partition(old)
        pending_after = self._settle_purge(purged_on=THIRD_BROKER)
        result = super(RegionLossDrill, self)._counts(old, new)
        with self.log.lock:
            consumed_any = set(self.log.consumed)
        on_third = self._keys_on(THIRD_BROKER)
        held_at_repair = self.facts.get("on_survivor_at_repair", set())
        result |= {
            "regions": {"lost_for_good": self.home, "survivor": self.away, "new_dr": THIRD_REGION},
            "new_dr_broker": THIRD_BROKER,
            "repair_s": self.facts.get("repair_s"),
            "held_on_survivor_at_repair": len(held_at_repair),
            "copied_after_repair": self.facts.get("copied_after_repair"),
            "not_copied_after_repair": self.facts.get("not_copied_after_repair"),
            "already_consumed_on_new_dr": len(on_third & consumed_any),
            "left_on_new_dr": len(on_third),
            "pending_purge_after": pending_after,
            "purge_loops_running": self._purge_loops(),
            "apply_config": self.facts.get("apply_config"),
        }
        return result
