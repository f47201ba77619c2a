"""Benchmark results: what each benchmark writes, with its command and machine, and what the docs read.

A figure in the documentation is only as good as the run it came from, so every benchmark
writes its JSON into ``bench/results/<name>.json`` together with the exact command, the
commit, the date and the machine that produced it, and ``docs/performance.md`` is rendered
from those files and ``bench/performance.md.j2`` (``python -m brokersync_ci.bench_results
render``, ``make performance-page``), never typed by hand: a test fails when the committed
page is not that rendering, and a figure the template names that no file holds is an error.

Repeated runs (``--repeat N``) are kept whole, and every numeric figure they share is summed
up as median, minimum, maximum and spread ((max - min) / median), because on a 2-core
machine shared by two brokers the spread is part of the result.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import shlex
import statistics
import subprocess
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from brokersync_ci.relative_cost import depth_ratio_over_application, over_application
from brokersync_local.interrupts import interrupts_stop_runs

ROOT = Path(__file__).resolve().parents[2]
RESULTS_DIR = ROOT / "bench" / "results"
#: Keys every results file has; the docs build refuses a file without them.
REQUIRED = ("command", "commit", "measured_on", "machine", "result")


def add_arguments(parser: argparse.ArgumentParser, name: str, repeat: int | None = 1) -> None:
    """``--repeat`` (unless the benchmark repeats in its own way: None), ``--results`` and ``--no-record``."""
    if repeat is not None:
        parser.add_argument(
            "--repeat", type=int, default=repeat, help=f"whole runs, their spread reported (default {repeat})"
        )
    parser.add_argument(
        "--results",
        type=Path,
        default=RESULTS_DIR / f"{name}.json",
        help=f"where the results file goes (default bench/results/{name}.json)",
    )
    parser.add_argument("--no-record", action="store_true", help="print the JSON only, write no results file")


#: The commit the running bench started on (set by :func:`exit_code`): what its results measure,
#: even when HEAD moves during a run of half an hour or more.
_RUN: dict[str, str] = {}
#: What a shell reports for a process ended by SIGINT; a bench stopped by Ctrl-C or ``kill`` exits with it.
INTERRUPTED_EXIT = 130


def exit_code(main: Callable[[], int | None]) -> int:
    """Run a bench's ``main`` and give its exit code; stopped by Ctrl-C or ``kill``, one line and 130.

    :func:`run_repeated` turns both signals into KeyboardInterrupt so that the runs' pairs and
    processes are torn down on the way out. Once they are, the traceback says nothing a user
    can act on: what they need to know is that the bench stopped and that the run under way
    wrote no results.
    """
    _RUN["commit"] = commit()
    try:
        return main() or 0
    except KeyboardInterrupt:
        sys.stderr.write(
            f"{Path(sys.argv[0]).name}: interrupted; what it started was stopped,"
            " and the run under way wrote no results\n"
        )
        return INTERRUPTED_EXIT
    finally:
        _RUN.clear()


def run_repeated(measure: Callable[[], dict[str, Any]], repeat: int, log: Callable[[str], None]) -> dict[str, Any]:
    """``measure`` run ``repeat`` times: the first run's figures, each run whole, and the spread.

    Ctrl-C and ``kill PID`` stop a run through its tear-down (its pairs and processes are
    context managers): without this, SIGTERM ended the bench at once and left its brokers and
    its AWS emulator running, on ports the next run of it then found taken.
    """
    runs = []
    with interrupts_stop_runs():
        for i in range(max(1, repeat)):
            if repeat > 1:
                log(f"run {i + 1} of {repeat}")
            runs.append(measure())
    if len(runs) == 1:
        return runs[0]
    return {**runs[0], "runs": runs, "spread": spread(runs)}


def alternating(ways: Sequence[str], waves: int) -> list[str]:
    """``waves`` waves of each way, in the ways' order and then back (A, B, B, A, A, B, ...; with
    three, A, B, C, C, B, A, ...): no way always runs first, nor always right after another, so a
    drift of the machine falls on all of them alike."""
    there_and_back = [*ways, *reversed(ways)]
    return [there_and_back[index % len(there_and_back)] for index in range(len(ways) * waves)]


def spread(runs: list[Mapping[str, Any]]) -> dict[str, Any]:
    """Median, min, max and relative spread of every number the runs share, nested dicts included."""
    found: dict[str, Any] = {}
    for key, first in runs[0].items():
        values = [run.get(key) for run in runs]
        if isinstance(first, bool):
            continue
        if all(isinstance(v, int | float) and not isinstance(v, bool) for v in values):
            numbers = [float(v) for v in values]  # type: ignore[arg-type]
            median = statistics.median(numbers)
            found[key] = {
                "median": round(median, 4),
                "min": min(numbers),
                "max": max(numbers),
                "spread": round((max(numbers) - min(numbers)) / median, 3) if median else None,
            }
        elif all(isinstance(v, Mapping) for v in values):
            nested = spread(values)  # type: ignore[arg-type]
            if nested:
                found[key] = nested
    return found


def machine() -> dict[str, Any]:
    """The machine a figure was measured on: cores, CPU, memory, and the broker and JVM versions."""
    cpu = _first_line_with("/proc/cpuinfo", "model name")
    memory_kb = _first_line_with("/proc/meminfo", "MemTotal")
    return {
        "cores": os.cpu_count(),
        "cpu": cpu.split(":", 1)[1].strip() if cpu else platform.processor() or platform.machine(),
        "memory_gib": round(int(memory_kb.split()[1]) / 2**20, 1) if memory_kb else None,
        "activemq": _command(["dpkg-query", "-W", "-f", "${Version}", "activemq"]),
        "java": next(iter((_command(["java", "-version"], stderr=True) or "").splitlines()), None),
        "python": platform.python_version(),
        "kernel": platform.release(),
    }


def commit(root: Path = ROOT) -> str:
    """The commit measured (with ``+dirty`` when the working tree had uncommitted changes).

    Results files are what the benches write, not what they measure: a series of runs rewrites
    them as it goes, and counting them would mark every run after the first dirty.
    """
    head = _command(["git", "-C", str(root), "rev-parse", "--short", "HEAD"]) or "unknown"
    changed = _command(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"]) or ""
    return f"{head}+dirty" if measured_changes(changed) else head


def measured_changes(porcelain: str) -> list[str]:
    """The paths ``git status --porcelain`` lists, but for results files (a rename counts by both names)."""
    results = RESULTS_DIR.relative_to(ROOT).as_posix() + "/"
    paths = [p.strip('"') for line in porcelain.splitlines() if line.strip() for p in line[3:].split(" -> ")]
    return [path for path in paths if not path.startswith(results)]


def _from_root(arg: str) -> str:
    """An argument as the docs show it: a path inside the checkout relative to its root, so the
    command works as written in any clone (``--results /home/me/brokersync/bench/...`` would not)."""
    for prefix in ("", *(f"{flag}=" for flag in ("--results", "--report", "--topology"))):
        if arg.startswith(prefix) and arg[len(prefix) :].startswith("/"):
            path = Path(arg[len(prefix) :]).resolve()
            if path.is_relative_to(ROOT):
                return prefix + str(path.relative_to(ROOT))
    return arg


def record(name: str, result: Mapping[str, Any], path: Path | None = None, argv: list[str] | None = None) -> Path:
    """Write ``result`` with its command, commit, date and machine into the results file.

    The commit is the one the bench started on; when the checkout has moved on by the time it
    writes (a commit, or an edit, during the run), ``commit_at_end`` says to what.
    """
    path = path or RESULTS_DIR / f"{name}.json"
    argv = argv if argv is not None else sys.argv
    script = Path(argv[0]).resolve()
    shown = str(script.relative_to(ROOT)) if script.is_relative_to(ROOT) else argv[0]
    command = shlex.join([".venv/bin/python", shown, *(_from_root(arg) for arg in argv[1:])])
    now = commit()
    measured = _RUN.get("commit", now)
    document = {
        "command": command,
        "commit": measured,
        **({"commit_at_end": now} if now != measured else {}),
        "measured_on": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": machine(),
        "result": dict(result),
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(document, indent=2) + "\n")
    return path


def finish(name: str, result: Mapping[str, Any], args: argparse.Namespace) -> int:
    """Print the JSON (stdout) and, unless ``--no-record``, write the results file (said on stderr)."""
    sys.stdout.write(json.dumps(result) + "\n")
    if not args.no_record:
        written = record(name, result, args.results)
        sys.stderr.write(f"results written to {written}\n")
    return 0


def load(directory: Path = RESULTS_DIR) -> dict[str, dict[str, Any]]:
    """Every results file by name; a file without its command, machine or result is refused."""
    found: dict[str, dict[str, Any]] = {}
    for path in sorted(directory.glob("*.json")):
        document = json.loads(path.read_text())
        missing = [key for key in REQUIRED if key not in document]
        if missing:
            shown = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
            raise ValueError(f"{shown} has no {', '.join(missing)}: re-run its benchmark")
        found[path.stem] = document
    return found


def render_page(markdown: str, results: Mapping[str, Mapping[str, Any]]) -> str:
    """A page's Jinja placeholders filled from the results files; a figure no file holds is an error.

    The page sees ``results`` (``results.capture.result.ratio``), the filters ``n`` (a number
    as people read it: ``{{ x | n }}`` → 12,345; ``{{ x | n(2) }}`` → 0.85; None → -) and ``pct`` (a
    ratio as a percentage), ``measured(name)``: one line naming the command, commit, date
    and machine of that results file, written under every figure block, and
    ``not_measured(name, command)``: what a reader runs to fill a section whose results file
    is not there yet (a page says so rather than showing a figure from somewhere else),
    ``results_of(names)``: the ``result`` of each named file, in order, the filter ``median``,
    and ``spread_of``, ``over_application`` and ``depth_ratio_over_application``
    (:mod:`brokersync_ci.relative_cost`) for figures derived from several a file holds.
    """
    import jinja2  # noqa: PLC0415 (only the docs build renders pages; jinja2 comes with mkdocs)

    from brokersync_local.drill_traffic import RATE_PER_CONNECTION  # noqa: PLC0415 (one definition, one page)

    env = jinja2.Environment(
        undefined=jinja2.StrictUndefined,
        autoescape=False,  # noqa: S701 (Markdown, not HTML)
        keep_trailing_newline=True,
        extensions=["jinja2.ext.do"],
    )
    env.filters["n"] = _number
    env.filters["pct"] = lambda value, digits=0: f"{float(value) * 100:.{digits}f} %"
    env.globals["measured"] = lambda name: measured_line(results[name])
    env.globals["not_measured"] = not_measured_line
    env.globals["drill_rate_per_connection"] = RATE_PER_CONNECTION
    env.globals["measured_all"] = lambda names: measured_lines([results[name] for name in names])
    env.globals["results_of"] = lambda names: [results[name]["result"] for name in names]
    env.filters["regex_prefix"] = lambda value, prefix: f"{prefix}{value}"
    env.filters["median"] = statistics.median
    env.globals["spread_of"] = spread
    env.globals["over_application"] = over_application
    env.globals["depth_ratio_over_application"] = depth_ratio_over_application
    return env.from_string(markdown).render(results=_ByName(results))


class _ByName(Mapping[str, Any]):
    """The results by name, so that ``results.copy`` is the copy benchmark's, not ``dict.copy``."""

    def __init__(self, results: Mapping[str, Any]) -> None:
        self._results = results

    def __getitem__(self, name: str) -> Any:
        return self._results[name]

    def __getattr__(self, name: str) -> Any:
        try:
            return self._results[name]
        except KeyError:
            raise AttributeError(f"no results file bench/results/{name}.json") from None

    def __iter__(self) -> Iterator[str]:
        return iter(self._results)

    def __len__(self) -> int:
        return len(self._results)


