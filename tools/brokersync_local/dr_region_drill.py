"""``brokersync drill --mode dr-region-loss``: the DR region lost for longer than the missing cutoff, then back.

The applications never move: they keep producing to and consuming from the primary while the
DR region (its broker, its AWS endpoint and functions, the purge loop in it, its relay) is
partitioned. Meanwhile the primary's ``Q.DR`` outflow holds every copy, the primary's region
records every consumption in its ledger replica, and replication to the DR replica stalls.

The purge's missing cutoff is set far below the outage (``missing_after_s``), so when the
region returns every key consumed during the outage is older than the cutoff before its copy
has arrived. The purge must not give up on them (the copy path says they can still arrive),
so the drill ends with what a DR region that returns after an hour must end with: nothing
lost, nothing consumed on DR, and no consumed message left on it.
"""

from __future__ import annotations

import time
from typing import Any

from brokersync.broker.statistics import StatisticsClient
from brokersync.config import ENV_PURGE_MISSING_AFTER_S
from brokersync.purge.late_copies import LateCopySweep
from brokersync_local.alarm_evaluator import emf_datapoints
from brokersync_local.browsing import browse
from brokersync_local.region_drill import RegionLossDrill

#: The purge's missing cutoff in this drill: far below the outage, so the copy path decides.
MISSING_AFTER_S = 3.0
PURGE_FUNCTION = "PurgeDrFunction"


class DrRegionLossDrill(RegionLossDrill):
    def _overrides(self) -> dict[str, dict[str, str]]:
        overrides = super()._overrides()
        overrides[PURGE_FUNCTION][ENV_PURGE_MISSING_AFTER_S] = str(MISSING_AFTER_S)
        return overrides

    def _outage_s(self) -> float:
        """The outage lasts the drill's middle third, and always several missing cutoffs."""
        return max(4 * MISSING_AFTER_S, self.settings.duration / 3)

    def _run_traffic(self) -> dict[str, Any]:
        settings = self.settings
        primary, dr = self.topology.primary.name, self.topology.dr.name
        producer, consumer = self._start_applications(primary)
        lose_at = settings.kill_at if settings.kill_at is not None else settings.duration / 3
        outage_s = self._outage_s()
        self.out(
            f"drill dr-region-loss: {settings.rate:.0f} msg/s for {settings.duration:.0f}s, "
            f"{self.away} lost at {lose_at:.1f}s for {outage_s:.0f}s (missing cutoff {MISSING_AFTER_S:.0f}s)"
        )
        self.phase = f"steady load on {primary}, DR region {self.away} lost at {lose_at:.0f}s"
        self._sleep_until(lose_at)

        self.world.partition(self.away)
        self.timeline.mark(f"region {self.away} partitioned (DR broker, AWS endpoint, purge loop, relay)")
        self.phase = f"DR region {self.away} lost; the applications stay on {primary}"
        time.sleep(outage_s)
        outflow = StatisticsClient(self.connectors[primary])
        dr_name = self.topology.dr_name(self.queue)
        self.facts["backlog_at_return"] = outflow.queue_stats([dr_name])[dr_name].size
        self.world.heal(self.away)
        returned = self.timeline.mark(f"region {self.away} back")

        self.phase = f"{self.away} back: copies flow in, the purge catches up"
        remaining = self.timeline.started + settings.duration - time.time()
        time.sleep(max(settings.min_after_switch_s, remaining))
        producer.pause()
        self.timeline.mark("producer stopped")
        self._drain(consumer, primary)
        self.timeline.mark("consumer drained the primary")
        producer.stop()
        consumer.stop()
        pending_after = self._settle_purge(timeout_s=60.0)
        self.facts["catch_up_s"] = round(self.timeline.mark("purge caught up") - returned, 3)
        self.facts["late_copies_on_dr_at_catch_up"] = self._wait_late_copies_gone(dr)
        self.facts["late_copies_cleared_s"] = round(self.timeline.mark("late copies swept") - returned, 3)
        return self._dr_outcome(primary, dr, pending_after, outage_s)

    def _consumed_on(self, dr: str) -> int:
        with self.log.lock:
            consumed = set(self.log.consumed)
        return len(self._keys_on(dr) & consumed)

    def _wait_late_copies_gone(self, dr: str) -> int:
        """Consumed messages on DR once the purge caught up; then wait for the late-copy sweep to take them.

        Nothing pending is not the end after a partition: the bridge resends the copies whose
        acks it lost, some land on DR after their message was purged, and only the late-copy
        sweep (every ``LateCopySweep.interval_s``) removes those. Two sweep periods and a margin
        bound the wait; what is left then is counted as left.
        """
        at_catch_up = self._consumed_on(dr)
        deadline = time.monotonic() + 2 * LateCopySweep.interval_s + 5.0
        left = at_catch_up
        while left and time.monotonic() < deadline:
            time.sleep(1.0)
            left = self._consumed_on(dr)
        return at_catch_up

    def _purge_metric_total(self, metric: str) -> int:
        """What the purge in the DR's region reported for ``metric`` over the drill."""
        log = self.world.state_dir / f"aws-{self.away}" / "functions" / f"brokersync-{PURGE_FUNCTION}.log"
        if not log.exists():
            return 0
        lines = log.read_text(encoding="utf-8", errors="replace").splitlines()
        return int(sum(p.value for p in emf_datapoints(lines) if p.metric == metric))

    def _dr_outcome(self, primary: str, dr: str, pending_after: int, outage_s: float) -> dict[str, Any]:
        with self.log.lock:
            produced = set(self.log.confirmed)
            consumed = self.log.brokers_consumed_on()
        on_primary = self._keys_on(primary)
        dr_frames = browse(self.connectors[dr], self.queue)
        on_dr = {f.headers.get("correlation-id", "") for f in dr_frames}
        consumed_any = set(consumed)
        result: dict[str, Any] = {
            "mode": self.settings.mode,
            "produced": len(produced),
            "consumed_primary": sum(1 for b in consumed.values() if primary in b),
            "consumed_dr": sum(1 for b in consumed.values() if dr in b),
            "lost": len(produced - consumed_any - on_primary - on_dr),
            "duplicates": sum(1 for b in consumed.values() if {primary, dr} <= b),
            "dr_region_lost_s": round(outage_s, 3),
            "missing_after_s": MISSING_AFTER_S,
            "backlog_at_return": self.facts.get("backlog_at_return"),
            "already_consumed_on_dr": len(on_dr & consumed_any),
            # Before the late-copy sweep's next pass: the bridge's resent copies of purged messages.
            "late_copies_on_dr_at_catch_up": self.facts.get("late_copies_on_dr_at_catch_up"),
            "late_copies_cleared_s": self.facts.get("late_copies_cleared_s"),
            # Why one would be left: a second copy of one message, or a key given up on.
            "held_twice_on_dr": len(dr_frames) - len(on_dr),
            "marked_missing": self._purge_metric_total("Missing"),
            # Keys a removal did not find in time whose copy a browse then found on DR: kept, not given up.
            "found_by_browse": self._purge_metric_total("FoundByBrowse"),
            "pending_purge_after": pending_after,
            "catch_up_s": self.facts.get("catch_up_s"),
            "purge_loops_running": self._purge_loops(),
            "regions": {"primary": self.home, "lost_and_returned": self.away},
            "rate": self.settings.rate,
            "duration_s": self.settings.duration,
            "unconfirmed_sends": len(set(self.log.sent) - produced),
            "warm_up_s": self.facts.get("warm_up_s"),
        }
        if self.settings.report:
            result["report"] = self._write_report(result, primary, dr)
        return result
