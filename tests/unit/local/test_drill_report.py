"""The drill's report plots what was at risk over time, and shows a gap where nothing was measured."""

from __future__ import annotations

from pathlib import Path

from brokersync_local.drill import Timeline
from brokersync_local.drill_report import write_report
from brokersync_local.drill_risk import RiskSample, peaks
from brokersync_local.drill_traffic import TrafficLog

SAMPLES = [
    RiskSample(0.0, 0, 0.0, 0, 0.0),
    RiskSample(1.0, 120, 0.8, 40, 0.3),
    RiskSample(2.0, None, None, 55, 0.6),  # the primary did not answer
    RiskSample(3.0, 10, 0.1, 0, 0.0),
    RiskSample(-1.0, 999_999, 99.0, 999_999, 99.0),  # before the traffic started: not drawn
]


def _report(tmp_path: Path, samples: list[RiskSample]) -> str:
    log, timeline = TrafficLog(), Timeline()
    log.confirmed["k"] = timeline.started + 0.5
    log.consumed["k"] = [("a", timeline.started + 1.0)]
    path = write_report(tmp_path, {"mode": "failover"}, log, timeline, "a", "b", samples)
    return path.read_text()


def test_the_report_plots_traffic_messages_at_risk_and_both_windows(tmp_path: Path) -> None:
    page = _report(tmp_path, SAMPLES)

    assert page.count("<svg") == 3
    for label in ("copy backlog", "pending purge", "loss window", "duplicate window"):
        assert label in page


def test_an_unmeasured_sample_is_a_gap_in_its_line_not_a_zero(tmp_path: Path) -> None:
    page = _report(tmp_path, SAMPLES)

    backlog_lines = [line for line in page.splitlines() if "<title>copy backlog" in line]
    pending_lines = [line for line in page.splitlines() if "<title>pending purge" in line]
    assert (len(backlog_lines), len(pending_lines)) == (2, 1)


def test_without_samples_the_report_has_only_the_traffic_plot(tmp_path: Path) -> None:
    assert _report(tmp_path, []).count("<svg") == 1


def test_the_peaks_leave_out_samples_before_the_traffic_and_unmeasured_ones() -> None:
    assert peaks(SAMPLES) == {
        "peak_copy_backlog": 120,
        "peak_loss_window_s": 0.8,
        "peak_pending_purge": 55,
        "peak_duplicate_window_s": 0.6,
    }
    assert peaks([])["peak_copy_backlog"] is None
