"""The cost model: what scales with the rate, what does not, and the deploy guide quoting it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from brokersync.topology import load_topology
from brokersync_cli.cost import load_prices, monthly_cost
from brokersync_cli.main import main


def test_ledger_writes_scale_with_the_rate_and_the_loops_do_not() -> None:
    low, high = monthly_cost(100)["usd_per_month"], monthly_cost(1000)["usd_per_month"]

    assert high["ledger_writes"] == pytest.approx(10 * low["ledger_writes"], rel=0.01)
    assert high["purge_lambda"] == low["purge_lambda"]
    assert high["purge_loop_transitions"] == low["purge_loop_transitions"]


def test_pointer_polls_scale_with_the_synced_queues_and_not_with_the_rate() -> None:
    one, ten = monthly_cost(100)["usd_per_month"], monthly_cost(100, queues=10)["usd_per_month"]

    assert ten["ledger_pointer_polls"] == pytest.approx(10 * one["ledger_pointer_polls"], rel=0.02)
    assert monthly_cost(1000)["usd_per_month"]["ledger_pointer_polls"] == one["ledger_pointer_polls"]
    assert ten["ledger_writes"] == one["ledger_writes"]


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


def test_a_purge_loop_that_stays_in_its_task_costs_cents_a_day() -> None:
    assert monthly_cost(500)["purge_loop_usd_per_day"] < 0.15


def test_the_deploy_guide_quotes_the_totals_the_model_prints(project_root: Path) -> None:
    readme = (project_root / "docs" / "deploy.md").read_text()

    for rate in (100, 1000):
        assert f"${monthly_cost(rate)['total_usd_per_month']:,.2f}" in readme, rate


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
