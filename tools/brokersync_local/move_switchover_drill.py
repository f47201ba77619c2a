"""``brokersync drill --mode move-then-switchover``: an active-active queue moved to DR, then a switchover.

A pair that consumes one active-active queue on its DR broker is still switched over as a
whole, and the switchover reboots that broker, whose relay captures the queue there:

1. the queue is consumed on the primary, produced to on both brokers;
2. **its consumers move to the DR broker** with the queue-move state machine, the producers
   running throughout;
3. **a switchover** makes the DR broker primary. Every application of the queue stops first,
   its consumers on the DR broker included, as the runbook says; the drain waits for the
   primary's purge of what the DR broker consumed, and for the DR broker's relay to have read
   every departure before its reboot (decision 0055);
4. the applications run on the new primary, which consumes the queue as it did before.

Counted as every drill counts: lost, duplicates (consumed on both brokers), what the old
primary still holds of what was consumed, and the audit's ``advisories_lost``, which a planned
switchover must leave at 0.
"""

from __future__ import annotations

import time
from typing import Any

from brokersync_local.drill import Drill


class MoveThenSwitchoverDrill(Drill):
    def _run_traffic(self) -> dict[str, Any]:
        settings = self.settings
        old, new = self.topology.primary.name, self.topology.dr.name
        producer, consumer = self._start_applications(old)
        # A third of the drill on each side before the next step, whatever the move took.
        phase_s = settings.duration / 3
        self.out(
            f"drill move-then-switchover: {settings.rate:.0f} msg/s on each broker; {self.queue} moves to {new} "
            f"after {phase_s:.0f}s, and the pair switches over to {new} {phase_s:.0f}s after that"
        )
        self.phase = f"steady load on both brokers, {self.queue} consumed on {old}"
        self._sleep_until(phase_s)

        self.phase = f"moving {self.queue} to {new}"
        self._move_queue(consumer)
        self.facts["move_s"] = self.facts.pop("rto_s")
        self.facts["move_execution"] = self.facts.pop("execution")
        time.sleep(phase_s)

        self.phase = "switchover running"
        self._switchover(producer, consumer)
        self._applications_to_new_primary(producer, consumer, new)

        time.sleep(max(settings.min_after_switch_s, self.timeline.started + settings.duration - time.time()))
        return self._wind_down(producer, consumer, old, new)

    def _counts(self, old: str, new: str) -> dict[str, Any]:
        return super()._counts(old, new) | {"move_s": self.facts.get("move_s")}
