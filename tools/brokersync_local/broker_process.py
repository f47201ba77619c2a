"""One real ActiveMQ broker process, run the way DESIGN.md says (never the Debian service).

``/usr/bin/activemq`` forces its own base directory and heap, so the broker is started
directly with ``activemq.jar`` and the JVM flags that script would pass on Java 17. The
process is a session leader, so stopping it never signals whoever started it, and every
wait checks that the process is still alive and shows the tail of its log when it is not.
"""

from __future__ import annotations

import re
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from brokersync_local.errors import ProcessFailedError
from brokersync_local.interrupts import interrupts_held
from brokersync_local.pids import pid_is_ours, signal_group
from brokersync_local.ports import port_answers, wait_until_answers
from brokersync_local.wrapper import LocalPorts

ACTIVEMQ_HOME = Path("/usr/share/activemq")
#: Jars the STOMP jms-advisory-json / jms-map-json transformations need (Debian packages).
TRANSFORMATION_JARS = (Path("/usr/share/java/jettison.jar"), Path("/usr/share/java/xstream.jar"))
#: Java 17 module flags /usr/bin/activemq passes; without them the broker fails to start.
JAVA_MODULE_FLAGS = (
    "--add-opens=java.base/java.security=ALL-UNNAMED",
    "--add-opens=java.base/java.net=ALL-UNNAMED",
    "--add-opens=java.base/java.lang=ALL-UNNAMED",
    "--add-opens=java.base/java.util=ALL-UNNAMED",
    "--add-opens=java.naming/javax.naming.spi=ALL-UNNAMED",
    "--add-opens=java.rmi/sun.rmi.transport.tcp=ALL-UNNAMED",
    "--add-opens=java.base/java.util.concurrent=ALL-UNNAMED",
    "--add-opens=java.base/java.util.concurrent.atomic=ALL-UNNAMED",
    "--add-exports=java.base/sun.net.www.protocol.http=ALL-UNNAMED",
    "--add-exports=java.base/sun.net.www.protocol.https=ALL-UNNAMED",
)
_BRIDGE_UP = re.compile(r"Network connection between .* \((?P<remote>[^)]+)\) has been established")


#: The local brokers' heap unless sized otherwise.
DEFAULT_HEAP_MB = 256


def heap_for_queue_memory(memory_limit_mb: int) -> str:
    """A DR broker's ``-Xmx`` for a queue memory limit: twice the limit, never below the default.

    Why: the broker's own memory limit (70 % of its heap in the default configuration) caps
    every queue's: a queue's cursor stops paging in when the broker's limit is reached,
    whatever the queue's own limit says. With the default 256 MB heap, a 100,000-deep queue of
    1 KB messages paged in 88,704 at a queue limit of 384 MB and of 1,024 MB alike
    (``bench/deep_tail.py``). In Amazon MQ the instance type sets the heap; this
    is the local world choosing an instance type for the limit.
    """
    return f"{max(DEFAULT_HEAP_MB, 2 * memory_limit_mb)}m"


