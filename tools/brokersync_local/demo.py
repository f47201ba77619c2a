"""``make demo`` / ``brokersync demo``: the whole system on a fresh local pair, shown live, then a drill.

A fresh primary and DR broker, moto with everything ``template.yaml`` deploys, the relay and
the real purge loop, and an application producing and consuming on the primary at a steady
rate. The live view shows sync keeping up; after ``duration`` seconds the demo runs a
switchover or failover drill (the same state machines an operator starts from the console),
the applications move to the new primary, and the demo ends with a summary: lost, duplicates,
RTO, and the HTML report.

On a terminal the view is a rich table refreshed about once a second; anywhere else it prints
plain lines every few seconds. Ctrl-C at any moment stops everything the demo started, by
PID (the drill's tear-down, which a second Ctrl-C does not interrupt).
"""

from __future__ import annotations

import json
import logging
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from brokersync_local.background import BackgroundLoop
from brokersync_local.drill import Drill, DrillSettings
from brokersync_local.interrupts import stop_on_interrupt
from brokersync_local.live_view import Sampler, plain_lines, rich_view
from brokersync_local.world import WorldPorts

DemoMode = Literal["switchover", "failover"]
#: Its own ports: a demo never collides with `brokersync local up`, a drill or the tests.
DEMO_PORTS = WorldPorts(primary_openwire=61786, primary_stomp=61783, dr_openwire=62786, dr_stomp=62783, aws=5085)
#: Load after the switch, so the view shows the new primary taking the traffic.
DEFAULT_AFTER_S = 15.0


@dataclass
class DemoSettings:
    topology: Path
    state_dir: Path
    mode: DemoMode = "switchover"
    rate: float = 200.0
    duration: float = 60.0
    after: float = DEFAULT_AFTER_S
    report: Path | None = Path("reports/demo")
    headless: bool = False
    plain_every_s: float = 5.0
    ports: WorldPorts = DEMO_PORTS

    def drill(self) -> DrillSettings:
        return DrillSettings(
            mode=self.mode,
            topology=self.topology,
            state_dir=self.state_dir,
            rate=self.rate,
            duration=self.duration + self.after,
            kill_at=self.duration,
            report=self.report,
            ports=self.ports,
        )


class _View:
    """Draws snapshots: a rich Live on a terminal, plain periodic lines otherwise."""

    def __init__(self, sampler: Sampler, live: bool, out: Callable[[str], None], plain_every_s: float) -> None:
        self.sampler = sampler
        self.out = out
        self.plain_every_s = plain_every_s
        self.live = live
        self._loop = BackgroundLoop(self._run, name="demo-view")

    def start(self) -> None:
        self._loop.start()

    def stop(self) -> None:
        self._loop.stop(timeout_s=10)

    def _run(self, stop: threading.Event) -> None:
        if self.live:
            from rich.live import Live  # noqa: PLC0415 (rich only on a terminal)

            with Live(rich_view(self.sampler.sample()), refresh_per_second=2, transient=False) as live:
                while not stop.wait(1.0):
                    live.update(rich_view(self.sampler.sample()))
            return
        while not stop.wait(self.plain_every_s):
            for line in plain_lines(self.sampler.sample()):
                self.out(line)


def run_demo(settings: DemoSettings, out: Callable[[str], None] = print) -> dict[str, Any]:
    """Run the demo; return the drill's outcome (the summary's figures)."""
    live = not settings.headless and sys.stdout.isatty()
    drill = Drill(settings.drill(), out=out)
    sampler = Sampler(drill, total_s=settings.duration + settings.after)
    view = _View(sampler, live, out, settings.plain_every_s)
    out(
        f"demo: fresh pair on ports {settings.ports.primary_stomp}/{settings.ports.dr_stomp} (STOMP), "
        f"{settings.rate:.0f} msg/s for {settings.duration:.0f}s, then a {settings.mode}"
    )
    started = threading.Thread(target=_start_watchers, args=(drill, sampler, view), daemon=True)
    started.start()
    try:
        return drill.run()
    finally:
        view.stop()
        sampler.lag.stop()


def _start_watchers(drill: Drill, sampler: Sampler, view: _View) -> None:
    """Start the view as soon as the drill's sync runs (set-up lines print above it)."""
    while not drill.ready.wait(0.5):
        if drill.phase.startswith("stopping"):
            return
    sampler.lag.start()
    view.start()


def summary_rows(outcome: dict[str, Any]) -> list[tuple[str, str]]:
    """The figures a newcomer looks for, in the order they matter."""
    rows = [
        ("mode", str(outcome["mode"])),
        ("produced (confirmed by the broker)", f"{outcome['produced']:,}"),
        ("lost", f"{outcome['lost']:,}"),
        ("duplicates", f"{outcome['duplicates']:,}"),
        ("RTO", f"{outcome['rto_s']:.2f} s" if outcome.get("rto_s") is not None else "-"),
        ("copies in the bridge at the switch", str(outcome.get("in_bridge_at_kill", "-"))),
        ("consumed but still on DR at the switch", str(outcome.get("pending_purge_at_kill", "-"))),
    ]
    if "already_consumed_on_old_primary" in outcome:
        rows.append(("consumed but still on the new DR at the end", str(outcome["already_consumed_on_old_primary"])))
    if "report" in outcome:
        rows.append(("HTML report", str(outcome["report"])))
    return rows


def print_summary(outcome: dict[str, Any], live: bool) -> None:
    if live:
        from rich.console import Console  # noqa: PLC0415 (rich only on a terminal)
        from rich.table import Table  # noqa: PLC0415

        table = Table(title="Drill summary", title_justify="left", show_header=False)
        table.add_column(style="bold")
        table.add_column(justify="right")
        for name, value in summary_rows(outcome):
            table.add_row(name, value)
        Console().print(table)
        return
    print("drill summary:")
    for name, value in summary_rows(outcome):
        print(f"  {name}: {value}")


def main_demo(args: Any) -> int:
    settings = DemoSettings(
        topology=Path(args.topology),
        state_dir=Path(args.state_dir),
        mode=args.mode,
        rate=args.rate,
        duration=args.duration,
        after=args.after if args.after is not None else DEFAULT_AFTER_S,
        report=Path(args.report) if args.report else None,
        headless=args.headless,
        ports=DEMO_PORTS.shifted(args.port_offset),
    )
    stop_on_interrupt()
    # stomp.py logs every refused reconnect while a broker reboots; the view already says why.
    logging.getLogger("stomp.py").setLevel(logging.CRITICAL)
    live = not settings.headless and sys.stdout.isatty()
    try:
        outcome = run_demo(settings, out=lambda line: print(line, flush=True))
    except KeyboardInterrupt:
        print("demo interrupted: everything it started was stopped", file=sys.stderr, flush=True)
        return 130
    print_summary(outcome, live)
    if args.json_out:
        Path(args.json_out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json_out).write_text(json.dumps(outcome, indent=2, default=str), encoding="utf-8")
    return 0
