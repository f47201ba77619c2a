"""Moving one active-active queue's consumption: it waits for the old side to drain, then flips one record."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from ulid import ULID

from brokersync.broker.statistics import QueueStats
from brokersync.exceptions import BrokerUnavailableError
from brokersync.failover import move as move_module
from brokersync.failover.errors import FailoverRequestError, MoveNotReadyError, TransitionConflictError
from brokersync.failover.move import QueueMove
from brokersync.failover.steps import DRAIN_COUNT_LIMIT, FailoverEnvironment
from brokersync.ledger import memory_ledger
from brokersync.ledger.base import LedgerEntry
from brokersync.ledger.control import ControlRecords
from brokersync.ledger.exceptions import LedgerUnavailableError
from brokersync.metrics import RecordingMetrics
from brokersync.roles import RoleAssignment, RoleStore
from brokersync.topology import CONSUMED_QUEUE, Broker, load_topology
from tests.events import load_event
from tests.fake_clock import FakeClock

ROOT = Path(__file__).resolve().parents[3]
EAST, WEST = "orders-use1", "orders-usw2"


class _Broker:
    """One side's counters, as the statistics plugin reports them."""

    def __init__(self, broker_id: str = "ID:east-1", name: str = EAST) -> None:
        self.consumers = 0
        self.dequeued = 0
        self.broker_id, self.name = broker_id, name

    def queue_stats(self, names: list[str]) -> dict[str, QueueStats]:
        def stats(name: str, consumers: int, dequeued: int) -> QueueStats:
            return QueueStats(name, 0, dequeued, dequeued, dequeued, 0, 0, consumers, self.broker_id, self.name)

        return {"CARTS": stats("CARTS", self.consumers, self.dequeued), CONSUMED_QUEUE: stats(CONSUMED_QUEUE, 1, 0)}


class _Lost:
    def queue_stats(self, names: list[str]) -> dict[str, QueueStats]:
        raise BrokerUnavailableError("no STOMP endpoint of orders-use1 accepted a connection")


class _UnreadableLedger:
    def pending(self, queue: str, limit: int = 1000, *, read_only: bool = False) -> list[Any]:
        raise LedgerUnavailableError("ledger unavailable (connection): timed out")


class _Events:
    def __init__(self) -> None:
        self.sent: list[dict[str, Any]] = []

    def put_events(self, Entries: list[dict[str, Any]]) -> None:  # noqa: N803 (boto3's name)
        self.sent += Entries


class _Sync:
    def __init__(self) -> None:
        self.loops: list[str | None] = []

    def ensure_purge_loop(self, region: str | None) -> dict[str, Any]:
        self.loops.append(region)
        return {"purgeLoopRegion": region}


@pytest.fixture
def old_side() -> _Broker:
    return _Broker()


@pytest.fixture
def new_side() -> _Broker:
    return _Broker("ID:west-1", WEST)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(1_000.0)


@pytest.fixture
def move(control_records: ControlRecords, old_side: _Broker, new_side: _Broker, clock: FakeClock) -> QueueMove:
    topology = load_topology(ROOT / "examples" / "active-active.yaml")

    def statistics(broker: Broker) -> Any:
        return {EAST: old_side, WEST: new_side}[broker.name]

    env = FailoverEnvironment(
        topology=topology,
        roles=RoleStore(control_records),
        transitions=None,  # type: ignore[arg-type]
        brokers=None,  # type: ignore[arg-type]
        sync=_Sync(),  # type: ignore[arg-type]
        s3=None,
        bucket="",
        events=_Events(),
        ledger=memory_ledger(),
        statistics=statistics,
        remover=lambda broker: None,  # type: ignore[arg-type,return-value]
        metrics=RecordingMetrics(),
        clock=clock,
    )
    return QueueMove(env)


def test_a_drained_queue_moves_with_one_role_record_write(move: QueueMove) -> None:
    ctx = move.plan({"queue": "CARTS", "to": WEST})
    assert (ctx.source, ctx.target, ctx.done) == (EAST, WEST, False)
    assert move.status(ctx)["ready"] is True

    result = move.flip(ctx, "exec-1")

    assignment = move.env.roles.assignment(move.env.topology)
    assert result["changed"] and assignment.active == {"CARTS": WEST} and assignment.primary == EAST
    assert assignment.epoch == ctx.epoch + 1 and assignment.sync_running
    # The primary purges CARTS from now on: its region's purge loop must run.
    assert move.env.sync.loops == ["us-east-1"]  # type: ignore[attr-defined]


