"""Running the small Java programs in ``tests/integration/java`` on the broker's own client jars.

They are clients that are not ours (ActiveMQ's OpenWire JMS client), driven the way the
broker's own facts need: one helper runs any of them against a local broker and fails the
test with the program's stderr when it fails.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from brokersync_local.broker_process import ACTIVEMQ_HOME

PROGRAMS = Path(__file__).parent / "java"
#: The client library the broker ships: the same version as the broker it talks to.
CLIENT_JARS = f"{ACTIVEMQ_HOME / 'lib'}/*"


def run_java_client(program: str, port: int, *args: str, timeout_s: float = 120) -> str:
    """Run ``java/<program>.java`` with ``tcp://127.0.0.1:<port>`` and ``args``; what it printed."""
    java = shutil.which("java")
    assert java is not None, "java is what the local brokers run on"
    done = subprocess.run(
        [java, "-cp", CLIENT_JARS, str(PROGRAMS / f"{program}.java"), f"tcp://127.0.0.1:{port}", *args],
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout
