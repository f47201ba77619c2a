"""Lambda's Python bootstrap, made small: run one handler from a sam build output, standard library only.

Started as ``python3.13 -I -S lambda_bootstrap.py CODE_DIR LAYER_DIR HANDLER EVENT_FILE TIMEOUT_S OUT_FILE``
by :mod:`brokersync_local.built_functions`. ``-I -S`` leave only the interpreter's standard library
on ``sys.path``; this puts the function's code first and the layer's ``python/`` second, as
Lambda does with ``/var/task`` and ``/opt/python``. Nothing of the project's virtualenv is
reachable, so a dependency the layer does not ship fails here as it would in Lambda.

The result (or Lambda's error shape) goes to OUT_FILE as JSON, with every imported module that
came from neither the build output nor the standard library (there should be none).
"""

import importlib
import json
import os
import sys
import sysconfig
import time
import traceback
import uuid
from pathlib import Path


class Context:
    """The Lambda context fields our handlers and powertools read."""

    def __init__(self, name: str, timeout_s: float) -> None:
        self.function_name = name
        self.function_version = "$LATEST"
        region = os.environ.get("AWS_REGION", "us-east-1")
        self.invoked_function_arn = f"arn:aws:lambda:{region}:123456789012:function:{name}"
        self.memory_limit_in_mb = int(os.environ.get("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "512"))
        self.aws_request_id = str(uuid.uuid4())
        self.log_group_name = f"/aws/lambda/{name}"
        self.log_stream_name = "local"
        self._deadline = time.monotonic() + timeout_s

    def get_remaining_time_in_millis(self) -> int:
        return max(0, int((self._deadline - time.monotonic()) * 1000))


def _outsiders(allowed: list[str]) -> list[str]:
    found = []
    this = os.path.realpath(__file__)
    for module in list(sys.modules.values()):
        path = getattr(module, "__file__", None)
        real = os.path.realpath(path) if path else this
        if real != this and not any(real.startswith(root) for root in allowed):
            found.append(path)
    return sorted(found)


def main() -> None:
    code, layer, handler, event_file, timeout_s, out_file = sys.argv[1:7]
    sys.path[:0] = [code, layer]
    os.chdir(code)
    event = json.loads(Path(event_file).read_text(encoding="utf-8"))
    context = Context(os.environ.get("AWS_LAMBDA_FUNCTION_NAME", "function"), float(timeout_s))
    module_name, function_name = handler.rsplit(".", 1)
    try:
        result = {"result": getattr(importlib.import_module(module_name), function_name)(event, context)}
    except Exception as e:  # reported in Lambda's error shape
        result = {"errorType": type(e).__name__, "errorMessage": str(e), "stackTrace": traceback.format_exception(e)}
    paths = sysconfig.get_paths()
    allowed = [os.path.realpath(p) for p in (code, layer, paths["stdlib"], paths["platstdlib"])]
    result["outsideModules"] = _outsiders(allowed)
    result["python"] = f"{sys.version_info[0]}.{sys.version_info[1]}"
    Path(out_file).write_text(json.dumps(result, default=str), encoding="utf-8")


if __name__ == "__main__":
    main()