def test_a_second_flip_changes_nothing(move: QueueMove) -> None:
    ctx = move.plan({"queue": "CARTS", "to": WEST})
    move.flip(ctx, "exec-1")
    assert move.flip(ctx, "exec-1")["changed"] is False


def test_moving_a_queue_where_it_already_is_is_done_at_once(move: QueueMove) -> None:
    assert move.plan({"queue": "CARTS", "to": EAST}).done is True


def test_the_move_waits_while_an_application_consumer_is_left_on_the_old_side(
    move: QueueMove, old_side: _Broker
) -> None:
    old_side.consumers = 2
    status = move.status(move.plan({"queue": "CARTS", "to": WEST}))
    assert (status["ready"], status["consumersOnOldSide"]) == (False, 2)


def test_the_move_waits_for_departures_not_yet_relayed(move: QueueMove, old_side: _Broker) -> None:
    old_side.dequeued = 10
    move.env.ledger.backend.add_audit("CARTS", "ID:east-1", captured=7)  # type: ignore[attr-defined]
    ctx = move.plan({"queue": "CARTS", "to": WEST})
    assert move.status(ctx)["departuresNotRelayed"] == 3
    move.env.ledger.backend.add_audit("CARTS", "ID:east-1", captured=3)  # type: ignore[attr-defined]
    assert move.status(ctx)["ready"] is True


def test_the_move_waits_for_the_new_sides_relay_to_drain_the_purges_removals(
    move: QueueMove, new_side: _Broker
) -> None:
    """A removal advisory still unread at the flip would be judged under the new roles: recorded as
    consumption on the new side, its key would wait on the old side for a copy that is not there."""
    new_side.dequeued = 10
    move.env.ledger.backend.add_audit("CARTS", "ID:west-1", captured=6)  # type: ignore[attr-defined]
    ctx = move.plan({"queue": "CARTS", "to": WEST})
    status = move.status(ctx)
    assert (status["ready"], status["removalsNotRelayedOnNewSide"]) == (False, 4)
    move.env.ledger.backend.add_audit("CARTS", "ID:west-1", captured=4)  # type: ignore[attr-defined]
    assert move.status(ctx)["ready"] is True


def test_an_unreadable_new_side_keeps_the_move_waiting(move: QueueMove) -> None:
    lost = _Lost()
    move.env.statistics = lambda broker: lost if broker.name == WEST else _Broker()  # type: ignore[assignment,misc,return-value]
    status = move.status(move.plan({"queue": "CARTS", "to": WEST}))
    assert status["ready"] is False and status["newSideUnreadable"]


def test_the_move_waits_for_consumed_keys_still_to_be_removed_on_the_new_side(move: QueueMove) -> None:
    move.env.ledger.record("CARTS", [(str(ULID()), 1_795_340_000_000)])
    status = move.status(move.plan({"queue": "CARTS", "to": WEST}))
    assert (status["ready"], status["pendingPurge"]) == (False, 1)


@pytest.mark.parametrize(
    ("side", "figure", "value", "said"),
    [
        ("old", "consumers", 1, "1 application consumer"),
        ("new", "dequeued", 2, f"2 removals of CARTS from {WEST} not yet drained by its relay"),
    ],
    ids=["a consumer left on the old side", "removals the new side's relay has not drained"],
)
def test_past_its_timeout_the_move_fails_saying_what_it_waited_for_and_changes_nothing(
    move: QueueMove,
    old_side: _Broker,
    new_side: _Broker,
    clock: FakeClock,
    side: str,
    figure: str,
    value: int,
    said: str,
) -> None:
    setattr(old_side if side == "old" else new_side, figure, value)
    ctx = move.plan({"queue": "CARTS", "to": WEST, "timeoutSeconds": 30})
    clock.now += 31
    with pytest.raises(MoveNotReadyError, match=said):
        move.status(ctx)
    assert move.env.roles.assignment(move.env.topology).active == {}


def test_a_flip_after_another_transition_wrote_the_record_is_refused(move: QueueMove) -> None:
    ctx = move.plan({"queue": "CARTS", "to": WEST})
    current = move.env.roles.assignment(move.env.topology)
    move.env.roles.write(current.next("SWITCHOVER exec-9"))
    with pytest.raises(TransitionConflictError, match="moved from epoch"):
        move.flip(ctx, "exec-1")


