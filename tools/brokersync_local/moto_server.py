"""moto in server mode on loopback: the local AWS endpoint.

Step Functions execution is switched on (moto only records executions otherwise) and
Lambda runs without Docker, through moto's own configuration endpoint. Its functions run from
``sam build``'s output (:mod:`function_code`), checked here before the server starts.
"""

from __future__ import annotations

import functools
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from brokersync_local.amazon_mq import STATE_DIR_VARIABLE
from brokersync_local.errors import ProcessFailedError
from brokersync_local.function_code import FunctionCode, local_function_code
from brokersync_local.interrupts import interrupts_held
from brokersync_local.pids import pid_is_ours, signal_group
from brokersync_local.ports import LOOPBACK, wait_until_answers

MOTO_CONFIG = {"stepfunctions": {"execute_state_machine": True}, "lambda": {"use_docker": False}}
DEFAULT_REGION = "us-west-2"
#: What identifies our AWS server process on its command line (guards against pid reuse).
PROCESS_MARKER = "brokersync_local.aws_server"


@dataclass
class MotoServer:
    port: int
    state_dir: Path
    pid: int | None = None
    _process: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    @property
    def endpoint(self) -> str:
        return f"http://{LOOPBACK}:{self.port}"

    @property
    def log_file(self) -> Path:
        return self.state_dir / "moto.log"

    @functools.cached_property
    def function_code(self) -> FunctionCode:
        """What its Lambda runs; a missing or stale build is refused here, where the user sees why."""
        return local_function_code()

    def start(self, timeout_s: float = 30.0) -> None:
        code = self.function_code
        self.state_dir.mkdir(parents=True, exist_ok=True)
        log = self.log_file.open("ab")
        with interrupts_held():  # a server started is a server whose PID is known
            self._process = subprocess.Popen(
                [sys.executable, "-m", PROCESS_MARKER, "-H", LOOPBACK, "-p", str(self.port)],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
                cwd=self.state_dir,
                env={**os.environ, **code.environment(), STATE_DIR_VARIABLE: str(self.state_dir.parent)},
            )
            self.pid = self._process.pid
        log.close()
        if not wait_until_answers(self.port, time.monotonic() + timeout_s, self.alive):
            tail = self.log_file.read_text(errors="replace")[-2000:]
            raise ProcessFailedError(f"moto server did not start on port {self.port}:\n{tail}")
        self.configure()

    def __enter__(self) -> MotoServer:
        self.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.stop()

    def configure(self) -> None:
        request = urllib.request.Request(  # noqa: S310 (loopback URL we built)
            f"{self.endpoint}/moto-api/config",
            data=json.dumps(MOTO_CONFIG).encode(),
            headers={"Content-Type": "application/json"},
            method="POST",
        )
        with urllib.request.urlopen(request, timeout=10) as response:  # noqa: S310
            response.read()

    def alive(self) -> bool:
        if self._process is not None and self._process.pid == self.pid:
            return self._process.poll() is None
        return self.pid is not None and pid_is_ours(self.pid, PROCESS_MARKER)

    def stop(self, timeout_s: float = 10.0) -> None:
        if self.pid is None or not self.alive():
            self.pid = None
            return
        signal_group(self.pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and self.alive():
            time.sleep(0.1)
        if self.alive():
            signal_group(self.pid, signal.SIGKILL)
        self.pid = None
