"""Failover steps: planning, resuming a transition, refusing what cannot be done, and idempotence."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import boto3
import pytest
from ulid import ULID

from brokersync.broker.statistics import QueueStats
from brokersync.exceptions import BrokerSyncError, BrokerUnavailableError
from brokersync.failover.context import TransitionContext
from brokersync.failover.control_plane import BrokerControl
from brokersync.failover.errors import (
    FailoverRequestError,
    PromoteError,
    SwitchoverRefusedError,
    TransitionConflictError,
)
from brokersync.failover.steps import FailoverEnvironment, FailoverSteps, Transition, TransitionStore
from brokersync.failover.sync_control import SyncControl, SyncSwitches
from brokersync.ledger import memory_ledger
from brokersync.ledger.control import ControlRecords
from brokersync.ledger.exceptions import LedgerUnavailableError
from brokersync.metrics import RecordingMetrics
from brokersync.render import render_configuration
from brokersync.roles import RoleStore
from brokersync.topology import Broker, load_topology

BUCKET = "brokersync-config-test"
ROOT = Path(__file__).resolve().parents[3]


class _UnreachableStatistics:
    def queue_stats(self, names: list[str]) -> dict[str, Any]:
        raise BrokerUnavailableError("no STOMP endpoint of orders-use1 accepted a connection")


def _register(mq: Any, topology: Any) -> dict[str, str]:
    ids = {}
    for broker in topology.brokers:
        configuration = mq.create_configuration(Name=broker.name, EngineType="ACTIVEMQ", EngineVersion="5.17.6")
        data = base64.b64encode(render_configuration(topology, broker.role).encode()).decode()
        revision = mq.update_configuration(ConfigurationId=configuration["Id"], Data=data)["LatestRevision"]["Revision"]
        ids[broker.name] = mq.create_broker(
            BrokerName=broker.name, DeploymentMode="SINGLE_INSTANCE", EngineType="ACTIVEMQ",
            EngineVersion="5.17.6", HostInstanceType="mq.m5.large", PubliclyAccessible=False,
            AutoMinorVersionUpgrade=False, Users=[{"Username": "u", "Password": "password-password"}],
            Configuration={"Id": configuration["Id"], "Revision": revision},
        )["BrokerId"]  # fmt: skip
    return ids


@pytest.fixture
def steps(topology_path: Path, control_records: ControlRecords) -> FailoverSteps:
    return _steps(topology_path, control_records)


def _steps(topology_path: Path, control_records: ControlRecords) -> FailoverSteps:
    topology = load_topology(topology_path)
    mq, s3 = boto3.client("mq"), boto3.client("s3")
    s3.create_bucket(Bucket=BUCKET, CreateBucketConfiguration={"LocationConstraint": "us-west-2"})

    def statistics(broker: Broker) -> Any:
        return _UnreachableStatistics()

    environment = FailoverEnvironment(
        topology=topology,
        roles=RoleStore(control_records),
        transitions=TransitionStore(control_records),
        brokers=BrokerControl(mq, _register(mq, topology)),
        sync=SyncControl(SyncSwitches(None, None, None), None, None, None),
        s3=s3,
        bucket=BUCKET,
        events=boto3.client("events"),
        ledger=memory_ledger(),
        statistics=statistics,
        remover=lambda broker: None,  # type: ignore[arg-type,return-value]
    )
    return FailoverSteps(environment)


def test_a_failover_promotes_the_broker_playing_dr_and_records_the_transition(steps: FailoverSteps) -> None:
    ctx = steps.plan({"mode": "FAILOVER"}, "exec-1")

    assert (ctx.source, ctx.target, ctx.mode) == ("orders-use1", "orders-usw2", "FAILOVER")
    transition = steps.env.transitions.read()
    assert transition is not None and transition.status == "in-progress"


def test_a_rerun_resumes_the_transition_even_after_roles_were_swapped(steps: FailoverSteps) -> None:
    first = steps.plan({"mode": "FAILOVER"}, "exec-1")
    steps.swap_roles(first, "exec-1")

    again = steps.plan({"mode": "FAILOVER"}, "exec-2")

    assert (again.source, again.target) == ("orders-use1", "orders-usw2")
    assert again.transition_started_at_ms == first.transition_started_at_ms


def test_a_completed_failover_leaves_nothing_to_do_for_the_same_target(steps: FailoverSteps) -> None:
    ctx = steps.plan({"mode": "FAILOVER"}, "exec-1")
    steps.swap_roles(ctx, "exec-1")
    steps.complete(ctx)

    assert steps.plan({"mode": "FAILOVER", "target": "orders-usw2"}, "exec-2").nothing_to_do is True


def test_a_switchover_is_refused_when_the_old_primary_is_unreachable(steps: FailoverSteps) -> None:
    with pytest.raises(SwitchoverRefusedError, match="Start a FAILOVER instead"):
        steps.plan({"mode": "SWITCHOVER"}, "exec-1")


def test_an_unknown_mode_is_refused_by_name(steps: FailoverSteps) -> None:
    with pytest.raises(FailoverRequestError, match="SWITCHOVER or FAILOVER"):
        steps.plan({"mode": "FAILBACKWARDS"}, "exec-1")


def test_applying_the_same_configuration_twice_creates_one_revision(steps: FailoverSteps) -> None:
    ctx = steps.plan({"mode": "FAILOVER"}, "exec-1")

    first = steps.apply_configuration(ctx, "orders-usw2", "primary")
    second = steps.apply_configuration(ctx, "orders-usw2", "primary")

    assert first["createdRevision"] is True
    assert second["createdRevision"] is False
    assert second["revision"] == first["revision"]


def test_a_failover_goes_on_over_a_connector_that_forwards_synced_queues_and_reports_it(
    steps: FailoverSteps, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Rendering refuses such a connector; one added to the running broker must not stop a failover."""
    ctx = steps.plan({"mode": "FAILOVER"}, "exec-1")
    configuration_id, revision, document = steps.env.brokers.current_document("orders-usw2")
    mesh = '<networkConnectors><networkConnector name="mesh" duplex="true" uri="static:(ssl://b:61617)"/>'
    meshed = document.replace("</broker>", f"{mesh}</networkConnectors></broker>")
    monkeypatch.setattr(steps.env.brokers, "current_document", lambda broker: (configuration_id, revision, meshed))
    steps.env.metrics = metrics = RecordingMetrics()

    applied = steps.apply_configuration(ctx, "orders-usw2", "primary")

    assert applied["createdRevision"] is True
    assert applied["forwardingConnectors"]["mesh"][:3] == ["ORDERS", "PAYMENTS", "ORDERS.DR"]
    assert metrics.total("ConfigurationWarnings") == 1


