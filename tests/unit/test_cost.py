"""The cost model: what scales with the rate, what does not, and the deploy guide quoting it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from brokersync.topology import load_topology
from brokersync_cli.cost import (
    PURGE_ROUNDS_PER_S,
    RELAY_BATCHES_PER_S,
    SECONDS_PER_MONTH,
    Usage,
    ledger_write_units_per_s,
    load_prices,
    monthly_cost,
)
from brokersync_cli.main import main
from tests.integration.bench_modules import load_bench


def test_ledger_writes_grow_with_the_rate_less_than_in_proportion_and_the_loops_do_not() -> None:
    """A busy queue's batches are fuller: the same pointer, audit count and items carry more messages."""
    low, high = monthly_cost(100)["usd_per_month"], monthly_cost(1000)["usd_per_month"]

    assert low["ledger_writes"] < high["ledger_writes"] < 10 * low["ledger_writes"]
    assert high["purge_lambda"] == low["purge_lambda"]
    assert high["purge_loop_transitions"] == low["purge_loop_transitions"]


def test_pointer_polls_scale_with_the_synced_queues_and_not_with_the_rate() -> None:
    one, ten = monthly_cost(100)["usd_per_month"], monthly_cost(100, queues=10)["usd_per_month"]

    assert ten["ledger_pointer_polls"] == pytest.approx(10 * one["ledger_pointer_polls"], rel=0.02)
    assert monthly_cost(1000)["usd_per_month"]["ledger_pointer_polls"] == one["ledger_pointer_polls"]
    assert ten["ledger_reads"] == one["ledger_reads"]