def test_a_queue_a_failover_already_moved_is_not_moved_again(move: QueueMove) -> None:
    ctx = move.plan({"queue": "CARTS", "to": WEST})
    current = move.env.roles.assignment(move.env.topology)
    move.env.roles.write(current.swapped("FAILOVER exec-9"))
    assert move.flip(ctx, "exec-1")["changed"] is False


def test_a_flip_that_finds_a_consumer_back_on_the_old_side_writes_nothing_and_says_so(
    move: QueueMove, old_side: _Broker
) -> None:
    """The state machine then waits for the drain again, up to the move's timeout."""
    ctx = move.plan({"queue": "CARTS", "to": WEST})
    old_side.consumers = 1

    flipped = move.flip(ctx, "exec-1")

    assert (flipped["changed"], flipped["notDrained"], flipped["status"]["consumersOnOldSide"]) == (False, True, 1)
    assert move.env.roles.assignment(move.env.topology).active_side("CARTS") == EAST


def test_a_flip_past_the_timeout_that_finds_the_old_side_not_drained_fails_the_move(
    move: QueueMove, old_side: _Broker, clock: FakeClock
) -> None:
    ctx = move.plan({"queue": "CARTS", "to": WEST, "timeoutSeconds": 30})
    old_side.consumers = 1
    clock.now += 31
    with pytest.raises(MoveNotReadyError, match="application consumer"):
        move.flip(ctx, "exec-1")


@pytest.mark.parametrize(
    ("request_", "why"),
    [
        ({"queue": "ORDERS", "to": WEST}, "only active-active"),
        ({"queue": "NOPE", "to": WEST}, "one of the topology's queues"),
        ({"queues": [], "to": WEST}, "non-empty list"),
        ({"queue": "CARTS", "from": EAST, "to": WEST}, "exactly one of"),
        ({"to": WEST}, "exactly one of"),
        ({"from": "orders-euw1", "to": WEST}, "from must be one of"),
        ({"queue": "CARTS", "to": "orders-euw1"}, "to must be one of"),
        ({"queue": "CARTS", "to": WEST, "timeoutSeconds": 1}, "timeoutSeconds"),
        ({"queue": "CARTS", "to": WEST, "timeoutSeconds": True}, "timeoutSeconds"),
        (["CARTS"], "an object"),
    ],
)
def test_a_request_the_topology_cannot_honour_is_refused_by_name(move: QueueMove, request_: Any, why: str) -> None:
    with pytest.raises(FailoverRequestError, match=why):
        move.plan(request_)


def test_a_planned_context_reads_back_from_the_wire_as_it_was(move: QueueMove) -> None:
    ctx = move.plan({"queue": "CARTS", "to": WEST})
    assert move.context(ctx.to_wire()) == ctx


def test_a_context_for_a_queue_already_where_asked_reads_back_too(move: QueueMove) -> None:
    ctx = move.plan({"queue": "CARTS", "to": EAST})
    assert ctx.done and move.context(ctx.to_wire()) == ctx


@pytest.mark.parametrize(
    ("change", "why"),
    [
        ({"epoch": True}, "epoch: Input should be a valid integer"),
        ({"epoch": "7"}, "epoch: Input should be a valid integer"),
        ({"epoch": -1}, "epoch: Input should be greater than or equal to 0"),
        ({"timeout_s": 1.5}, "timeout_s: Input should be a valid integer"),
        ({"timeout_s": 5}, "timeout_s must be from 10"),
        ({"done": "false"}, "done: Input should be a valid boolean"),
        ({"old_side_lost": 1}, "old_side_lost: Input should be a valid boolean"),
        ({"queues": "CARTS"}, "queues: Input should be a valid list"),
        ({"queues": [7]}, "queues.0: Input should be a valid string"),
        ({"queues": []}, "at least one queue"),
        ({"queues": ["CARTS", "CARTS"]}, "each once"),
        ({"queues": ["ORDERS"]}, "'ORDERS' is not one of the topology's active-active queues"),
        ({"queues": ["NOPE"]}, "'NOPE' is not one of the topology's active-active queues"),
        ({"source": "orders-euw1"}, "source must be one of"),
        ({"target": EAST}, "different source and target"),
        ({"extra": 1}, "extra: Unexpected keyword argument"),
    ],
)
def test_a_forged_context_is_refused_by_field_before_any_step_acts(
    move: QueueMove, change: dict[str, Any], why: str
) -> None:
    wire = {**move.plan({"queue": "CARTS", "to": WEST}).to_wire(), **change}
    with pytest.raises(FailoverRequestError, match=why):
        move.context(wire)


