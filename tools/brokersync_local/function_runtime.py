"""One warm Lambda execution environment: a process of its own that runs one function's handler.

Started by :mod:`warm_functions` (inside the local AWS endpoint) with the function's environment,
as ``python3.13 -I -S -u function_runtime.py BUILD_DIR LOGICAL_ID REPLY_FD LAYER_DIR`` for ``sam
build``'s output (:mod:`function_code`; standard library only, so nothing of the virtualenv is
reachable), or as ``python -m brokersync_local.function_runtime FUNCTIONS_DIR FOLDER REPLY_FD``
for the source tree. Like Lambda's runtime loop it imports the handler once (the cold start), then
serves invocations one at a time for as long as it lives: a request is one JSON line on
stdin, ``{"event": ..., "timeoutMs": ..., "requestId": ...}``; the reply is one JSON line on
``REPLY_FD``, the handler's result or Lambda's error shape. Stdout and stderr belong to the
handler (its logs and EMF metrics), as they do in Lambda, so replies never travel on them.

Nothing here is shared with the AWS emulator's process: a handler that leaks memory, changes
``os.environ``, crashes the interpreter or hangs does so in its own process, as in Lambda.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import time
import traceback
from pathlib import Path
from typing import Any


class Context:
    """The Lambda context fields powertools and our handlers read, with a real deadline."""

    def __init__(self, request_id: str, timeout_ms: int) -> None:
        name = os.environ.get("AWS_LAMBDA_FUNCTION_NAME", "function")
        region = os.environ.get("AWS_REGION", "us-east-1")
        self.function_name = name
        self.function_version = "$LATEST"
        self.invoked_function_arn = f"arn:aws:lambda:{region}:123456789012:function:{name}"
        self.memory_limit_in_mb = int(os.environ.get("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "512"))
        self.aws_request_id = request_id
        self.log_group_name = f"/aws/lambda/{name}"
        self.log_stream_name = "local"
        self._deadline = time.monotonic() + timeout_ms / 1000

    def get_remaining_time_in_millis(self) -> int:
        return max(0, int((self._deadline - time.monotonic()) * 1000))


def _load(functions: Path, folder: str) -> Any:
    spec = importlib.util.spec_from_file_location("app", functions / folder / "app.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["app"] = module
    spec.loader.exec_module(module)
    return module.lambda_handler


def _error(e: BaseException) -> dict[str, Any]:
    return {"errorType": type(e).__name__, "errorMessage": str(e), "stackTrace": traceback.format_exception(e)}


def main() -> None:
    functions, folder, reply_fd = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
    if len(sys.argv) > 4:  # a build: its folder first, the layer second, as /var/task and /opt/python
        sys.path[:0] = [str(functions / folder), sys.argv[4]]
        os.chdir(functions / folder)
    reply = os.fdopen(reply_fd, "w", encoding="utf-8", buffering=1)
    try:
        handler = _load(functions, folder)
        init_error = None
    except Exception as e:  # Lambda reports an init failure on every invocation of that environment
        handler, init_error = None, _error(e)
    for line in sys.stdin:
        request = json.loads(line)
        if init_error is not None:
            answer = {"error": init_error}
        else:
            try:
                answer = {"result": handler(request["event"], Context(request["requestId"], request["timeoutMs"]))}
            except Exception as e:  # reported to the caller in Lambda's error shape
                answer = {"error": _error(e)}
        sys.stdout.flush()
        sys.stderr.flush()
        reply.write(json.dumps(answer, default=str) + "\n")


if __name__ == "__main__":
    main()