def test_the_dr_configuration_is_saved_before_it_is_replaced(steps: FailoverSteps) -> None:
    ctx = steps.plan({"mode": "FAILOVER"}, "exec-1")

    saved = steps.save_configuration(ctx, "orders-usw2", "exec-1")

    body = steps.env.s3.get_object(Bucket=BUCKET, Key=saved["key"])["Body"].read().decode()
    assert "forwardOnly" in body and saved["revision"] == 2


def test_swapping_roles_twice_swaps_once(steps: FailoverSteps) -> None:
    ctx = steps.plan({"mode": "FAILOVER"}, "exec-1")

    assert steps.swap_roles(ctx, "exec-1")["changed"] is True
    assert steps.swap_roles(ctx, "exec-1")["changed"] is False
    assert steps.env.roles.current(steps.env.topology).primary.name == "orders-usw2"


def test_a_refused_promote_names_the_broker(steps: FailoverSteps) -> None:
    ctx = steps.plan({"mode": "FAILOVER"}, "exec-1")

    with pytest.raises(PromoteError, match="orders-usw2"):
        steps.promote(ctx)


def test_stopping_sync_is_a_role_record_epoch_both_regions_follow_and_a_rerun_writes_nothing(
    steps: FailoverSteps,
) -> None:
    ctx = steps.plan({"mode": "FAILOVER"}, "exec-1")

    first = steps.stop_sync(ctx, "exec-1")
    again = steps.stop_sync(ctx, "exec-1")

    assert first["epoch"] == again["epoch"] == 1
    assert steps.env.roles.read().sync_running is False  # type: ignore[union-attr]


def test_a_failover_ends_with_sync_running_in_the_swapped_roles(steps: FailoverSteps) -> None:
    ctx = steps.plan({"mode": "FAILOVER"}, "exec-1")
    steps.stop_sync(ctx, "exec-1")
    steps.swap_roles(ctx, "exec-1")
    steps.start_sync(ctx, "exec-1")

    record = steps.env.roles.read()
    assert record is not None and (record.primary, record.sync_running, record.epoch) == ("orders-usw2", True, 3)


def test_two_executions_that_both_found_no_transition_cannot_both_start_one(steps: FailoverSteps) -> None:
    first, second = TransitionStore(steps.env.transitions.records), TransitionStore(steps.env.transitions.records)
    assert first.read() is None and second.read() is None

    first.write(Transition("FAILOVER", "orders-use1", "orders-usw2", "exec-a", 1))

    with pytest.raises(TransitionConflictError, match="exec-a"):
        second.write(Transition("SWITCHOVER", "orders-use1", "orders-usw2", "exec-b", 2))


def test_a_failback_after_a_re_pair_rejoins_the_new_broker_the_topology_names_and_records_it(
    steps: FailoverSteps,
) -> None:
    """The old primary's region is gone for good: its entry in the topology is replaced with a
    broker in a third region, while the role record written by the failover still names it."""
    ctx = steps.plan({"mode": "FAILOVER"}, "exec-1")
    steps.swap_roles(ctx, "exec-1")
    steps.complete(ctx)
    lost = next(b for b in steps.env.topology.brokers if b.name == "orders-use1")
    third = lost.model_copy(update={"name": "orders-euw1", "region": "eu-west-1"})
    steps.env.topology = steps.env.topology.model_copy(
        update={"brokers": [third if b.name == "orders-use1" else b for b in steps.env.topology.brokers]}
    )

    back = steps.plan_failback({}, "exec-2")
    steps.swap_roles(back, "exec-2")

    assert (back.source, back.target) == ("orders-euw1", "orders-usw2")
    record = steps.env.roles.read()
    assert record is not None and (record.primary, record.dr) == ("orders-usw2", "orders-euw1")


def _failed_over(steps: FailoverSteps) -> TransitionContext:
    """A failover run to its end: the transition record is its, done."""
    ctx = steps.plan({"mode": "FAILOVER"}, "exec-1")
    steps.swap_roles(ctx, "exec-1")
    steps.complete(ctx)
    return ctx


def test_a_failback_keeps_when_the_failover_it_follows_started_for_its_head_sweep(steps: FailoverSteps) -> None:
    ctx = _failed_over(steps)

    back = steps.plan_failback({}, "exec-2")

    assert back.source_left_at_ms == ctx.transition_started_at_ms


def test_a_resumed_failback_still_knows_when_the_failover_it_follows_started(steps: FailoverSteps) -> None:
    """Its claim replaced the failover's record and keeps the start: the head sweep reads the same window."""
    ctx = _failed_over(steps)
    steps.plan_failback({}, "exec-2")

    resumed = steps.plan_failback({}, "exec-3")

    assert resumed.source_left_at_ms == ctx.transition_started_at_ms


def test_a_failback_claimed_by_an_older_version_resumes_without_the_window(steps: FailoverSteps) -> None:
    _failed_over(steps)
    steps.plan_failback({}, "exec-2")
    record = steps.env.transitions.records.get("transition")
    assert record is not None
    older = {k: v for k, v in record.document.items() if k != "follows_started_at_ms"}
    steps.env.transitions.records.put("transition", older, record.version, "exec-2")

    assert steps.plan_failback({}, "exec-3").source_left_at_ms is None


def test_a_transition_record_with_a_field_from_a_newer_version_still_reads(steps: FailoverSteps) -> None:
    steps.plan({"mode": "FAILOVER"}, "exec-1")
    record = steps.env.transitions.records.get("transition")
    assert record is not None
    steps.env.transitions.records.put("transition", {**record.document, "newer": 1}, record.version, "exec-1")

    current = steps.env.transitions.read()

    assert current is not None and current.execution == "exec-1" and current.mode == "FAILOVER"


class _DrainedOldPrimary:
    """An old primary with no consumer, no copy in its outflow and no advisory left to relay."""

    def queue_stats(self, names: list[str]) -> dict[str, QueueStats]:
        return {name: QueueStats(name, 0, 0, 0, 0, 0, 0, 0, "ID:use1-1", "orders-use1") for name in names}


def _switchover_waiting_on(steps: FailoverSteps, source_replica: Any) -> dict[str, Any]:
    """The drain of a switchover off orders-use1, run in us-west-2, with us-east-1's replica as given."""
    steps.env.statistics = lambda broker: _DrainedOldPrimary()  # type: ignore[assignment,return-value]
    steps.env.ledger_in = lambda region: source_replica if region == "us-east-1" else None
    return steps.drain_status(steps.plan({"mode": "SWITCHOVER"}, "exec-1"))


def test_a_switchover_waits_for_keys_the_old_primarys_region_relayed_and_this_region_has_not_yet_received(
    steps: FailoverSteps,
) -> None:
    source = memory_ledger()
    source.record("ORDERS", [(str(ULID()), 1_795_340_000_000)])

    drain = _switchover_waiting_on(steps, source)

    assert (drain["drained"], drain["pendingPurge"]["ORDERS"], drain["pendingPurgeInSourceRegion"]["ORDERS"]) == (
        False,
        0,
        1,
    )


def test_a_switchover_is_drained_once_the_purge_mark_has_replicated_back_to_the_old_primarys_region(
    steps: FailoverSteps,
) -> None:
    source = memory_ledger()
    source.record("ORDERS", [(str(ULID()), 1_795_340_000_000)])
    source.mark_purged("ORDERS", source.pending("ORDERS"))

    assert _switchover_waiting_on(steps, source)["drained"] is True


def test_a_switchover_waits_while_the_old_primarys_ledger_replica_cannot_be_read(steps: FailoverSteps) -> None:
    drain = _switchover_waiting_on(steps, _UnreadableLedger())
    assert drain["drained"] is False and "timed out" in drain["sourceRegionLedgerUnreadable"]


def test_a_pair_in_one_region_drains_on_its_own_replica_alone(steps: FailoverSteps) -> None:
    drain = _switchover_waiting_on(steps, None)
    assert drain["drained"] is True and "pendingPurgeInSourceRegion" not in drain


def test_a_pair_without_active_active_queues_does_not_read_its_new_primary_in_a_drain(steps: FailoverSteps) -> None:
    """Its DR broker runs no relay: the purge's removals there raise advisories nothing reads or counts."""
    drain = _switchover_waiting_on(steps, None)
    assert "departuresNotRelayedOnNewPrimary" not in drain


class _Counters:
    """A broker's counters for one queue, with nothing else waiting on it."""

    def __init__(self, broker_id: str, queue: str, dequeued: int) -> None:
        self.broker_id, self.queue, self.dequeued = broker_id, queue, dequeued

    def queue_stats(self, names: list[str]) -> dict[str, QueueStats]:
        def stats(name: str, dequeued: int) -> QueueStats:
            return QueueStats(name, 0, dequeued, dequeued, dequeued, 0, 0, 0, self.broker_id, "")

        return {name: stats(name, self.dequeued if name == self.queue else 0) for name in names}


@pytest.fixture
def active_active(control_records: ControlRecords) -> FailoverSteps:
    """A pair with an active-active queue, CARTS, consumed on the primary and purged on DR."""
    return _steps(ROOT / "examples" / "active-active.yaml", control_records)


def _active_active_switchover(
    steps: FailoverSteps, new_primary: Any, *, relayed: int = 0, sync_running: bool = True
) -> dict[str, Any]:
    """The drain of a switchover to orders-usw2, whose relay has counted ``relayed`` departures of CARTS."""
    steps.env.statistics = lambda broker: (  # type: ignore[assignment]
        new_primary if broker.name == "orders-usw2" else _DrainedOldPrimary()
    )
    steps.env.ledger_in = lambda region: None
    steps.env.ledger.backend.add_audit("CARTS", "ID:usw2-1", captured=relayed)  # type: ignore[attr-defined]
    ctx = steps.plan({"mode": "SWITCHOVER"}, "exec-1")
    if not sync_running:
        steps.stop_sync(ctx, "exec-1")
    return steps.drain_status(ctx)


def test_a_switchover_waits_for_the_new_primarys_relay_to_read_the_purges_removals_there(
    active_active: FailoverSteps,
) -> None:
    """Its reboot empties BROKERSYNC.CONSUMED: an unread removal would be reported as a lost advisory."""
    drain = _active_active_switchover(active_active, _Counters("ID:usw2-1", "CARTS", 5), relayed=3)

    assert drain["drained"] is False
    assert drain["departuresNotRelayedOnNewPrimary"] == {"CARTS": 2}


def test_a_switchover_is_drained_once_the_new_primarys_relay_has_read_every_departure(
    active_active: FailoverSteps,
) -> None:
    drain = _active_active_switchover(active_active, _Counters("ID:usw2-1", "CARTS", 5), relayed=5)

    assert drain["drained"] is True
    assert (drain["departuresNotRelayedOnNewPrimary"], drain["newPrimaryUnreadable"]) == ({"CARTS": 0}, None)


def test_a_switchover_waits_while_its_new_primary_cannot_be_read(active_active: FailoverSteps) -> None:
    drain = _active_active_switchover(active_active, _UnreachableStatistics())

    assert drain["drained"] is False and "accepted a connection" in drain["newPrimaryUnreadable"]


def test_a_new_primary_whose_connector_cannot_be_made_is_waited_on_not_a_crash(active_active: FailoverSteps) -> None:
    def no_connector(broker: Broker) -> Any:
        if broker.name == "orders-usw2":
            raise BrokerSyncError("secret brokersync/orders-usw2 cannot be read: AccessDenied")
        return _DrainedOldPrimary()

    active_active.env.statistics = no_connector  # type: ignore[assignment]
    active_active.env.ledger_in = lambda region: None
    drain = active_active.drain_status(active_active.plan({"mode": "SWITCHOVER"}, "exec-1"))

    assert drain["drained"] is False and "AccessDenied" in drain["newPrimaryUnreadable"]


def test_a_rerun_after_sync_stopped_does_not_wait_for_a_relay_that_no_longer_runs(
    active_active: FailoverSteps,
) -> None:
    """What was left unread then cannot be brought back by waiting; the audit reports it lost."""
    drain = _active_active_switchover(active_active, _Counters("ID:usw2-1", "CARTS", 5), sync_running=False)

    assert drain["drained"] is True and "departuresNotRelayedOnNewPrimary" not in drain


def test_only_the_queues_the_new_primarys_relay_reads_are_waited_on(active_active: FailoverSteps) -> None:
    """ORDERS and PAYMENTS are only purged there: their removals' advisories are not captured at all."""
    drain = _active_active_switchover(active_active, _Counters("ID:usw2-1", "ORDERS", 9))

    assert drain["drained"] is True and drain["departuresNotRelayedOnNewPrimary"] == {"CARTS": 0}


class _UnreadableLedger:
    def pending(self, queue: str, limit: int = 1000, *, read_only: bool = False) -> list[Any]:
        raise LedgerUnavailableError("ledger unavailable (connection): timed out")


def test_a_failover_goes_on_over_advisories_turned_off_and_reports_it(
    steps: FailoverSteps, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Rendering refuses such a base; a revision someone edited on the running broker must not stop a failover."""
    ctx = steps.plan({"mode": "FAILOVER"}, "exec-1")
    configuration_id, revision, document = steps.env.brokers.current_document("orders-usw2")
    quiet = document.replace("<broker ", '<broker advisorySupport="false" ', 1)
    monkeypatch.setattr(steps.env.brokers, "current_document", lambda broker: (configuration_id, revision, quiet))
    steps.env.metrics = metrics = RecordingMetrics()

    applied = steps.apply_configuration(ctx, "orders-usw2", "primary")

    [reason] = applied["unsafeSettings"]
    assert "advisorySupport" in reason and applied["forwardingConnectors"] == {}
    assert metrics.total("ConfigurationWarnings") == 1


def test_a_failover_over_a_usual_revision_reports_no_warning(steps: FailoverSteps) -> None:
    ctx = steps.plan({"mode": "FAILOVER"}, "exec-1")
    steps.env.metrics = metrics = RecordingMetrics()

    applied = steps.apply_configuration(ctx, "orders-usw2", "primary")

    assert (applied["unsafeSettings"], applied["forwardingConnectors"]) == ([], {})
    assert metrics.total("ConfigurationWarnings") == 0
