"""Global-table replication between two regions' moto servers: late, last writer wins, stalls, catches up.

Two moto servers are two regions (each holds only its own region's tables); the region
lost is a moto server paused with SIGSTOP, its state intact, resumed with SIGCONT.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
import pytest

from brokersync.failover.errors import TransitionConflictError
from brokersync.ledger.control import ControlRecords, control_model
from brokersync.ledger.schema import create_ledger_table
from brokersync.role_gate import RoleGate
from brokersync.roles import RoleStore
from brokersync.topology import load_topology
from brokersync_local.moto_server import MotoServer
from brokersync_local.replication import GlobalTableReplication, RegionEndpoint
from brokersync_local.world import WorldPorts
from tests.ports import shifted_ports

TABLE = "brokersync-replication-test-ledger"
PORTS = shifted_ports(WorldPorts(aws=5135)).aws, shifted_ports(WorldPorts(aws=5136)).aws
LAG_S = 1.0


@dataclass
class TwoRegions:
    east: MotoServer
    west: MotoServer
    replication: GlobalTableReplication
    stop: threading.Event

    def client(self, region: str) -> Any:
        server = self.east if region == "us-east-1" else self.west
        return boto3.client(
            "dynamodb", region_name=region, endpoint_url=server.endpoint,
            aws_access_key_id="local", aws_secret_access_key="local",
        )  # fmt: skip

    def roles(self, region: str) -> RoleStore:
        server = self.east if region == "us-east-1" else self.west
        return RoleStore(ControlRecords(control_model(TABLE, region, server.endpoint)))


@pytest.fixture(scope="module")
def regions(tmp_path_factory: pytest.TempPathFactory, project_root: Path) -> Iterator[TwoRegions]:
    credentials = pytest.MonkeyPatch()
    for name, value in {"AWS_ACCESS_KEY_ID": "local", "AWS_SECRET_ACCESS_KEY": "local"}.items():
        credentials.setenv(name, value)
    base = tmp_path_factory.mktemp("two-regions")
    east, west = MotoServer(PORTS[0], base / "east"), MotoServer(PORTS[1], base / "west")
    east.start()
    west.start()
    stop = threading.Event()
    try:
        for server, region in ((east, "us-east-1"), (west, "us-west-2")):
            dynamodb = boto3.client("dynamodb", region_name=region, endpoint_url=server.endpoint)
            create_ledger_table(dynamodb, TABLE, project_root / "template.yaml")
        replication = GlobalTableReplication(
            TABLE,
            [RegionEndpoint("us-east-1", east.endpoint), RegionEndpoint("us-west-2", west.endpoint)],
            lag_s=LAG_S,
        )
        worker = threading.Thread(target=replication.run, args=(stop,), daemon=True)
        worker.start()
        yield TwoRegions(east, west, replication, stop)
    finally:
        stop.set()
        east.stop()
        west.stop()
        credentials.undo()


def _item(pk: str, value: str) -> dict[str, Any]:
    return {"pk": {"S": pk}, "sk": {"S": "current"}, "value": {"S": value}}


def _read(regions: TwoRegions, region: str, pk: str) -> str | None:
    item = regions.client(region).get_item(TableName=TABLE, Key={"pk": {"S": pk}, "sk": {"S": "current"}}).get("Item")
    return item["value"]["S"] if item else None


def _within(seconds: float, condition: Callable[[], bool]) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.1)
    return condition()


def test_a_write_reaches_the_other_region_after_the_lag_not_at_once(regions: TwoRegions) -> None:
    regions.client("us-east-1").put_item(TableName=TABLE, Item=_item("T#late", "east"))
    written = time.monotonic()

    assert _read(regions, "us-west-2", "T#late") is None
    assert _within(10, lambda: _read(regions, "us-west-2", "T#late") == "east")
    assert time.monotonic() - written >= LAG_S * 0.8


def test_an_item_with_a_binary_attribute_replicates_and_replication_goes_on(regions: TwoRegions) -> None:
    binary = {**_item("T#binary", "east"), "blob": {"B": b"\x00\xffledger"}}
    regions.client("us-east-1").put_item(TableName=TABLE, Item=binary)
    regions.client("us-east-1").put_item(TableName=TABLE, Item=_item("T#after-binary", "east"))

    # Items replicate each on its own, in no order across items (as in AWS): wait for both.
    assert _within(10, lambda: _read(regions, "us-west-2", "T#after-binary") == "east")
    assert _within(10, lambda: _read(regions, "us-west-2", "T#binary") == "east")
    copied = regions.client("us-west-2").get_item(
        TableName=TABLE, Key={"pk": {"S": "T#binary"}, "sk": {"S": "current"}}
    )
    assert copied["Item"]["blob"]["B"] == b"\x00\xffledger"


def test_two_regions_writing_one_item_converge_on_the_later_write(regions: TwoRegions) -> None:
    regions.client("us-east-1").put_item(TableName=TABLE, Item=_item("T#both", "east-first"))
    time.sleep(0.05)
    regions.client("us-west-2").put_item(TableName=TABLE, Item=_item("T#both", "west-later"))

    assert _within(10, lambda: _read(regions, "us-east-1", "T#both") == "west-later")
    time.sleep(LAG_S * 2)
    assert _read(regions, "us-east-1", "T#both") == _read(regions, "us-west-2", "T#both") == "west-later"


def test_a_paused_region_receives_nothing_and_catches_up_with_its_state_intact(regions: TwoRegions) -> None:
    regions.client("us-west-2").put_item(TableName=TABLE, Item=_item("T#kept", "west-before"))
    assert _within(10, lambda: _read(regions, "us-east-1", "T#kept") == "west-before")

    os.killpg(regions.west.pid, signal.SIGSTOP)  # type: ignore[arg-type]
    try:
        regions.client("us-east-1").put_item(TableName=TABLE, Item=_item("T#partitioned", "east-during"))
        # Read from east's stream within a step (a step waits out west's read timeout), then held
        # for west well past its lag: nothing is delivered to a region that does not answer.
        assert _within(10, lambda: regions.replication.backlog()["us-west-2"] >= 1)
        time.sleep(LAG_S * 3)
        assert regions.replication.backlog()["us-west-2"] >= 1
    finally:
        os.killpg(regions.west.pid, signal.SIGCONT)  # type: ignore[arg-type]

    assert _within(15, lambda: _read(regions, "us-west-2", "T#partitioned") == "east-during")
    assert _read(regions, "us-west-2", "T#kept") == "west-before"


def test_a_backlog_of_versions_delivered_after_a_partition_does_not_bounce_an_older_one_back(
    regions: TwoRegions,
) -> None:
    os.killpg(regions.west.pid, signal.SIGSTOP)  # type: ignore[arg-type]
    try:
        for version in ("in-progress", "done"):  # a transition record written twice while west is away
            regions.client("us-east-1").put_item(TableName=TABLE, Item=_item("T#transition", version))
            time.sleep(1.1)
    finally:
        os.killpg(regions.west.pid, signal.SIGCONT)  # type: ignore[arg-type]

    assert _within(15, lambda: _read(regions, "us-west-2", "T#transition") == "done")
    time.sleep(LAG_S * 4)
    assert _read(regions, "us-east-1", "T#transition") == _read(regions, "us-west-2", "T#transition") == "done"


def test_failovers_started_in_both_regions_from_one_epoch_each_win_locally_then_one_wins_everywhere(
    regions: TwoRegions, topology_path: Path
) -> None:
    """Conditional writes are checked against a region's own replica (as in AWS): a partition lets
    both regions claim the roles; replication then makes every region hold the later claim, and
    the losing side's next write is refused, so its transition cannot go on."""
    topology = load_topology(topology_path)
    east, west = regions.roles("us-east-1"), regions.roles("us-west-2")
    os.killpg(regions.west.pid, signal.SIGSTOP)  # type: ignore[arg-type]
    try:
        seen_east = east.assignment(topology)
        east.write(seen_east.swapped("FAILOVER exec-east"))
    finally:
        os.killpg(regions.west.pid, signal.SIGCONT)  # type: ignore[arg-type]
    seen_west = west.assignment(topology)  # the east claim has not arrived yet (the lag)
    assert seen_west.epoch == seen_east.epoch
    west.write(seen_west.swapped("FAILOVER exec-west"))

    assert _within(10, lambda: east.read().reason == "FAILOVER exec-west")  # type: ignore[union-attr]
    assert west.read().reason == "FAILOVER exec-west"  # type: ignore[union-attr]
    with pytest.raises(TransitionConflictError, match="exec-west"):
        east.write(seen_east.swapped("FAILOVER exec-east").next("FAILOVER exec-east: start sync"))


