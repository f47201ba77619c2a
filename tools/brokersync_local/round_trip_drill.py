"""``brokersync drill --mode round-trips``: switchover and back, twice in a row, on two regions.

Each leg is a planned switchover: the applications stop on the current primary, the failover
state machine runs in the new primary's region with ``mode: SWITCHOVER`` (it drains the copy
backlog and the pending purge before it swaps), and the applications move. After every leg
the drill checks that nothing stale runs anywhere: the purge loop runs in the new DR's region
only, and no relay pass starts in the region that just stopped being primary. At the end it
counts what a switchover must give: nothing lost, nothing duplicated, and no consumed
message left on either broker.
"""

from __future__ import annotations

import time
from typing import Any

from brokersync.broker.statistics import StatisticsClient
from brokersync_local.region_drill import RegionLossDrill

#: Switchover and back, twice.
LEGS = 4
#: After a leg, how long a stale loop or relay has to show itself before the leg is judged.
SETTLE_S = 4.0


class RoundTripDrill(RegionLossDrill):
    def _run_traffic(self) -> dict[str, Any]:
        settings = self.settings
        names = {self.home: self.topology.primary.name, self.away: self.topology.dr.name}
        primary_region = self.home
        producer, consumer = self._start_applications(names[primary_region])
        leg_s = max(settings.min_after_switch_s, settings.duration / (LEGS + 1))
        self.out(f"drill round-trips: {settings.rate:.0f} msg/s, {LEGS} switchovers {leg_s:.0f}s apart")
        legs: list[dict[str, Any]] = []
        for leg in range(1, LEGS + 1):
            self.phase = f"load on {names[primary_region]}; switchover {leg} of {LEGS} in {leg_s:.0f}s"
            time.sleep(leg_s)
            new_region = self.away if primary_region == self.home else self.home
            old, new = names[primary_region], names[new_region]
            producer.pause()
            consumer.pause()
            quiesced = self.timeline.mark(f"switchover {leg}: applications stopped on {old}")
            outflow = StatisticsClient(self.connectors[old]).queue_stats([self.topology.dr_name(self.queue)])
            self.phase = f"switchover {leg} of {LEGS}: {old} -> {new}, run in {new_region}"
            self._execute_in(new_region, "FailoverStateMachine", {"mode": "SWITCHOVER"})
            switched = self.timeline.mark(f"switchover {leg} succeeded: {new} primary")
            for client in (producer, consumer):
                client.move_to(new, self.connectors[new])
            self.primary_now = new
            time.sleep(SETTLE_S)
            legs.append(
                {
                    "leg": leg,
                    "from": old,
                    "to": new,
                    "executed_in": new_region,  # the new primary's region
                    "dr_region": primary_region,
                    "rto_s": round(switched - quiesced, 3),
                    "in_bridge_at_switch": sum(s.size for s in outflow.values()),
                    "purge_loops_running": self._purge_loops(),
                    "relay_passes_in_dr_region": len(
                        [p for p in self._passes(primary_region) if p["start"] > switched + 0.5]
                    ),
                }
            )
            primary_region = new_region
            self._use_ledger_in(legs[-1]["dr_region"])
        time.sleep(leg_s)
        producer.pause()
        self.timeline.mark("producer stopped")
        self._drain(consumer, names[primary_region])
        self.timeline.mark(f"consumer drained {names[primary_region]}")
        producer.stop()
        consumer.stop()
        pending_after = self._settle_purge()
        self._operator_view(primary_region)
        return self._round_trip_outcome(legs, names[primary_region], pending_after)

    def _operator_view(self, primary_region: str) -> None:
        """What `brokersync status` and `brokersync switchover --plan` tell an operator of the pair now."""
        code, status = self._run_cli(primary_region, "status", "--json")
        self.facts["status_at_end"] = {
            "code": code,
            "verdict": status.get("verdict"),
            "problems": status.get("problems"),
            "warnings": status.get("warnings"),
            "epochs": {r: v.get("epoch") for r, v in (status.get("regions") or {}).items()},
        }
        code, planned = self._run_cli(primary_region, "switchover", "--plan")
        self.facts["switchover_plan"] = {
            "code": code,
            **{k: planned.get(k) for k in ("would_run_in", "from", "to", "refused", "now")},
        }

    def _stale(self, leg: dict[str, Any]) -> int:
        """Loops or relay passes where the roles say none may run, after one leg."""
        loops = leg["purge_loops_running"]
        wrong_loops = sum(n for region, n in loops.items() if region != leg["dr_region"])
        return wrong_loops + leg["relay_passes_in_dr_region"]

    def _round_trip_outcome(self, legs: list[dict[str, Any]], primary: str, pending_after: int) -> dict[str, Any]:
        names = [self.topology.primary.name, self.topology.dr.name]
        with self.log.lock:
            produced = set(self.log.confirmed)
            consumed = self.log.brokers_consumed_on()
        held = {name: self._keys_on(name) for name in names}
        consumed_any = set(consumed)
        result: dict[str, Any] = {
            "mode": self.settings.mode,
            "produced": len(produced),
            "consumed": {name: sum(1 for b in consumed.values() if name in b) for name in names},
            "lost": len(produced - consumed_any - held[names[0]] - held[names[1]]),
            "duplicates": sum(1 for b in consumed.values() if set(names) <= b),
            "already_consumed_left": {name: len(held[name] & consumed_any) for name in names},
            "pending_purge_after": pending_after,
            "legs": legs,
            "stale_loops_or_relays": sum(self._stale(leg) for leg in legs),
            "loops_in_dr_region": [leg["purge_loops_running"].get(leg["dr_region"], 0) for leg in legs],
            "primary_at_end": primary,
            "rate": self.settings.rate,
            "duration_s": self.settings.duration,
            "unconfirmed_sends": len(set(self.log.sent) - produced),
            "warm_up_s": self.facts.get("warm_up_s"),
            "status_at_end": self.facts.get("status_at_end"),
            "switchover_plan": self.facts.get("switchover_plan"),
        }
        if self.settings.report:
            other = names[1] if primary == names[0] else names[0]
            result["report"] = self._write_report(result, other, primary)
        return result
