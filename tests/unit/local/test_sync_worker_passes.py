"""A local sync worker outlives a failed pass, as a scheduled function outlives a failed invocation."""

from __future__ import annotations

import json
import threading
from pathlib import Path

from brokersync.exceptions import BrokerUnavailableError
from brokersync_local.sync_worker import _count_failure, _run_passes


def test_a_pass_that_raises_what_nothing_expected_is_counted_and_the_next_pass_runs(tmp_path: Path) -> None:
    stop, status, totals = threading.Event(), tmp_path / "sync-relay.json", {"captured": 0}
    passes: list[int] = []

    def one_pass() -> None:
        passes.append(len(passes))
        if len(passes) == 1:
            raise TypeError("a bug the function would raise in AWS too")
        stop.set()

    _run_passes("relay", one_pass, stop, totals, status)

    assert passes == [0, 1]
    written = json.loads(status.read_text())
    assert (written["failed_passes"], written["unexpected_errors"]) == (1, 1)
    assert written["last_error"] == "TypeError: a bug the function would raise in AWS too"


def test_an_expected_failure_counts_as_a_failed_pass_and_not_as_an_unexpected_error() -> None:
    totals: dict[str, object] = {}

    _count_failure(totals, BrokerUnavailableError("orders-usw2 is rebooting"))

    assert totals["failed_passes"] == 1 and "unexpected_errors" not in totals
