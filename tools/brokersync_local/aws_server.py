"""moto's server with Lambda invocations routed to BrokerSync's own handlers, in warm processes.

Stand-in for Lambda: moto without Docker answers every invoke with a canned payload. This
launcher replaces that one method (``LambdaSimpleBackend.invoke``, a private moto API: moto
is pinned in pyproject.toml for this reason) so that a function whose environment names
``BROKERSYNC_HANDLER=<folder>`` runs that function's ``lambda_handler``, built by ``sam build``
(:mod:`function_code`), in an execution environment of its own (:mod:`warm_functions`: a warm
process per function and per concurrent invocation, never inside this server's process), with
the function's configured environment, and returns its JSON result. An exception becomes
``FunctionError: Unhandled`` with Lambda's error payload, so Step Functions Retry and Catch see
what they would see in AWS. Everything else about the state machines (ASL interpretation, waits, retries) is moto's
own engine. Amazon MQ reboots are routed to the local broker processes (see ``amazon_mq``),
StopExecution reports ABORTED at once (see ``stepfunctions_stop``), StartExecution without a
name gets a fresh one (see ``stepfunctions_names``), and HTTP connections stay open between
requests (see ``keep_alive``).

Run as ``python -m brokersync_local.aws_server -H 127.0.0.1 -p PORT`` (MotoServer does).
"""

from __future__ import annotations

import atexit
import json
import sys
from pathlib import Path
from typing import Any

from moto.awslambda_simple.models import LambdaSimpleBackend

from brokersync_local import amazon_mq, keep_alive, stepfunctions_names, stepfunctions_stop
from brokersync_local.function_code import server_function_code
from brokersync_local.warm_functions import ThrottledError, WarmFunctions

HANDLER_VARIABLE = "BROKERSYNC_HANDLER"
#: The functions' logs (their CloudWatch log streams), in the endpoint's working directory.
_functions = WarmFunctions(Path.cwd() / "functions", code=server_function_code())
atexit.register(_functions.close)


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
    try:
        answer = _functions.invoke(
            function.function_arn,
            function.function_name,
            folder,
            environment,
            float(function.timeout),
            int(function.memory_size),
            event,
        )
    except ThrottledError as e:
        response_headers["x-amz-function-error"] = "Unhandled"
        return json.dumps({"errorType": "TooManyRequestsException", "errorMessage": f"{e}: rate exceeded"}).encode()
    if "error" in answer:  # reported to the caller exactly as Lambda does
        response_headers["x-amz-function-error"] = "Unhandled"
        return json.dumps(answer["error"]).encode()
    return json.dumps(answer["result"]).encode()


_original_invoke = LambdaSimpleBackend.invoke
LambdaSimpleBackend.invoke = _invoke  # type: ignore[method-assign]
amazon_mq.install()
stepfunctions_stop.install()
stepfunctions_names.install()
keep_alive.install()


def main() -> None:
    from moto.server import main as moto_main  # noqa: PLC0415 (after the patch)

    moto_main(sys.argv[1:])


if __name__ == "__main__":
    main()
