"""The role gate: a loop acts only in the role its region holds while sync runs, and stops when the record moves."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from brokersync.exceptions import BrokerSyncError
from brokersync.ledger.control import ControlRecords
from brokersync.role_gate import RoleGate
from brokersync.roles import RoleAssignment, RoleStore
from brokersync.topology import Topology, load_topology

USE1_ARN = "arn:aws:mq:us-east-1:111122223333:broker:orders-use1:b-1a2b3c4d-5e6f-4a7b-8c9d-0e1f2a3b4c5d"
USW2_ARN = "arn:aws:mq:us-west-2:111122223333:broker:orders-usw2:b-9f8e7d6c-5b4a-4392-8170-6f5e4d3c2b1a"


@pytest.fixture
def topology(topology_path: Path) -> Topology:
    return load_topology(topology_path)


@pytest.fixture
def store(control_records: ControlRecords) -> RoleStore:
    return RoleStore(control_records)


def test_the_purge_acts_in_the_region_of_the_dr_broker_and_stands_by_in_the_other(
    topology: Topology, store: RoleStore
) -> None:
    assert RoleGate(store, topology, "dr", "us-west-2").standing().acting
    standby = RoleGate(store, topology, "dr", "us-east-1").standing()
    assert not standby.acting and "us-west-2" in standby.reason


def test_after_a_failover_the_old_regions_loops_stand_by_and_the_new_ones_act(
    topology: Topology, store: RoleStore
) -> None:
    store.write(RoleAssignment.initial(topology).swapped("FAILOVER exec-1"))

    assert RoleGate(store, topology, "primary", "us-west-2").standing().acting
    assert not RoleGate(store, topology, "primary", "us-east-1").standing().acting
    assert RoleGate(store, topology, "dr", "us-east-1").standing().acting


def test_with_sync_stopped_no_region_acts_in_any_role(topology: Topology, store: RoleStore) -> None:
    store.write(RoleAssignment.initial(topology).next("SWITCHOVER exec-1: stop sync", sync_running=False))

    for role, region in (("primary", "us-east-1"), ("dr", "us-west-2")):
        standing = RoleGate(store, topology, role, region).standing()  # type: ignore[arg-type]
        assert not standing.acting and "sync is stopped" in standing.reason


def test_a_standby_loop_starts_within_a_poll_of_the_record_naming_its_region(
    topology: Topology, store: RoleStore
) -> None:
    polls: list[float] = []

    def sleep(seconds: float) -> None:
        polls.append(seconds)
        if len(polls) == 2:
            store.write(RoleAssignment.initial(topology).swapped("FAILOVER exec-1"))

    gate = RoleGate(store, topology, "primary", "us-west-2", poll_s=0.01, sleep=sleep)

    assert gate.wait_to_act(5).acting
    assert len(polls) == 2


def test_a_standby_loop_gives_up_waiting_at_its_budget(topology: Topology, store: RoleStore) -> None:
    gate = RoleGate(store, topology, "primary", "us-west-2", poll_s=0.05)

    started = time.monotonic()
    assert not gate.wait_to_act(0.3).acting
    assert time.monotonic() - started < 3  # bounded by its budget (0.3 s), with room for a loaded machine


def test_working_loops_are_told_to_stop_when_the_record_moves_to_a_new_epoch(
    topology: Topology, store: RoleStore
) -> None:
    gate = RoleGate(store, topology, "primary", "us-east-1", poll_s=0.05)
    standing = gate.standing()

    with gate.watch(standing) as moved:
        assert not moved.wait(0.2)
        store.write(RoleAssignment.initial(topology).next("SWITCHOVER exec-1: stop sync", sync_running=False))
        assert moved.wait(2)


def test_the_roles_still_hold_until_the_record_moves_and_are_read_afresh_each_time(
    topology: Topology, store: RoleStore
) -> None:
    gate = RoleGate(store, topology, "primary", "us-east-1", poll_s=60.0)
    standing = gate.standing()
    assert gate.still_holds(standing)

    store.write(RoleAssignment.initial(topology).next("MOVE exec-1", sync_running=True))

    assert not gate.still_holds(standing)  # no poll interval in between: the read is now


class UnreadableStore(RoleStore):
    def read(self) -> RoleAssignment | None:
        raise BrokerSyncError("throttled")


def test_roles_that_cannot_be_read_do_not_count_as_holding(topology: Topology, control_records: ControlRecords) -> None:
    """The relay drains a queue's advisories as the purge's own only on roles read after they arrived."""
    standing = RoleGate(RoleStore(control_records), topology, "primary", "us-east-1").standing()

    assert not RoleGate(UnreadableStore(control_records), topology, "primary", "us-east-1").still_holds(standing)


class FrozenStore(RoleStore):
    """A role store that counts its reads (a thawed process's first read is slow or stale)."""

    reads = 0

    def read(self) -> RoleAssignment | None:
        self.reads += 1
        return super().read()


def test_a_process_thawed_after_a_freeze_stops_its_work_before_reading_the_record(
    topology: Topology, control_records: ControlRecords
) -> None:
    """A region partitioned and back: the work it froze in must not go on beside the region that took over."""
    store = FrozenStore(control_records)
    readings = iter([1000.0, 1030.0])  # the watcher's first wait spans a 30 s freeze
    gate = RoleGate(store, topology, "primary", "us-east-1", poll_s=60.0, clock=lambda: next(readings))
    standing = gate.standing()
    reads_before = store.reads

    with gate.watch(standing) as moved:
        assert moved.wait(2)

    assert store.reads == reads_before


def test_a_watcher_that_waited_about_its_poll_keeps_the_work_going(topology: Topology, store: RoleStore) -> None:
    gate = RoleGate(store, topology, "primary", "us-east-1", poll_s=0.05, clock=lambda: 1000.0)

    with gate.watch(gate.standing()) as moved:
        assert not moved.wait(0.3)


def test_receipts_are_recorded_only_from_the_broker_playing_primary(topology: Topology, store: RoleStore) -> None:
    gate = RoleGate(store, topology, "primary", "us-east-1")

    assert gate.standing_of(USE1_ARN).acting
    assert not gate.standing_of(USW2_ARN).acting

    store.write(RoleAssignment.initial(topology).swapped("FAILOVER exec-1"))
    assert gate.standing_of(USW2_ARN).acting
    assert not gate.standing_of(USE1_ARN).acting


def test_receipts_of_a_broker_known_by_its_local_id_are_matched_through_the_overrides(
    topology: Topology, store: RoleStore
) -> None:
    gate = RoleGate(store, topology, "primary", None)
    overrides = {"orders-use1": "b-local-1", "orders-usw2": "b-local-2"}

    assert gate.standing_of("arn:aws:mq:us-east-1:123456789012:broker:x:b-local-1", overrides).acting
    assert not gate.standing_of("arn:aws:mq:us-east-1:123456789012:broker:y:b-local-2", overrides).acting


def test_a_loop_whose_role_is_in_the_other_region_does_not_wait(topology: Topology, store: RoleStore) -> None:
    polls: list[float] = []
    gate = RoleGate(store, topology, "dr", "us-east-1", poll_s=0.01, sleep=polls.append)

    standing = gate.wait_to_act(5, while_stopped_only=True)

    assert not standing.acting and standing.sync_running
    assert polls == []


def test_a_loop_waits_while_sync_is_stopped(topology: Topology, store: RoleStore) -> None:
    stopped = store.write(RoleAssignment.initial(topology).next("SWITCHOVER exec-1: stop sync", sync_running=False))
    polls: list[float] = []

    def sleep(seconds: float) -> None:
        polls.append(seconds)
        store.write(stopped.next("SWITCHOVER exec-1: start sync", sync_running=True))

    gate = RoleGate(store, topology, "dr", "us-west-2", poll_s=0.01, sleep=sleep)

    assert gate.wait_to_act(5, while_stopped_only=True).acting
    assert len(polls) == 1
