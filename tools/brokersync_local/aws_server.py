"""moto's server with Lambda invocations routed to BrokerSync's own handlers, in process.

Stand-in for Lambda: moto without Docker answers every invoke with a canned payload. This
launcher replaces that one method (``LambdaSimpleBackend.invoke``, a private moto API: moto
is pinned in pyproject.toml for this reason) so that a function whose environment names
``BROKERSYNC_HANDLER=<folder>`` runs ``functions/<folder>/app.py``'s ``lambda_handler``
inside the server process, with the function's configured environment, and returns its
JSON result. An exception becomes ``FunctionError: Unhandled`` with Lambda's error payload,
so Step Functions Retry and Catch see what they would see in AWS. Everything else about
the state machines (ASL interpretation, waits, retries) is moto's own engine. Amazon MQ
reboots are routed to the local broker processes (see ``amazon_mq``), and StopExecution
reports ABORTED at once (see ``stepfunctions_stop``).

Run as ``python -m brokersync_local.aws_server -H 127.0.0.1 -p PORT`` (MotoServer does).
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import threading
import traceback
from pathlib import Path
from types import ModuleType
from typing import Any

from moto.awslambda_simple.models import LambdaSimpleBackend

from brokersync_local import amazon_mq, stepfunctions_stop

FUNCTIONS = Path(__file__).resolve().parents[2] / "functions"
HANDLER_VARIABLE = "BROKERSYNC_HANDLER"
_modules: dict[str, ModuleType] = {}
_lock = threading.Lock()


class _Context:
    """The Lambda context fields powertools and our handlers read."""

    def __init__(self, name: str, arn: str, memory_mb: int, timeout_s: int) -> None:
        self.function_name = name
        self.invoked_function_arn = arn
        self.memory_limit_in_mb = memory_mb
        self.aws_request_id = os.urandom(16).hex()
        self.log_group_name = f"/aws/lambda/{name}"
        self.log_stream_name = "local"
        self._deadline_ms = timeout_s * 1000

    def get_remaining_time_in_millis(self) -> int:
        return self._deadline_ms


def _handler_module(folder: str, environment: dict[str, str]) -> ModuleType:
    """Import the handler once per function (its cold start), under the function's environment."""
    with _lock:
        if folder not in _modules:
            os.environ.update(environment)
            spec = importlib.util.spec_from_file_location(f"local_function_{folder}", FUNCTIONS / folder / "app.py")
            assert spec is not None and spec.loader is not None
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            _modules[folder] = module
        return _modules[folder]


def _invoke(
    self: LambdaSimpleBackend,
    function_name: str,
    qualifier: str | None,
    body: Any,
    headers: Any,
    response_headers: Any,
) -> bytes | None:
    function = self.get_function(function_name, qualifier)
    environment: dict[str, str] = dict(function.environment_vars or {})
    folder = environment.get(HANDLER_VARIABLE)
    if not folder:
        return _original_invoke(self, function_name, qualifier, body, headers, response_headers)
    event = json.loads(body) if body else {}
    context = _Context(function.function_name, function.function_arn, int(function.memory_size), int(function.timeout))
    try:
        result = _handler_module(folder, environment).lambda_handler(event, context)
    except Exception as e:  # reported to the caller exactly as Lambda does
        response_headers["x-amz-function-error"] = "Unhandled"
        error = {
            "errorType": type(e).__name__,
            "errorMessage": str(e),
            "stackTrace": traceback.format_exception(e),
        }
        return json.dumps(error).encode()
    return json.dumps(result).encode()


_original_invoke = LambdaSimpleBackend.invoke
LambdaSimpleBackend.invoke = _invoke  # type: ignore[method-assign]
amazon_mq.install()
stepfunctions_stop.install()


def main() -> None:
    from moto.server import main as moto_main  # noqa: PLC0415 (after the patch)

    moto_main(sys.argv[1:])


if __name__ == "__main__":
    main()