@pytest.mark.parametrize("raw", [None, "ctx", ["CARTS"], 7])
def test_a_context_that_is_not_an_object_is_refused(move: QueueMove, raw: Any) -> None:
    with pytest.raises(FailoverRequestError, match="a move context is a JSON object"):
        move.context(raw)


def test_a_context_missing_a_field_names_it(move: QueueMove) -> None:
    wire = move.plan({"queue": "CARTS", "to": WEST}).to_wire()
    del wire["epoch"]
    with pytest.raises(FailoverRequestError, match="epoch: Field required"):
        move.context(wire)


def test_a_move_is_refused_while_sync_is_stopped(move: QueueMove) -> None:
    current = move.env.roles.assignment(move.env.topology)
    move.env.roles.write(current.next("SWITCHOVER exec-3", sync_running=False))
    with pytest.raises(FailoverRequestError, match="sync is stopped"):
        move.plan({"queue": "CARTS", "to": WEST})


def test_the_completed_move_is_announced_with_its_duration(move: QueueMove, clock: FakeClock) -> None:
    ctx = move.plan({"queue": "CARTS", "to": WEST})
    clock.now += 4
    detail = move.complete(ctx)
    assert detail == {"queues": ["CARTS"], "from": EAST, "to": WEST, "seconds": 4.0}
    assert move.env.events.sent[0]["DetailType"] == "BrokerSync Queue Moved"  # type: ignore[attr-defined]


def test_a_role_assignment_moved_back_is_the_pair_level_roles_again() -> None:
    start = RoleAssignment(primary=EAST, dr=WEST)
    assert start.moved("CARTS", WEST, "a").moved("CARTS", EAST, "b").active == {}


def test_an_unreadable_old_side_is_waited_for_and_the_timeout_names_the_way_out(
    move: QueueMove, clock: FakeClock, new_side: _Broker
) -> None:
    move.env.statistics = lambda broker: _Lost() if broker.name == EAST else new_side  # type: ignore[assignment,misc,return-value]
    ctx = move.plan({"queue": "CARTS", "to": WEST, "timeoutSeconds": 10})
    assert move.status(ctx)["ready"] is False
    clock.now += 11
    with pytest.raises(MoveNotReadyError, match="oldSideLost"):
        move.status(ctx)


class _OnNewSide:
    """The messages on the new side's queues, as a selector browse of it would find them."""

    def __init__(self) -> None:
        self.ids: set[str] = set()
        self.asked: list[tuple[str, str]] = []

    def __call__(self, broker: Broker, queue: Any, message_ids: list[str]) -> set[str]:
        self.asked.append((broker.name, queue.name))
        return self.ids & set(message_ids)


def _consumed_on_the_lost_side(move: QueueMove, count: int) -> list[str]:
    ids = [f"ID:usw2-1-1795340000000-1:1:1:1:{n}" for n in range(1, count + 1)]
    move.env.ledger.record("CARTS", [LedgerEntry(str(ULID()), 1_795_340_000_000, m) for m in ids])
    return ids


@pytest.fixture
def on_new_side() -> _OnNewSide:
    return _OnNewSide()


@pytest.fixture
def lost_move(move: QueueMove, on_new_side: _OnNewSide) -> QueueMove:
    """A move whose old side (orders-use1) cannot be reached, looking on the new side through ``on_new_side``."""
    new_side = _Broker("ID:west-1", WEST)
    move.env.statistics = lambda broker: _Lost() if broker.name == EAST else new_side  # type: ignore[assignment,misc,return-value]
    return QueueMove(move.env, messages_on_broker=on_new_side)


def test_with_the_old_side_lost_the_move_waits_only_for_the_new_sides_purge(
    lost_move: QueueMove, on_new_side: _OnNewSide
) -> None:
    on_new_side.ids = set(_consumed_on_the_lost_side(lost_move, 1))
    ctx = lost_move.plan({"queue": "CARTS", "to": WEST, "oldSideLost": True})
    assert lost_move.status(ctx)["ready"] is False  # what was consumed on the lost side must leave the new side first
    assert on_new_side.asked == [(WEST, "CARTS")]
    lost_move.env.ledger.mark_purged("CARTS", lost_move.env.ledger.pending("CARTS"))
    assert lost_move.status(ctx)["ready"] is True
    assert lost_move.flip(ctx, "exec-1")["changed"] is True
    assert lost_move.env.sync.loops == []  # type: ignore[attr-defined]  # nothing to start in the lost region


