"""The sync bench's DR cost per purge subscription: the broker CPU the purge added, per subscription it opened."""

from __future__ import annotations

from tests.integration.bench_modules import load_bench


def _step(subscriptions: float | None) -> dict[str, object]:
    return {"remover_per_1000": None if subscriptions is None else {"subscriptions": subscriptions}}


def test_the_purges_added_cpu_per_1000_messages_is_divided_by_its_subscriptions_per_1000_in_ms() -> None:
    sync = load_bench("sync")

    figure = sync.per_subscription({"0": 0.02, "50000": 0.1}, {"0": _step(5.0), "50000": _step(4.0)})

    assert figure == {"0": 4.0, "50000": 25.0}


def test_a_step_that_opened_no_subscription_has_no_figure_rather_than_a_division_by_zero() -> None:
    sync = load_bench("sync")

    assert sync.per_subscription({"0": 0.02, "50000": 0.1}, {"0": _step(0.0), "50000": _step(None)}) == {
        "0": None,
        "50000": None,
    }