def measured_line(document: Mapping[str, Any]) -> str:
    """Where a figure came from, in one line of Markdown."""
    box = document["machine"]
    where = (
        f"{box['cores']} cores ({box['cpu']}), {box['memory_gib']} GiB, ActiveMQ {box['activemq']}"
        if isinstance(box, Mapping)
        else str(box)
    )
    return f"*Measured by `{document['command']}` at {document['commit']} on {document['measured_on']}; {where}.*"


def measured_lines(documents: list[Mapping[str, Any]]) -> str:
    """Where several results files came from: one line per command, commit and machine, with the dates."""
    marker = "\x00when\x00"
    groups: dict[str, list[str]] = {}
    for document in documents:
        groups.setdefault(measured_line({**document, "measured_on": marker}), []).append(document["measured_on"])
    return "\n".join(line.replace(marker, " to ".join(sorted({min(w), max(w)}))) for line, w in groups.items())


def not_measured_line(name: str, command: str) -> str:
    """The line that stands where a benchmark's figures would, while it has no results file."""
    return f"*Not measured yet: no `bench/results/{name}.json`. Run `{command}`, then `make performance-page`.*"


def _number(value: Any, digits: int = 0) -> str:
    if value is None:  # a figure the run could not measure (a drill without a kill has no RTO)
        return "-"
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"{value!r} is not a number")
    return f"{value:,.{digits}f}"