def test_with_the_old_side_lost_keys_whose_copies_stayed_in_the_lost_region_do_not_hold_the_move(
    lost_move: QueueMove,
    on_new_side: _OnNewSide,
) -> None:
    """Consumed on the lost side while its copy was still in that broker's outflow: nothing to remove here."""
    on_the_survivor = _consumed_on_the_lost_side(lost_move, 3)[:1]
    on_new_side.ids = set(on_the_survivor)
    ctx = lost_move.plan({"queue": "CARTS", "to": WEST, "oldSideLost": True})

    status = lost_move.status(ctx)
    assert (status["ready"], status["pendingPurge"], status["pendingWithLostSide"]) == (False, 1, 2)

    on_new_side.ids = set()  # the new side's purge removed the one it could
    status = lost_move.status(ctx)
    assert (status["ready"], status["pendingPurge"], status["pendingWithLostSide"]) == (True, 0, 3)


def test_with_the_old_side_lost_newer_keys_behind_a_thousand_stuck_ones_still_hold_the_move(
    lost_move: QueueMove,
    on_new_side: _OnNewSide,
) -> None:
    """The lost side's stuck keys are the oldest pending ones; a copy behind them is still looked for."""
    _consumed_on_the_lost_side(lost_move, DRAIN_COUNT_LIMIT + 200)  # copies still in the lost outflow
    newer = "ID:usw2-1-1795340000000-1:1:1:1:99999"
    lost_move.env.ledger.record("CARTS", [LedgerEntry(str(ULID()), 1_795_340_001_000, newer)])
    on_new_side.ids = {newer}
    ctx = lost_move.plan({"queue": "CARTS", "to": WEST, "oldSideLost": True})

    status = lost_move.status(ctx)

    assert (status["ready"], status["pendingPurge"]) == (False, 1)
    on_new_side.ids = set()  # the new side's purge removed it
    assert lost_move.status(ctx)["ready"] is True