def test_cost_counts_the_queues_the_topology_captures(project_root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    topology = project_root / "topology.yaml"

    assert main(["cost", "--rate", "100", "--topology", str(topology)]) == 0

    printed = json.loads(capsys.readouterr().out)
    assert printed["captured_queues_from"] == str(topology)
    assert printed["estimates"][0]["captured_queues"] == len(load_topology(topology).captured_queues)


def test_cost_without_a_topology_file_prices_one_queue_and_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("BROKERSYNC_TOPOLOGY", raising=False)

    assert main(["cost", "--rate", "100"]) == 0

    printed = json.loads(capsys.readouterr().out)
    assert printed["estimates"][0]["captured_queues"] == 1
    assert "no --queues" in printed["captured_queues_from"]


WRITE_UNITS_BY_RATE = "bench/results/sync_write_units_by_rate.json"


def _write_units_per_s(project_root: Path) -> list[tuple[float, float, float]]:
    """(rate, relay, purge write units a second) of every rate step of every run in the results file."""
    result = json.loads((project_root / WRITE_UNITS_BY_RATE).read_text())["result"]
    steps = [step for run in result.get("runs", [result]) for step in run["rate_steps"]]
    return [
        (s["rate"], s["ledger_write_units_per_1000"]["relay"] * s["rate"] / 1000,
         s["ledger_write_units_per_1000"]["purge"] * s["rate"] / 1000)
        for s in steps
    ]  # fmt: skip


def _line(points: list[tuple[float, float]]) -> tuple[float, float]:
    """Least squares ``y = a + b x``: (a, b)."""
    n = len(points)
    mean_x, mean_y = sum(x for x, _ in points) / n, sum(y for _, y in points) / n
    b = sum((x - mean_x) * (y - mean_y) for x, y in points) / sum((x - mean_x) ** 2 for x, _ in points)
    return mean_y - b * mean_x, b


def test_the_write_units_are_the_fit_to_the_sync_bench_s_counts(project_root: Path) -> None:
    """Every step is at least RELAY_BATCHES_PER_S msg/s, so each loop writes a fixed number of times a second."""
    measured = _write_units_per_s(project_root)
    assert min(rate for rate, _, _ in measured) >= max(RELAY_BATCHES_PER_S, PURGE_ROUNDS_PER_S)
    relay_fixed, relay_per_message = _line([(rate, relay) for rate, relay, _ in measured])
    purge_fixed, purge_per_message = _line([(rate, purge) for rate, _, purge in measured])

    usage = Usage()
    assert usage.relay_units_per_batch == pytest.approx(relay_fixed / RELAY_BATCHES_PER_S, abs=0.01)
    assert usage.relay_units_per_message == pytest.approx(relay_per_message, abs=0.001)
    assert usage.purge_units_per_round == pytest.approx(purge_fixed / PURGE_ROUNDS_PER_S, abs=0.01)
    assert usage.purge_units_per_message == pytest.approx(purge_per_message, abs=0.001)


def test_the_model_s_write_units_are_within_a_fifth_of_each_measured_step(project_root: Path) -> None:
    for rate, relay, purge in _write_units_per_s(project_root):
        assert ledger_write_units_per_s(rate, 1, Usage()) == pytest.approx(relay + purge, rel=0.2), rate


def test_a_quiet_queue_costs_its_batches_and_rounds_whatever_else_is_synced() -> None:
    usage = Usage()
    one_busy = ledger_write_units_per_s(1000, 1, usage)
    ten_quiet = ledger_write_units_per_s(1000, 10, usage)

    fixed = usage.relay_units_per_batch * RELAY_BATCHES_PER_S + usage.purge_units_per_round * PURGE_ROUNDS_PER_S
    assert ten_quiet - one_busy == pytest.approx(9 * fixed)


def test_the_sync_bench_s_bill_prices_its_own_counted_writes_and_nothing_fitted_on_top() -> None:
    bill = load_bench("sync").bill
    counted = {"ledger_write_units_per_1000": {"relay": 50.0, "purge": 40.0}}

    writes = bill(1000.0, counted)["usd_per_month_by_line"]["ledger_writes"]

    units_per_s = (50.0 + 40.0) * 1000.0 / 1000
    assert writes == pytest.approx(units_per_s * SECONDS_PER_MONTH / 1e6 * 2 * 0.625, abs=0.01)


def test_a_purge_loop_that_stays_in_its_task_costs_cents_a_day() -> None:
    assert monthly_cost(500)["purge_loop_usd_per_day"] < 0.15


def test_the_deploy_guide_quotes_the_totals_the_model_prints(project_root: Path) -> None:
    readme = (project_root / "docs" / "deploy.md").read_text()

    for rate in (100, 1000):
        assert f"${monthly_cost(rate)['total_usd_per_month']:,.2f}" in readme, rate


def test_the_deploy_guide_quotes_what_one_more_queue_with_traffic_costs_in_writes(project_root: Path) -> None:
    one, two = monthly_cost(100, queues=1)["usd_per_month"], monthly_cost(100, queues=2)["usd_per_month"]

    assert (
        f"${two['ledger_writes'] - one['ledger_writes']:,.0f} a month"
        in (project_root / "docs" / "deploy.md").read_text()
    )


def test_a_prices_file_with_an_unknown_name_is_refused(tmp_path: Path) -> None:
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps({"usd_per_gigawatt": 1.21}))

    with pytest.raises(ValueError, match="unknown price names usd_per_gigawatt"):
        load_prices(prices)


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        ('{"usd_per_dpu_hour_glue": -1}', "0 or more"),
        ('{"usd_per_dpu_hour_glue": "0.44"}', "0 or more"),
        ('{"usd_per_dpu_hour_glue": NaN}', "0 or more"),
        ('{"usd_per_dpu_hour_glue": true}', "0 or more"),
        ("[0.44]", "a JSON object"),
    ],
)
def test_a_prices_file_that_is_not_prices_is_refused_with_the_reason(tmp_path: Path, content: str, reason: str) -> None:
    prices = tmp_path / "prices.json"
    prices.write_text(content)

    with pytest.raises(ValueError, match=reason):
        load_prices(prices)


def test_a_price_of_zero_is_a_price(tmp_path: Path) -> None:
    prices = tmp_path / "prices.json"
    prices.write_text('{"usd_per_dpu_hour_glue": 0}')

    assert load_prices(prices).usd_per_dpu_hour_glue == 0
