"""The local pair runs the rendered configurations, and they copy and capture as designed."""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path

import pytest
from lxml import etree
from ulid import ULID

from brokersync.broker.statistics import StatisticsClient
from brokersync.broker.stomp import StompConnector
from brokersync.purge.remover import SelectorRemover
from brokersync.topology import CONSUMED_QUEUE, load_topology
from brokersync_local.browsing import browse
from brokersync_local.errors import PortTakenError
from brokersync_local.moto_server import PROCESS_MARKER
from brokersync_local.pids import pid_is_ours
from brokersync_local.restarts import restart_dr
from brokersync_local.world import LocalWorld, WorldPorts
from tests.integration.stomp_helpers import produce, receive, send
from tests.ports import shifted_ports

pytestmark = pytest.mark.broker
NS = {"c": "http://activemq.apache.org/schema/core"}


def test_a_message_sent_to_the_primary_arrives_on_dr_unchanged(primary: StompConnector, dr: StompConnector) -> None:
    key = str(ULID())
    send(primary, "ORDERS", '{"order": 42}', {"correlation-id": key, "tenant": "acme", "amq-msg-type": "text"})

    [original] = receive(primary, "ORDERS", 1, ack=False)
    [copy] = receive(dr, "ORDERS", 1)

    assert copy.headers["message-id"] == original.headers["message-id"]
    assert copy.headers["correlation-id"] == key
    assert copy.headers["tenant"] == "acme"
    assert copy.headers["timestamp"] == original.headers["timestamp"]
    assert copy.body == '{"order": 42}'


def test_consuming_on_the_primary_records_an_advisory_with_both_ids(primary: StompConnector) -> None:
    key = str(ULID())
    send(primary, "ORDERS", "consume me", {"correlation-id": key})

    [consumed] = receive(primary, "ORDERS", 1)
    [advisory] = receive(primary, CONSUMED_QUEUE, 1, transformation="jms-advisory-json")

    (message,) = json.loads(advisory.body).values()
    assert message["correlationId"] == key
    assert advisory.headers["orignalMessageId"] == consumed.headers["message-id"]
    assert advisory.headers["orignalDestination"] == "queue://ORDERS"


def test_a_mirror_queue_is_copied_but_raises_no_consumed_record(primary: StompConnector, dr: StompConnector) -> None:
    send(primary, "AUDIT", "audit entry", {"correlation-id": str(ULID())})

    assert len(receive(primary, "AUDIT", 1)) == 1
    assert len(receive(dr, "AUDIT", 1)) == 1
    assert receive(primary, CONSUMED_QUEUE, 1, timeout_s=1.5, transformation="jms-advisory-json") == []


def test_the_bridges_own_consumption_of_the_copy_raises_no_consumed_record(primary: StompConnector) -> None:
    send(primary, "ORDERS", "copied, not consumed", {"correlation-id": str(ULID())})

    assert receive(primary, CONSUMED_QUEUE, 1, timeout_s=1.5, transformation="jms-advisory-json") == []


def test_nothing_but_the_synced_queues_is_bridged(
    primary: StompConnector, dr_stats: StatisticsClient, world: LocalWorld
) -> None:
    send(primary, "APP.NOT.SYNCED", "stays on the primary", {})  # an application queue (topology access)
    time.sleep(1.5)

    dr_queues = set(dr_stats.all_queue_stats())

    declared = set(
        etree.parse(str(world.brokers["dr"].conf_file)).xpath("//c:destinations/c:queue/@physicalName", namespaces=NS)
    )
    synced = {q.name for q in world.topology.queues} | {world.topology.dr_name(q) for q in world.topology.queues}
    assert "APP.NOT.SYNCED" not in dr_queues
    # ActiveMQ's own queues (ActiveMQ.DLQ: a DR copy that expired is dead-lettered there) are the broker's.
    assert {q for q in dr_queues if not q.startswith("ActiveMQ.")} <= synced | declared


