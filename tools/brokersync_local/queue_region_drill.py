"""``brokersync drill --mode move-then-region-loss``: one active-active queue moved under load, then its region lost.

Two regions (:class:`~brokersync_local.regions.TwoRegionWorld`), the queue produced to on both
brokers throughout, as regional front ends would:

1. the queue is consumed on the primary (region A);
2. **its consumers move to the DR broker** (region B) with the queue-move state machine, run
   in B, while both producers keep writing; the pair's roles do not change;
3. **region B is lost** (partitioned: its broker, AWS endpoint, functions and relay), with the
   queue consumed there. B's front end fails over to A, and every queue consumed on B is moved
   back to A with ``oldSideLost`` (run in A): the move waits only for A's purge, then A
   consumes the queue;
4. **region B returns**: what was produced on B during the loss flows to A, and B's purge
   removes what A consumed meanwhile.

Counted message by message, as every drill: lost (a message produced and confirmed that is
neither consumed nor on a broker), duplicates (consumed on both brokers) against their bounds
(consumed on B before the loss and still on A then; or, for B's own messages, a copy still in
B's outflow to A at the loss), the planned move's time, and the RTO of
the region loss (from the partition to the move back's success).
"""

from __future__ import annotations

import time
from typing import Any

from brokersync_local.drill import Drill, move_drain_s, move_figures
from brokersync_local.errors import LocalWorldError
from brokersync_local.region_drill import RegionLossDrill


class MoveThenRegionLossDrill(RegionLossDrill):
    def _run_traffic(self) -> dict[str, Any]:
        settings = self.settings
        if not self.topology.queue(self.queue).copies_both_ways:
            raise LocalWorldError(f"--queue {self.queue}: this drill moves an active-active queue")
        east, west = self.topology.primary.name, self.topology.dr.name
        producer, consumer = self._start_applications(east)
        # Each phase lasts a quarter of the drill after the step before it has finished, so the
        # queue is really consumed on each side whatever the moves take.
        phase_s = settings.duration / 4
        self.out(
            f"drill move-then-region-loss: {settings.rate:.0f} msg/s on each broker; {self.queue} moves to {west} "
            f"after {phase_s:.0f}s, {self.away} is lost {phase_s:.0f}s after that, and back {phase_s:.0f}s later"
        )
        self.phase = f"steady load on both brokers, {self.queue} consumed on {east}"
        self._sleep_until(phase_s)

        consumer.pause()
        quiesced = self.timeline.mark(f"consumers of {self.queue} stopped on {east}")
        self.facts["move"] = self._execute_in(self.away, "MoveQueueStateMachine", self._move(west))
        self.facts["move_s"] = round(self.timeline.mark(f"{self.queue} moved to {west}") - quiesced, 3)
        self.facts["move_drain_s"] = move_drain_s(self.facts["move"])
        consumer.move_to(west, self.connectors[west])
        self.phase = f"{self.queue} consumed on {west}, produced on both"
        time.sleep(phase_s)

        self.world.partition(self.away)
        partitioned = self.timeline.mark(f"region {self.away} partitioned with {self.queue}'s consumers")
        self.facts["partitioned_at"] = partitioned
        self.facts["on_survivor_at_partition"] = self._keys_on(east)
        # Copies of the lost region's own messages still in its outflow to the survivor: one
        # consumed there arrives only when the region returns, after any purge could act.
        self._copy_store_at_partition("dr", self.topology.copy_name(self.queue, self.topology.primary))
        assert self.front_end is not None
        self.front_end.move_to(east, self.connectors[east])  # the lost region's front end fails over
        self.phase = f"region {self.away} lost: moving {self.queue} back to {east}"
        # As the runbook says: every queue consumed in the lost region moves back in one execution.
        # The move back waits for the survivor's purge for at most half the drill's patience, then
        # moves anyway: a loaded host's purge can take minutes over a backlog this deep.
        wait_s = max(10, int(settings.execution_timeout_s / 2))
        back = {"from": west, "to": east, "oldSideLost": True, "timeoutSeconds": wait_s}
        self.facts["execution"] = self._execute_in(self.home, "MoveQueueStateMachine", back)
        self.facts["moved_with_pending_purge"] = move_figures(self.facts["execution"]).get("movedWithPendingPurge", 0)
        self.facts["rto_s"] = round(self.timeline.mark(f"{self.queue} moved back to {east}") - partitioned, 3)
        self.facts["on_survivor_after_move"] = self._keys_on(east)  # before the consumer is there
        consumer.move_to(east, self.connectors[east])
        time.sleep(phase_s)

        self.world.heal(self.away)
        self.facts["healed_at"] = self.timeline.mark(f"region {self.away} back")
        self.phase = f"{self.away} back: its copies flow in, its purge catches up"
        time.sleep(max(settings.min_after_switch_s, phase_s))
        producer.pause()
        self.front_end.pause()
        self.timeline.mark("producers stopped")
        self._drain(consumer, east)
        self.timeline.mark(f"consumer drained {east}")
        for client in (producer, consumer, self.front_end):
            client.stop()
        return self._outcome(east, west)

    def _move(self, to: str, *, lost: bool = False) -> dict[str, Any]:
        request: dict[str, Any] = {
            "queue": self.queue,
            "to": to,
            "timeoutSeconds": int(self.settings.execution_timeout_s),
        }
        return request | ({"oldSideLost": True} if lost else {})

    def _purged_broker(self, old: str, new: str) -> str:
        """The queue moved back to ``old``: the returned region's broker is where its purge removes."""
        return new

    def _counts(self, old: str, new: str) -> dict[str, Any]:
        # The duplicates a lost consuming region may cause: consumed there, still on the survivor at
        # the partition. Counted at the end: frames already delivered are consumed after the partition.
        at_risk = self.log.consumed_on(new) & self.facts.get("on_survivor_at_partition", set())
        self.facts["pending_purge_at_kill"] = len(at_risk)
        at_partition = self.facts.get("on_survivor_at_partition", set())
        self._read_bridge_at_partition(new, at_partition, self.facts.get("on_survivor_after_move", at_partition))
        result = Drill._counts(self, old, new)
        with self.log.lock:
            consumed = set(self.log.consumed)
        on = {broker: self._keys_on(broker) for broker in (old, new)}
        result |= {
            "regions": {"lost_and_returned": self.away, "survivor": self.home},
            "move_s": self.facts.get("move_s"),
            "moved_with_pending_purge": self.facts.get("moved_with_pending_purge"),
            "consumed_left_on": {broker: len(keys & consumed) for broker, keys in on.items()},
            "purge_loops_running": self._purge_loops(),
        }
        return result
