"""Lambda's execution environments, made small: warm processes, one per concurrent invocation.

Stand-in for the Lambda service inside the local AWS endpoint (:mod:`aws_server`). Each
function gets processes of its own (:mod:`function_runtime`; what they run and under which
Python is :mod:`function_code`'s choice, ``sam build``'s output by default), started on its first
invocation (the cold start) and kept warm for the next, one invocation at a time each; a
second concurrent invocation gets a second environment, as Lambda scales out. Each runs under
the function's configured environment plus what Lambda adds (region, name, memory), writes
its logs to ``functions/<name>.log`` in the endpoint's state directory, and is bounded by the
function's timeout: an environment that overruns is killed and the invocation reports
Lambda's timeout error, one that dies reports ``Runtime.ExitError``. The environments belong to
the endpoint's process group, so stopping or partitioning the endpoint stops them with it.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from brokersync_local.function_code import FunctionCode, source_code

#: Time a cold environment gets to import its handler, on top of the function's timeout (Lambda's init phase).
INIT_GRACE_S = 10.0
#: Environments per function at most; a further concurrent invocation is throttled, as Lambda throttles.
MAX_ENVIRONMENTS = 8
#: Where each function's ``app.py`` lives (``functions/<folder>/``).
FUNCTIONS = Path(__file__).resolve().parents[2] / "functions"


class ThrottledError(Exception):
    """More concurrent invocations than the function may have environments."""


@dataclass
class Environment:
    process: subprocess.Popen[bytes]
    replies: Any
    warm: bool = False

    def alive(self) -> bool:
        return self.process.poll() is None

    def kill(self) -> None:
        if self.alive():
            self.process.kill()
        self.process.wait(timeout=10)
        self.replies.close()


@dataclass
class FunctionPool:
    name: str
    folder: str
    environment: dict[str, str]
    timeout_s: float
    log_dir: Path
    functions_dir: Path = FUNCTIONS
    code: FunctionCode = field(default_factory=source_code)
    idle: list[Environment] = field(default_factory=list)
    busy: int = 0

    def _start(self) -> Environment:
        read_fd, write_fd = os.pipe()
        self.log_dir.mkdir(parents=True, exist_ok=True)
        with (self.log_dir / f"{self.name}.log").open("ab") as log:
            process = subprocess.Popen(
                self.code.command(self.folder, write_fd, self.functions_dir),
                stdin=subprocess.PIPE,
                stdout=log,
                stderr=subprocess.STDOUT,
                pass_fds=(write_fd,),
                env=self.environment,
            )
        os.close(write_fd)
        return Environment(process, os.fdopen(read_fd, "r", encoding="utf-8"))

    def invoke(self, event: Any, lock: threading.Lock) -> dict[str, Any]:
        """Run one invocation; the answer is ``{"result": ...}`` or ``{"error": {...}}``."""
        with lock:
            while self.idle and not self.idle[-1].alive():
                self.idle.pop().kill()
            if self.idle:
                env = self.idle.pop()
            elif self.busy >= MAX_ENVIRONMENTS:
                raise ThrottledError(self.name)
            else:
                env = self._start()
            self.busy += 1
        try:
            answer = self._run(env, event)
        finally:
            with lock:
                self.busy -= 1
                if env.alive():
                    env.warm = True
                    self.idle.append(env)
        return answer

    def _run(self, env: Environment, event: Any) -> dict[str, Any]:
        request_id = str(uuid.uuid4())
        request = {"event": event, "timeoutMs": int(self.timeout_s * 1000), "requestId": request_id}
        budget = self.timeout_s + (0.0 if env.warm else INIT_GRACE_S)
        try:
            assert env.process.stdin is not None
            env.process.stdin.write((json.dumps(request) + "\n").encode())
            env.process.stdin.flush()
        except (BrokenPipeError, OSError):
            env.kill()
            return _exit_error(self.name)
        deadline = time.monotonic() + budget
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                env.kill()
                return {
                    "error": {
                        "errorType": "Sandbox.Timedout",
                        "errorMessage": f"{request_id} Task timed out after {self.timeout_s:.2f} seconds",
                    }
                }
            ready, _, _ = select.select([env.replies], [], [], min(remaining, 1.0))
            if ready:
                line = env.replies.readline()
                if not line:
                    env.kill()
                    return _exit_error(self.name)
                return json.loads(line)


def _exit_error(name: str) -> dict[str, Any]:
    return {"error": {"errorType": "Runtime.ExitError", "errorMessage": f"{name}: the runtime exited"}}


class WarmFunctions:
    """Every function's pool of environments, keyed by the function's ARN."""

    def __init__(self, log_dir: Path, functions_dir: Path = FUNCTIONS, code: FunctionCode | None = None) -> None:
        self.log_dir = log_dir
        self.functions_dir = functions_dir
        self.code = code or source_code()
        self._pools: dict[str, FunctionPool] = {}
        self._lock = threading.Lock()

    def invoke(
        self,
        arn: str,
        name: str,
        folder: str,
        environment: dict[str, str],
        timeout_s: float,
        memory_mb: int,
        event: Any,
    ) -> dict[str, Any]:
        region = arn.split(":")[3]
        with self._lock:
            pool = self._pools.get(arn)
            if pool is None or pool.environment.get("BROKERSYNC_CONFIG_DIGEST") != _digest(environment):
                # A changed configuration (an update-function-configuration) starts fresh environments.
                if pool is not None:
                    for env in pool.idle:
                        env.kill()
                lambda_env = {
                    **os.environ,
                    **environment,
                    "AWS_REGION": region,
                    "AWS_DEFAULT_REGION": region,
                    "AWS_LAMBDA_FUNCTION_NAME": name,
                    "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": str(memory_mb),
                    "AWS_LAMBDA_FUNCTION_TIMEOUT": str(int(timeout_s)),
                    "BROKERSYNC_CONFIG_DIGEST": _digest(environment),
                    "PYTHONUNBUFFERED": "1",
                }
                pool = FunctionPool(name, folder, lambda_env, timeout_s, self.log_dir, self.functions_dir, self.code)
                self._pools[arn] = pool
        return pool.invoke(event, self._lock)

    def close(self) -> None:
        with self._lock:
            for pool in self._pools.values():
                for env in pool.idle:
                    env.kill()
            self._pools.clear()


def _digest(environment: dict[str, str]) -> str:
    return str(hash(json.dumps(environment, sort_keys=True)))