def test_large_purge_rounds_are_confirmed_promptly_over_loopback(dr: StompConnector) -> None:
    """Regression: with ActiveMQ's 64 KB socket buffers, loopback's 64 KB segments were dropped
    whenever the broker's reader paused, and every other 5,000-key round waited 20 s for its
    receipt and failed. The local connectors' buffers are sized for loopback."""
    keys = [str(ULID()) for _ in range(20_000)]
    produce(dr, "ORDERS", [("x" * 1024, {"correlation-id": key}) for key in keys])  # confirmed: all stored
    ids = [f.headers["message-id"] for f in browse(dr, "ORDERS", timeout_s=60)]
    assert len(ids) == len(keys)
    remover = SelectorRemover(dr)

    rounds = [remover.remove("ORDERS", ids[start : start + 5000]) for start in range(0, len(ids), 5000)]

    assert [len(r.removed) for r in rounds] == [5000] * 4
    assert max(r.elapsed_s for r in rounds) < 8


def test_a_second_up_while_running_is_a_no_op(world: LocalWorld) -> None:
    pids_before = {role: world.read_env()[role]["pid"] for role in ("primary", "dr", "aws")}
    messages: list[str] = []

    world.up(log=messages.append)

    assert messages == [f"local world already running (see {world.env_file})"]
    assert {role: world.read_env()[role]["pid"] for role in ("primary", "dr", "aws")} == pids_before


def test_a_broker_restarted_in_the_running_world_is_still_the_world_s(world: LocalWorld, topology_path: Path) -> None:
    restart_dr(world)  # and bridged again, as the next test expects

    assert LocalWorld(load_topology(topology_path), world.state_dir, world.ports).running()


def test_env_json_describes_the_running_world(world: LocalWorld) -> None:
    env = json.loads(world.env_file.read_text())

    assert env["primary"]["stomp"] == "127.0.0.1:61623"
    assert env["dr"]["openwire"] == "127.0.0.1:62626"
    assert env["aws"]["endpoint"] == "http://127.0.0.1:5015"
    assert all(pid_is_ours(env[role]["pid"], world.brokers[role].base_dir) for role in ("primary", "dr"))


def test_a_taken_port_is_refused_with_a_clear_message(tmp_path: Path, topology_path: Path) -> None:
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        taken = squatter.getsockname()[1]
        ports = WorldPorts(primary_openwire=taken, primary_stomp=61643, dr_openwire=62646, dr_stomp=62643, aws=5035)

        with pytest.raises(PortTakenError, match=f"port {taken} \\(primary openwire\\) is already in use"):
            LocalWorld(load_topology(topology_path), tmp_path, ports).up(log=lambda _m: None)


def test_down_stops_every_process_it_started(tmp_path: Path, topology_path: Path) -> None:
    ports = shifted_ports(
        WorldPorts(primary_openwire=61656, primary_stomp=61653, dr_openwire=62656, dr_stomp=62653, aws=5055)
    )
    world = LocalWorld(load_topology(topology_path), tmp_path, ports)
    world.up(log=lambda _m: None)
    pids = [(b.pid, b.base_dir) for b in world.brokers.values()] + [(world.moto.pid, PROCESS_MARKER)]

    world.down(log=lambda _m: None)

    assert not any(pid_is_ours(pid, marker) for pid, marker in pids if pid)
    assert not world.env_file.exists()


def test_a_stale_env_file_is_cleaned_up_by_the_next_up(tmp_path: Path, topology_path: Path) -> None:
    ports = shifted_ports(
        WorldPorts(primary_openwire=61666, primary_stomp=61663, dr_openwire=62666, dr_stomp=62663, aws=5065)
    )
    world = LocalWorld(load_topology(topology_path), tmp_path, ports)
    world.env_file.parent.mkdir(parents=True, exist_ok=True)
    world.env_file.write_text(json.dumps({"primary": {"pid": 999_999}, "dr": {"pid": 999_998}}))
    messages: list[str] = []

    try:
        world.up(log=messages.append)
        assert any("is not running; cleaning up" in m for m in messages)
        assert world.running()
    finally:
        world.down(log=lambda _m: None)
