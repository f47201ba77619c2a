"""The drill's HTML report: the JSON outcome and a timeline plot, in one self-contained file.

The plots are inline SVG drawn here, with the drill's events as vertical lines: messages per
second confirmed by a broker, consumed on the old primary and on the new; the messages at
risk over time (copy backlog, pending purge); and the two risk windows (the loss window and
the duplicate window, in seconds). The report opens anywhere, offline, with no plotting
library installed.
"""

from __future__ import annotations

import html
import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from brokersync_local.drill_risk import RiskSample
from brokersync_local.drill_traffic import TrafficLog

_WIDTH, _HEIGHT, _PAD = 900, 320, 48
_TRAFFIC = (
    ("confirmed by a broker", "#4c78a8"),
    ("consumed on old primary", "#f58518"),
    ("consumed on new primary", "#54a24b"),
)
#: (label, colour, RiskSample attribute), two plots: messages at risk, and how old the oldest is.
_AT_RISK = (
    ("copy backlog (not yet on the peer)", "#e45756", "copy_backlog"),
    ("pending purge (consumed, copy not removed)", "#72b7b2", "pending_purge"),
)
_WINDOWS = (
    ("loss window: oldest copy not on the peer", "#e45756", "loss_window_s"),
    ("duplicate window: oldest consumed, not purged", "#72b7b2", "duplicate_window_s"),
)

Point = tuple[float, float]
Series = tuple[str, str, list[tuple[float, float | None]]]


def _per_second(times: list[float], start: float, seconds: int) -> list[int]:
    bins = [0] * seconds
    for t in times:
        index = int(t - start)
        if 0 <= index < seconds:
            bins[index] += 1
    return bins


def _runs(points: list[tuple[float, float | None]]) -> list[list[Point]]:
    """Split a series where it was not measured, so a gap shows as a gap, not as zero."""
    runs: list[list[Point]] = [[]]
    for x, value in points:
        if value is None:
            if runs[-1]:
                runs.append([])
        else:
            runs[-1].append((x, value))
    return [r for r in runs if r]


def _svg(series: list[Series], events: list[tuple[float, str]], seconds: int, unit: str) -> str:
    peak = max([1.0] + [v for _, _, points in series for _, v in points if v is not None])
    x_scale = (_WIDTH - 2 * _PAD) / max(1, seconds)
    y_scale = (_HEIGHT - 2 * _PAD) / peak

    def x(second: float) -> float:
        return _PAD + second * x_scale

    def y(value: float) -> float:
        return _HEIGHT - _PAD - value * y_scale

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{_WIDTH}" height="{_HEIGHT}" font-family="sans-serif" '
        'font-size="11">',
        f'<line x1="{_PAD}" y1="{_HEIGHT - _PAD}" x2="{_WIDTH - _PAD}" y2="{_HEIGHT - _PAD}" stroke="#333"/>',
        f'<line x1="{_PAD}" y1="{_PAD}" x2="{_PAD}" y2="{_HEIGHT - _PAD}" stroke="#333"/>',
        f'<text x="{_PAD - 6}" y="{_PAD}" text-anchor="end">{peak:g}</text>',
        f'<text x="{_PAD - 6}" y="{_HEIGHT - _PAD}" text-anchor="end">0</text>',
        f'<text x="{_WIDTH / 2}" y="{_HEIGHT - 12}" text-anchor="middle">seconds since traffic started</text>',
        f'<text x="14" y="{_HEIGHT / 2}" transform="rotate(-90 14 {_HEIGHT / 2})" text-anchor="middle">'
        f"{html.escape(unit)}</text>",
    ]
    for tick in range(0, seconds + 1, max(1, math.ceil(seconds / 10))):
        parts.append(f'<text x="{x(tick):.1f}" y="{_HEIGHT - _PAD + 14}" text-anchor="middle">{tick}</text>')
    for label, colour, points in series:
        for run in _runs([(px, pv) for px, pv in points]):
            drawn = " ".join(f"{x(px):.1f},{y(pv):.1f}" for px, pv in run)
            parts.append(
                f'<polyline fill="none" stroke="{colour}" stroke-width="1.6" points="{drawn}">'
                f"<title>{html.escape(label)}</title></polyline>"
            )
    for n, (at, label) in enumerate(events):
        parts.append(
            f'<line x1="{x(at):.1f}" y1="{_PAD}" x2="{x(at):.1f}" y2="{_HEIGHT - _PAD}" '
            'stroke="#c00" stroke-dasharray="4 3"/>'
        )
        parts.append(
            f'<text x="{x(at) + 3:.1f}" y="{_PAD + 12 + 12 * (n % 4)}" fill="#c00">{html.escape(label)}</text>'
        )
    for n, (label, colour, _) in enumerate(series):
        parts.append(f'<rect x="{_WIDTH - _PAD - 270}" y="{8 + 14 * n}" width="10" height="10" fill="{colour}"/>')
        parts.append(f'<text x="{_WIDTH - _PAD - 255}" y="{17 + 14 * n}">{html.escape(label)}</text>')
    parts.append("</svg>")
    return "\n".join(parts)


