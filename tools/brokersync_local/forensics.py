"""Reading what a killed broker held when it died, without bringing it back into the pair.

A drill needs the exact number of copies that were still in the old primary's ``Q.DR``
outflow when it was killed (they are what a failover can lose). The broker's KahaDB store
on disk is that state, so a copy of the store is opened by a throwaway broker with no
network connector and no composite destinations, on ports of its own, and browsed.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from brokersync.broker.stomp import StompConnector
from brokersync_local.broker_process import BrokerProcess
from brokersync_local.browsing import browse
from brokersync_local.ports import free_port
from brokersync_local.wrapper import LocalPorts, wrap_for_local

_READER = """<broker xmlns="http://activemq.apache.org/schema/core" schedulePeriodForDestinationPurge="0">
  <destinationPolicy>
    <policyMap>
      <policyEntries>
        <policyEntry queue="&gt;" maxBrowsePageSize="1000000" maxPageSize="1000000" />
      </policyEntries>
    </policyMap>
  </destinationPolicy>
</broker>
"""


def copy_store(data_dir: Path, into: Path) -> Path:
    """A copy of a stopped (or frozen) broker's KahaDB store in ``into``, a data directory to read later.

    Copying takes a moment where starting a reader takes seconds: a drill copies at the instant
    it needs and reads the copy when the timing no longer matters.
    """
    shutil.copytree(data_dir / "kahadb", into / "kahadb")
    return into


def read_dead_store(data_dir: Path, queues: list[str], timeout_s: float = 60.0) -> dict[str, list[str]]:
    """Correlation ids (or message ids) of every message on ``queues`` in a dead broker's store."""
    with tempfile.TemporaryDirectory(prefix="brokersync-forensics-") as scratch:
        ports = LocalPorts(openwire=free_port(), stomp=free_port())
        reader = BrokerProcess(name="forensic-reader", base_dir=Path(scratch), ports=ports)
        reader.prepare(wrap_for_local(_READER, "forensic-reader", ports))
        shutil.copytree(data_dir / "kahadb", reader.data_dir / "kahadb", dirs_exist_ok=True)
        (reader.data_dir / "kahadb" / "lock").unlink(missing_ok=True)
        reader.start()
        try:
            reader.wait_ready(timeout_s)
            connector = StompConnector([f"stomp://127.0.0.1:{ports.stomp}"])
            return {
                queue: [f.headers.get("correlation-id") or f.headers["message-id"] for f in browse(connector, queue)]
                for queue in queues
            }
        finally:
            reader.stop()