TEMPLATE = ROOT / "bench" / "performance.md.j2"
PAGE = ROOT / "docs" / "performance.md"
GENERATED_NOTE = (
    "<!-- Generated from bench/performance.md.j2 and bench/results/*.json by `make performance-page`: "
    "edit those, not this page. -->\n"
)


def performance_page(template: Path = TEMPLATE, directory: Path = RESULTS_DIR) -> str:
    """docs/performance.md as the template and the results files make it."""
    return GENERATED_NOTE + render_page(template.read_text(), load(directory))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Render docs/performance.md from bench/results/*.json.")
    parser.add_argument("command", choices=["render", "check"], help="render: write the page; check: compare only")
    args = parser.parse_args(argv)
    page = performance_page()
    if args.command == "check":
        if PAGE.read_text() != page:
            sys.stderr.write(
                "docs/performance.md is not the rendering of its template and results: make performance-page\n"
            )
            return 1
        return 0
    PAGE.write_text(page)
    sys.stderr.write(f"wrote {PAGE.relative_to(ROOT)}\n")
    return 0


def _first_line_with(path: str, prefix: str) -> str | None:
    try:
        lines = Path(path).read_text().splitlines()
    except OSError:
        return None
    return next((line for line in lines if line.startswith(prefix)), None)


def _command(argv: list[str], *, stderr: bool = False) -> str | None:
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=20, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    # Only the end: a first line's leading space can be data (git's porcelain status columns).
    text = (done.stderr if stderr else done.stdout).rstrip()
    return text or None


if __name__ == "__main__":
    sys.exit(main())