def _standing(regions: TwoRegions, region: str, role: str, topology: Any) -> RoleGate:
    return RoleGate(regions.roles(region), topology, role, region, poll_s=0.1)  # type: ignore[arg-type]


def test_both_regions_loops_follow_a_stop_of_sync_and_a_failover_within_the_lag(
    regions: TwoRegions, topology_path: Path
) -> None:
    """The relay gate of each region reads its own replica: a StopSync written in one region
    idles both regions' loops once replicated, and after a failover exactly one region relays."""
    topology = load_topology(topology_path)
    east_relay, west_relay = (_standing(regions, r, "primary", topology) for r in ("us-east-1", "us-west-2"))
    west = regions.roles("us-west-2")
    base = west.assignment(topology)
    east_was_relaying = east_relay.standing().acting

    stopped = west.write(base.next("SWITCHOVER exec-s: stop sync", sync_running=False))
    assert _within(10, lambda: not east_relay.standing().acting)
    west.write(stopped.swapped("SWITCHOVER exec-s"))
    swapped = west.read()
    west.write(swapped.next("SWITCHOVER exec-s: start sync", sync_running=True))  # type: ignore[union-attr]

    assert _within(10, lambda: regions.roles("us-east-1").read().epoch == west.read().epoch)  # type: ignore[union-attr]
    relaying = {r for r, gate in (("us-east-1", east_relay), ("us-west-2", west_relay)) if gate.standing().acting}
    new_primary = west.read().primary  # type: ignore[union-attr]
    expected = {"us-west-2"} if new_primary == "orders-usw2" else {"us-east-1"}
    assert relaying == expected, (east_was_relaying, new_primary)