def test_with_the_old_side_lost_a_read_too_full_to_see_past_keeps_the_move_waiting(
    lost_move: QueueMove, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(move_module, "LOST_SIDE_LOOKUP", 3)
    _consumed_on_the_lost_side(lost_move, 3)  # none of them on the new side, and maybe more behind
    ctx = lost_move.plan({"queue": "CARTS", "to": WEST, "oldSideLost": True})

    status = lost_move.status(ctx)

    assert (status["ready"], status["pendingPurge"], status["pendingReadFull"]) == (False, 0, ["CARTS"])


def test_with_the_old_side_lost_a_lookup_out_of_time_keeps_the_move_waiting(
    lost_move: QueueMove, on_new_side: _OnNewSide, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(move_module, "LOST_SIDE_LOOKUP_S", 0.0)
    _consumed_on_the_lost_side(lost_move, DRAIN_COUNT_LIMIT + 1)
    ctx = lost_move.plan({"queue": "CARTS", "to": WEST, "oldSideLost": True})

    status = lost_move.status(ctx)

    assert (status["ready"], status["pendingReadFull"], status["pendingNotLookedUp"]) == (False, [], {"CARTS": 1})
    assert len(on_new_side.asked) == 1  # only the first thousand were looked up


def test_with_the_old_side_lost_the_move_flips_at_its_timeout_and_counts_what_the_purge_left(
    lost_move: QueueMove, on_new_side: _OnNewSide, clock: FakeClock
) -> None:
    """Nothing consumes the queue until the move: a slow purge costs possible duplicates, not the queue."""
    on_new_side.ids = set(_consumed_on_the_lost_side(lost_move, 2))
    ctx = lost_move.plan({"queue": "CARTS", "to": WEST, "oldSideLost": True, "timeoutSeconds": 30})
    assert lost_move.status(ctx)["ready"] is False
    clock.now += 31

    status = lost_move.status(ctx)

    assert (status["ready"], status["movedWithPendingPurge"]) == (True, 2)
    assert lost_move.flip(ctx, "exec-1")["changed"] is True


def test_a_planned_move_still_fails_at_its_timeout_and_changes_nothing(move: QueueMove, clock: FakeClock) -> None:
    _consumed_on_the_lost_side(move, 1)  # pending on the new side: the old side is not drained
    ctx = move.plan({"queue": "CARTS", "to": WEST, "timeoutSeconds": 30})
    clock.now += 31
    with pytest.raises(MoveNotReadyError, match="not yet removed"):
        move.status(ctx)
    assert move.env.roles.assignment(move.env.topology).active_side("CARTS") == EAST


def test_with_the_old_side_lost_a_new_side_that_cannot_be_browsed_is_waited_for(move: QueueMove) -> None:
    move.env.statistics = lambda broker: _Lost()  # type: ignore[assignment,misc,return-value]

    def unreadable(broker: Broker, queue: Any, ids: list[str]) -> set[str]:
        raise BrokerUnavailableError("the browse of orders-usw2 sent nothing for 10 s")

    move = QueueMove(move.env, messages_on_broker=unreadable)
    _consumed_on_the_lost_side(move, 2)
    ctx = move.plan({"queue": "CARTS", "to": WEST, "oldSideLost": True})

    status = move.status(ctx)

    assert (status["ready"], status["pendingPurge"]) == (False, 2)
    assert "sent nothing" in status["newSideUnreadable"]


def test_old_side_lost_must_be_a_boolean(move: QueueMove) -> None:
    with pytest.raises(FailoverRequestError, match="oldSideLost"):
        move.plan({"queue": "CARTS", "to": WEST, "oldSideLost": "yes"})


def test_the_sample_event_is_a_move_the_example_topology_accepts(move: QueueMove) -> None:
    ctx = move.plan(load_event("move-queue"))
    assert (ctx.queues, ctx.target, ctx.timeout_s) == (["CARTS"], WEST, 600)


def test_every_queue_consumed_on_a_lost_broker_moves_back_in_one_execution(move: QueueMove) -> None:
    """A region loss of the broker consuming some queues: one move names the broker, not each queue."""
    there = move.env.roles.assignment(move.env.topology).moved("CARTS", WEST, "MOVE CARTS exec-0")
    move.env.roles.write(there)
    east = _Broker()
    move.env.statistics = lambda broker: _Lost() if broker.name == WEST else east  # type: ignore[assignment,misc,return-value]

    ctx = move.plan({"from": WEST, "to": EAST, "oldSideLost": True})
    assert (ctx.queues, ctx.source, ctx.done) == (["CARTS"], WEST, False)
    move.flip(ctx, "exec-1")

    assert move.env.roles.assignment(move.env.topology).active == {}


def test_a_move_from_a_broker_that_consumes_nothing_on_its_own_is_done_at_once(move: QueueMove) -> None:
    assert move.plan({"from": WEST, "to": EAST}).done is True


def _source_replica(move: QueueMove, replica: Any) -> None:
    """The old side's region (us-east-1) reads as ``replica``; every other region is the function's own."""
    move.env.ledger_in = lambda region: replica if region == "us-east-1" else None


def test_the_move_waits_for_keys_the_old_sides_region_wrote_and_this_region_has_not_yet_received(
    move: QueueMove,
) -> None:
    source = memory_ledger()
    source.record("CARTS", [(str(ULID()), 1_795_340_000_000)])
    _source_replica(move, source)

    status = move.status(move.plan({"queue": "CARTS", "to": WEST}))

    assert (status["ready"], status["pendingPurge"], status["pendingPurgeInSourceRegion"]) == (False, 0, 1)


def test_a_move_timed_out_on_replication_says_so(move: QueueMove, clock: FakeClock) -> None:
    source = memory_ledger()
    source.record("CARTS", [(str(ULID()), 1_795_340_000_000)])
    _source_replica(move, source)
    ctx = move.plan({"queue": "CARTS", "to": WEST, "timeoutSeconds": 30})
    clock.now += 31
    with pytest.raises(MoveNotReadyError, match="replication between the regions is behind"):
        move.status(ctx)


def test_the_move_waits_while_the_old_sides_ledger_replica_cannot_be_read(move: QueueMove) -> None:
    _source_replica(move, _UnreadableLedger())
    status = move.status(move.plan({"queue": "CARTS", "to": WEST}))
    assert status["ready"] is False and "ledger replica" in status["oldSideUnreadable"]