@dataclass
class BrokerProcess:
    """A broker with a base directory (conf, data, lib, tmp) that survives restarts."""

    name: str
    base_dir: Path
    ports: LocalPorts
    heap: str = f"{DEFAULT_HEAP_MB}m"
    pid: int | None = None
    _process: subprocess.Popen[bytes] | None = field(default=None, repr=False)
    _log_offset: int = field(default=0, repr=False)

    @property
    def conf_file(self) -> Path:
        return self.base_dir / "conf" / "activemq.xml"

    @property
    def data_dir(self) -> Path:
        return self.base_dir / "data"

    @property
    def log_file(self) -> Path:
        return self.data_dir / "activemq.log"

    def prepare(self, xbean_configuration: str) -> None:
        """Lay out the base directory and write the configuration the next start will run."""
        for sub in ("conf", "data", "tmp", "lib"):
            (self.base_dir / sub).mkdir(parents=True, exist_ok=True)
        self.conf_file.write_text(xbean_configuration, encoding="utf-8")
        shutil.copyfile(Path(__file__).with_name("log4j.properties"), self.base_dir / "conf" / "log4j.properties")
        for jar in TRANSFORMATION_JARS:
            link = self.base_dir / "lib" / jar.name
            if not link.exists():
                link.symlink_to(jar)

    def command(self) -> list[str]:
        base = str(self.base_dir)
        return [
            "java",
            "-Xms64m",
            f"-Xmx{self.heap}",
            "-XX:+UseSerialGC",
            *JAVA_MODULE_FLAGS,
            f"-Dactivemq.home={ACTIVEMQ_HOME}",
            self.base_argument,
            f"-Dactivemq.conf={base}/conf",
            f"-Dactivemq.data={base}/data",
            f"-Djava.io.tmpdir={base}/tmp",  # noqa: S108 (the broker's own tmp under its base dir)
            f"-Dlog4j.configuration=file:{base}/conf/log4j.properties",
            "-jar",
            str(ACTIVEMQ_HOME / "bin" / "activemq.jar"),
            "start",
            f"xbean:file:{self.conf_file}",
        ]

    @property
    def base_argument(self) -> str:
        """The JVM argument naming this broker's base directory: it finds the process by its command line."""
        return f"-Dactivemq.base={self.base_dir}"

    def start(self) -> int:
        """Start the JVM (returns at once; see :meth:`wait_ready`)."""
        if not ACTIVEMQ_HOME.exists():
            raise ProcessFailedError("ActiveMQ is not installed (apt-get install activemq); `make demo` installs it")
        self._log_offset = self.log_file.stat().st_size if self.log_file.exists() else 0
        stdout = (self.data_dir / "stdout.log").open("ab")
        with interrupts_held():  # a JVM started is a JVM whose PID is known
            process = subprocess.Popen(
                self.command(),
                stdout=stdout,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
                cwd=self.base_dir,
            )
            self._process = process
            self.pid = process.pid
        stdout.close()
        return process.pid

    def alive(self) -> bool:
        if self._process is not None and self._process.pid == self.pid:
            return self._process.poll() is None  # also reaps it, so no zombie lingers
        return self.pid is not None and pid_is_ours(self.pid, self.base_dir)

    def wait_ready(self, timeout_s: float = 60.0) -> None:
        """Block until both transports accept connections; raise with the log tail if the JVM dies."""
        deadline = time.monotonic() + timeout_s
        for port in (self.ports.openwire, self.ports.stomp):
            if not wait_until_answers(port, deadline, self.alive):
                state = "exited" if not self.alive() else f"did not open port {port} within {timeout_s:.0f}s"
                raise ProcessFailedError(f"broker {self.name} {state}\n{self.log_tail()}")

    def bridges_established(self) -> int:
        """How many network bridges this run of the broker has reported established (from its log).

        The log is the one signal that needs no extra port or plugin: ActiveMQ logs one line
        per bridge when its connection to the remote broker is up and subscribed.
        """
        if not self.log_file.exists():
            return 0
        with self.log_file.open("rb") as log:
            log.seek(self._log_offset)
            text = log.read().decode("utf-8", errors="replace")
        return len(_BRIDGE_UP.findall(text))

    def stop(self, timeout_s: float = 20.0) -> None:
        """SIGTERM, then SIGKILL if the broker has not shut down cleanly in time."""
        if not self.alive():
            self.pid = None
            return
        assert self.pid is not None
        signal_group(self.pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and self.alive():
            time.sleep(0.1)
        if self.alive():
            self.kill()
        self.pid = None

    def kill(self) -> None:
        """SIGKILL: the abrupt loss of the broker that a failover drill simulates."""
        if self.pid is None:
            return
        signal_group(self.pid, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and self.alive():
            time.sleep(0.05)
        self.pid = None

    def answering(self) -> bool:
        return self.alive() and port_answers(self.ports.stomp)

    def log_tail(self, lines: int = 25) -> str:
        for candidate in (self.log_file, self.data_dir / "stdout.log"):
            if candidate.exists():
                text = candidate.read_text(encoding="utf-8", errors="replace").splitlines()
                return "\n".join(f"  | {line}" for line in text[-lines:])
        return "  | (no log written)"
