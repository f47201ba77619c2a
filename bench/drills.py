"""Drills measured: every transition on a fresh local pair, one after another, into one results file.

Each drill is what ``brokersync drill`` runs (real brokers, both stacks from template.yaml in
the local world, the applications' producer and consumer), with the settings below, so each
figure in the docs' drill table comes from one run of one command and can be re-run as
written. A drill counts its own baseline: lost against the copies in the bridge at the
kill, duplicates against what was consumed and not yet purged at the kill, counted exactly.

    .venv/bin/python bench/drills.py                        # all of them, about 15 minutes
    .venv/bin/python bench/drills.py --only switchover,region-loss --repeat 3

Each drill writes a results file of its own, bench/results/drill_<name>.json (``-`` in the
name becomes ``_``), so running some of them again replaces only theirs (``--no-record`` to
only print).
"""

from __future__ import annotations

import argparse
import json
import logging
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from brokersync_ci import bench_results
from brokersync_local.drill import DrillSettings, run_drill

ROOT = Path(__file__).resolve().parents[1]
TOPOLOGY = ROOT / "topology.yaml"
SINGLE_REGION = ROOT / "examples" / "single-region-pair.yaml"
ACTIVE_ACTIVE = ROOT / "examples" / "active-active.yaml"

#: name: (mode, topology, rate msg/s, duration s, kill at s or None for the mode's default[, queue])
DRILLS: dict[str, tuple[Any, ...]] = {
    "switchover": ("switchover", TOPOLOGY, 300, 16, None),
    "failover": ("failover", TOPOLOGY, 300, 30, 20),
    # The duplicate window at 1,000 msg/s: goal at most one second of traffic (1,000) duplicated.
    "failover-1000": ("failover", TOPOLOGY, 1000, 30, 20),
    "failback": ("failback", TOPOLOGY, 300, 30, 15),
    "region-loss": ("region-loss", TOPOLOGY, 200, 30, 15),
    "dr-region-loss": ("dr-region-loss", TOPOLOGY, 200, 30, None),
    "round-trips": ("round-trips", TOPOLOGY, 200, 40, None),
    "new-dr-region": ("new-dr-region", TOPOLOGY, 150, 24, 10),
    "single-region-failover": ("failover", SINGLE_REGION, 300, 30, 20),
    # Produced to in both regions (a producer on each broker at the rate), consumed on the primary.
    "active-active-switchover": ("switchover", ACTIVE_ACTIVE, 200, 30, None, "CARTS"),
    "active-active-failover": ("failover", ACTIVE_ACTIVE, 200, 30, 15, "CARTS"),
    "active-active-region-loss": ("region-loss", ACTIVE_ACTIVE, 200, 30, 15, "CARTS"),
    # One queue's consumers moved to the DR broker under load; the producers on both never stop.
    "active-active-move-queue": ("move-queue", ACTIVE_ACTIVE, 200, 30, None, "CARTS"),
    # Two regions: that move, then the DR region lost while it consumes CARTS, and the move back.
    "active-active-move-then-region-loss": ("move-then-region-loss", ACTIVE_ACTIVE, 200, 40, None, "CARTS"),
    # That move, then a switchover of the pair to the broker consuming CARTS (it reboots both).
    "active-active-move-then-switchover": ("move-then-switchover", ACTIVE_ACTIVE, 200, 30, None, "CARTS"),
}

#: Seconds of traffic at the drill's rate before its clock starts (``--warm-up``). At 1,000 msg/s
#: on two cores a broker just started spends half a core compiling its hot paths; without it
#: the drill measured a cold JVM, not the long-running pair an operator fails over from.
WARM_UP_S: dict[str, float] = {"failover-1000": 15.0}


def run_one(name: str, seed: int) -> dict[str, Any]:
    """One drill on a fresh pair in a state directory of its own; its outcome with the command that repeats it."""
    mode, topology, rate, duration, kill_at, *rest = DRILLS[name]
    queue = rest[0] if rest else None
    state = Path(tempfile.mkdtemp(prefix=f"bench-drill-{name}-"))
    try:
        outcome = run_drill(
            DrillSettings(
                mode=mode,  # type: ignore[arg-type]
                topology=topology,
                state_dir=state / "drill",
                rate=rate,
                duration=duration,
                kill_at=kill_at,
                seed=seed,
                queue=queue,
                warm_up_s=WARM_UP_S.get(name, 0.0),
            ),
            out=lambda line: print(f"  {name}: {line}", file=sys.stderr, flush=True),
        )
    finally:
        shutil.rmtree(state, ignore_errors=True)
    options = f" --kill-at {kill_at:g}" if kill_at is not None else ""
    if name in WARM_UP_S:
        options += f" --warm-up {WARM_UP_S[name]:g}"
    shown = topology.relative_to(ROOT)
    outcome["command"] = (
        f".venv/bin/brokersync drill --mode {mode} --rate {rate:g} --duration {duration:g}{options} "
        f"--seed {seed} --topology {shown}" + (f" --queue {queue}" if queue else "")
    )
    return outcome


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--only", default=",".join(DRILLS), help=f"drills to run, comma-separated ({', '.join(DRILLS)})"
    )
    parser.add_argument("--seed", type=int, default=7, help="seed for the random kill moments (7)")
    parser.add_argument("--repeat", type=int, default=1, help="runs of each drill, their spread reported (default 1)")
    parser.add_argument("--results-dir", type=Path, default=bench_results.RESULTS_DIR, help="(default bench/results)")
    parser.add_argument("--no-record", action="store_true", help="print the JSON only, write no results file")
    args = parser.parse_args()
    chosen = [name.strip() for name in args.only.split(",") if name.strip()]
    unknown = sorted(set(chosen) - set(DRILLS))
    if unknown:
        parser.error(f"unknown drill {', '.join(unknown)} (known: {', '.join(DRILLS)})")
    logging.getLogger("stomp.py").setLevel(logging.CRITICAL)
    for name in chosen:
        print(f"drill {name}", file=sys.stderr, flush=True)
        result = bench_results.run_repeated(
            lambda name=name: run_one(name, args.seed),
            args.repeat,
            lambda line: print(f"  {line}", file=sys.stderr, flush=True),
        )
        print(json.dumps({name: result}), flush=True)
        if not args.no_record:
            results_name = f"drill_{name.replace('-', '_')}"
            written = bench_results.record(results_name, result, args.results_dir / f"{results_name}.json")
            print(f"results written to {written}", file=sys.stderr, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(bench_results.exit_code(main))
