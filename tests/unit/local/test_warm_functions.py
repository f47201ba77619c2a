"""The Lambda stand-in runs each function in warm processes of its own, bounded as Lambda bounds them."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from brokersync_local.warm_functions import WarmFunctions

HANDLER = """
import os, sys, time

def lambda_handler(event, context):
    action = event.get("action")
    if action == "sleep":
        time.sleep(event["seconds"])
    if action == "raise":
        raise ValueError("bad event")
    if action == "exit":
        os._exit(3)
    print("a log line", flush=True)
    return {"pid": os.getpid(), "region": os.environ["AWS_REGION"], "setting": os.environ.get("SETTING"),
            "remaining": context.get_remaining_time_in_millis()}
"""


@pytest.fixture
def functions(tmp_path: Path) -> Iterator[WarmFunctions]:
    (tmp_path / "code" / "probe").mkdir(parents=True)
    (tmp_path / "code" / "probe" / "app.py").write_text(HANDLER)
    pool = WarmFunctions(tmp_path / "logs", functions_dir=tmp_path / "code")
    yield pool
    pool.close()


def _invoke(functions: WarmFunctions, event: dict, timeout_s: float = 5.0, setting: str = "a") -> dict:
    arn = "arn:aws:lambda:eu-west-1:123456789012:function:probe"
    return functions.invoke(arn, "probe", "probe", {"SETTING": setting}, timeout_s, 128, event)


def test_a_function_runs_outside_the_endpoint_process_and_stays_warm(functions: WarmFunctions) -> None:
    first = _invoke(functions, {})["result"]
    second = _invoke(functions, {})["result"]

    assert first["pid"] != os.getpid()
    assert second["pid"] == first["pid"]


def test_a_function_sees_its_own_environment_and_region_and_deadline(functions: WarmFunctions) -> None:
    result = _invoke(functions, {}, timeout_s=5.0)["result"]

    assert (result["region"], result["setting"]) == ("eu-west-1", "a")
    assert 0 < result["remaining"] <= 5000


def test_a_changed_configuration_starts_a_fresh_environment(functions: WarmFunctions) -> None:
    first = _invoke(functions, {}, setting="a")["result"]
    second = _invoke(functions, {}, setting="b")["result"]

    assert second["pid"] != first["pid"] and second["setting"] == "b"


def test_a_handler_exception_comes_back_in_lambdas_error_shape(functions: WarmFunctions) -> None:
    error = _invoke(functions, {"action": "raise"})["error"]

    assert (error["errorType"], error["errorMessage"]) == ("ValueError", "bad event")


def test_an_overrunning_invocation_times_out_and_the_next_gets_a_fresh_environment(functions: WarmFunctions) -> None:
    warm = _invoke(functions, {}, timeout_s=1.0)["result"]

    error = _invoke(functions, {"action": "sleep", "seconds": 30}, timeout_s=1.0)["error"]
    after = _invoke(functions, {}, timeout_s=1.0)["result"]

    assert error["errorType"] == "Sandbox.Timedout"
    assert after["pid"] != warm["pid"]


def test_a_runtime_that_dies_reports_an_exit_error(functions: WarmFunctions) -> None:
    error = _invoke(functions, {"action": "exit"})["error"]

    assert error["errorType"] == "Runtime.ExitError"
    assert "result" in _invoke(functions, {})


def test_concurrent_invocations_get_environments_of_their_own(functions: WarmFunctions) -> None:
    _invoke(functions, {})
    pids: list[int] = []

    def slow() -> None:
        pids.append(_invoke(functions, {"action": "sleep", "seconds": 1.0})["result"]["pid"])

    threads = [threading.Thread(target=slow) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)

    assert len(set(pids)) == 2


def test_the_handlers_output_goes_to_the_functions_log_not_the_reply(functions: WarmFunctions, tmp_path: Path) -> None:
    assert "result" in _invoke(functions, {})

    assert "a log line" in (tmp_path / "logs" / "probe.log").read_text()