def _risk_series(samples: Sequence[RiskSample], figures: tuple[tuple[str, str, str], ...]) -> list[Series]:
    """One series per figure; an unmeasured sample is carried as a gap (see _runs)."""
    return [
        (label, colour, [(s.at_s, getattr(s, name)) for s in samples if s.at_s >= 0])  # type: ignore[misc]
        for label, colour, name in figures
    ]


def write_report(
    directory: Path,
    outcome: dict[str, Any],
    log: TrafficLog,
    timeline: Any,
    old: str,
    new: str,
    risk: Sequence[RiskSample] = (),
) -> Path:
    """Write ``drill-<mode>.html`` into ``directory``; return its path.

    Three plots: the traffic, the messages at risk (copy backlog, pending purge) and the two
    risk windows (how old the oldest of each is), all against the drill's events.
    """
    directory.mkdir(parents=True, exist_ok=True)
    start = timeline.started
    with log.lock:
        confirmed = list(log.confirmed.values())
        on_old = [t for entries in log.consumed.values() for b, t in entries if b == old]
        on_new = [t for entries in log.consumed.values() for b, t in entries if b == new]
    last = max(
        [start + 1]
        + confirmed
        + on_old
        + on_new
        + [start + at for at, _ in timeline.events]
        + [start + r.at_s for r in risk]
    )
    seconds = math.ceil(last - start) + 1
    traffic: list[Series] = [
        (label, colour, [(i + 0.5, float(v)) for i, v in enumerate(_per_second(times, start, seconds))])
        for (label, colour), times in zip(_TRAFFIC, (confirmed, on_old, on_new), strict=True)
    ]
    plots = [_svg(traffic, timeline.events, seconds, "msg/s")]
    if risk:
        plots.append("<h2>At risk</h2>")
        plots.append(_svg(_risk_series(risk, _AT_RISK), timeline.events, seconds, "messages"))
        plots.append(_svg(_risk_series(risk, _WINDOWS), timeline.events, seconds, "seconds"))
    rows = "\n".join(
        f"<tr><th>{html.escape(str(k))}</th><td>{html.escape(json.dumps(v))}</td></tr>" for k, v in outcome.items()
    )
    events = "\n".join(f"<li>{at:.2f}s: {html.escape(label)}</li>" for at, label in timeline.events)
    page = f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>BrokerSync drill: {html.escape(outcome["mode"])}</title>
<style>body{{font-family:sans-serif;margin:2em;max-width:960px}}th{{text-align:left;padding-right:1em}}
td,th{{border-bottom:1px solid #ddd;padding:2px 6px}}</style></head>
<body>
<h1>BrokerSync drill: {html.escape(outcome["mode"])}</h1>
<p>Old primary <b>{html.escape(old)}</b>, new primary <b>{html.escape(new)}</b>.
Lost: confirmed by a broker, never consumed, on no live broker. Duplicates: consumed on both brokers.</p>
{chr(10).join(plots)}
<h2>Outcome</h2>
<table>{rows}</table>
<h2>Events</h2>
<ul>{events}</ul>
<h2>JSON</h2>
<pre>{html.escape(json.dumps(outcome, indent=2))}</pre>
</body></html>
"""
    path = directory / f"drill-{outcome['mode']}.html"
    path.write_text(page, encoding="utf-8")
    return path
