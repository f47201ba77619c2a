"""The health probe: both risk windows whatever the load, the roles, a stale primary, and silence when blind."""

from __future__ import annotations

from pathlib import Path

import pytest
from ulid import ULID

from brokersync.broker.statistics import BrokerStats, QueueStats, StatisticsSnapshot
from brokersync.exceptions import BrokerUnavailableError
from brokersync.health import (
    BRIDGE_CONNECTED,
    CONFIGURATION_DRIFT,
    DR_BROKER_MEMORY_PERCENT,
    DR_QUEUE_MEMORY_PERCENT,
    DUPLICATE_WINDOW_SECONDS,
    FORWARDING_CONNECTORS,
    LOSS_WINDOW_SECONDS,
    PENDING_PURGE_TOTAL,
    RETURN_BACKLOG_TOTAL,
    STALE_PRIMARY,
    UNSAFE_BROKER_SETTINGS,
    HealthProbe,
    HealthReport,
    emit,
)
from brokersync.ledger import LedgerEntry, memory_ledger
from brokersync.ledger.control import ControlRecords
from brokersync.metrics import RecordingMetrics
from brokersync.render import render_configuration
from brokersync.roles import RoleAssignment, RoleStore
from brokersync.topology import Broker, Queue, Topology, load_topology

NOW = 1_795_340_000.0


class Outflows:
    def __init__(
        self,
        sizes: dict[str, int],
        reachable: bool = True,
        bridges: int = 1,
        memory: dict[str, int] | None = None,
        broker_memory: int = 0,
    ) -> None:
        self.sizes = sizes
        self.reachable = reachable
        self.bridges = bridges
        self.memory = memory or {}
        self.broker_memory = broker_memory

    def queue_stats(self, names: list[str]) -> dict[str, QueueStats]:
        if not self.reachable:
            raise BrokerUnavailableError("no STOMP endpoint of orders-use1 accepted a connection")
        return {
            n: QueueStats(n, self.sizes.get(n, 0), 0, 0, 0, 0, 0, self.bridges, "ID:p", "p", self.memory.get(n, 0))
            for n in names
        }

    def snapshot(self, names: list[str]) -> StatisticsSnapshot:
        return StatisticsSnapshot(self.queue_stats(names), BrokerStats("ID:p", "p", self.broker_memory, 0, 0))


@pytest.fixture
def topology(topology_path: Path) -> Topology:
    return load_topology(topology_path)


def _probe(
    topology: Topology,
    records: ControlRecords,
    outflows: Outflows,
    *,
    region: str | None = "us-west-2",
    documents: dict[str, str] | None = None,
    oldest_ms: int | None = int(NOW * 1000) - 42_000,
) -> tuple[HealthProbe, object]:
    ledger = memory_ledger(clock=lambda: NOW)

    def oldest(_broker: Broker, _queue: Queue) -> int | None:
        return oldest_ms

    probe = HealthProbe(
        RoleStore(records),
        topology,
        ledger,
        lambda _broker: outflows,  # type: ignore[arg-type,return-value]
        oldest,
        region,
        configuration=(documents or {}).__getitem__ if documents is not None else None,
        clock=lambda: NOW,
    )
    return probe, ledger


def test_the_loss_window_is_the_age_of_the_oldest_copy_still_on_the_primary(
    topology: Topology, control_records: ControlRecords
) -> None:
    probe, _ = _probe(topology, control_records, Outflows({"ORDERS.DR": 3}))

    report = probe.probe()

    assert report.queues["ORDERS"].copy_backlog == 3
    assert report.queues["ORDERS"].loss_window_s == 42.0
    assert report.queues["PAYMENTS"].loss_window_s == 0.0


def test_the_duplicate_window_counts_every_pending_key_not_one_read_window(
    topology: Topology, control_records: ControlRecords
) -> None:
    probe, ledger = _probe(topology, control_records, Outflows({}))
    consumed_at = int(NOW * 1000) - 90_000
    entries = [
        LedgerEntry(str(ULID()), consumed_at, f"ID:app-41000-1795340000000-1:1:-1:1:{i + 1}") for i in range(12_000)
    ]
    ledger.record("ORDERS", entries)  # type: ignore[attr-defined]
    metrics = RecordingMetrics()

    report = probe.probe()
    emit(report, metrics)

    assert report.queues["ORDERS"].pending_purge == 12_000
    assert metrics.values[PENDING_PURGE_TOTAL] == [12_000]
    assert metrics.values[DUPLICATE_WINDOW_SECONDS] == [90.0]


def _probe_unreadable_brokers(
    topology: Topology, control_records: ControlRecords
) -> tuple[HealthReport, RecordingMetrics]:
    """The probe's report and metrics when no broker answers."""
    probe, _ = _probe(topology, control_records, Outflows({}, reachable=False))
    metrics = RecordingMetrics()
    report = probe.probe()
    emit(report, metrics)
    return report, metrics


def test_a_primary_that_cannot_be_read_leaves_the_loss_window_out_so_the_alarm_breaches(
    topology: Topology, control_records: ControlRecords
) -> None:
    report, metrics = _probe_unreadable_brokers(topology, control_records)

    assert "lossWindow" in report.unmeasured
    assert LOSS_WINDOW_SECONDS not in metrics.values
    assert DUPLICATE_WINDOW_SECONDS in metrics.values


def test_an_old_primary_back_with_its_primary_configuration_is_reported_stale(
    topology: Topology, control_records: ControlRecords
) -> None:
    RoleStore(control_records).write(RoleAssignment.initial(topology).swapped("FAILOVER exec-1"))
    documents = {"orders-use1": render_configuration(topology, "primary")}
    probe, _ = _probe(topology, control_records, Outflows({}), region="us-east-1", documents=documents)
    metrics = RecordingMetrics()

    report = probe.probe()
    emit(report, metrics)

    assert report.stale_primaries == ["orders-use1"]
    assert metrics.values[STALE_PRIMARY] == [1]


def test_a_dr_broker_running_the_dr_configuration_is_not_stale(
    topology: Topology, control_records: ControlRecords
) -> None:
    documents = {"orders-usw2": render_configuration(topology, "dr")}
    probe, _ = _probe(topology, control_records, Outflows({}), region="us-west-2", documents=documents)

    assert probe.probe().stale_primaries == []


MESH = '<networkConnectors><networkConnector name="mesh" duplex="true" uri="static:(ssl://b:61617)"/>'


def test_a_connector_of_the_customer_s_that_forwards_synced_queues_is_reported_per_broker(
    topology: Topology, control_records: ControlRecords
) -> None:
    """Added to the running broker: a render would have refused it."""
    meshed = render_configuration(topology, "dr").replace("</broker>", f"{MESH}</networkConnectors></broker>")
    probe, _ = _probe(topology, control_records, Outflows({}), documents={"orders-usw2": meshed})
    metrics = RecordingMetrics()

    report = probe.probe()
    emit(report, metrics)

    assert report.forwarding_connectors is not None
    assert report.forwarding_connectors["orders-usw2"]["mesh"][:2] == ["ORDERS", "PAYMENTS"]
    assert metrics.values[FORWARDING_CONNECTORS] == [1]


def test_brokers_running_what_brokersync_rendered_forward_nothing(
    topology: Topology, control_records: ControlRecords
) -> None:
    documents = {"orders-usw2": render_configuration(topology, "dr")}
    probe, _ = _probe(topology, control_records, Outflows({}), documents=documents)
    metrics = RecordingMetrics()

    emit(probe.probe(), metrics)

    assert metrics.values[FORWARDING_CONNECTORS] == [0]


def test_one_probe_reads_each_broker_s_configuration_once(topology: Topology, control_records: ControlRecords) -> None:
    """The stale-primary and the connector checks share one Amazon MQ read per broker."""
    documents = {"orders-usw2": render_configuration(topology, "dr")}
    probe, _ = _probe(topology, control_records, Outflows({}), documents=documents)
    reads: list[str] = []
    probe.configuration = lambda name: reads.append(name) or documents[name]

    report = probe.probe()

    assert reads == ["orders-usw2"]
    assert (report.stale_primaries, report.forwarding_connectors) == ([], {})


def test_an_unreadable_configuration_leaves_the_forwarding_and_drift_figures_out(
    topology: Topology, control_records: ControlRecords
) -> None:
    probe, _ = _probe(topology, control_records, Outflows({}), documents={"orders-usw2": "<not xml"})
    metrics = RecordingMetrics()

    report = probe.probe()
    emit(report, metrics)

    assert "forwardingConnectors" in report.unmeasured
    assert (report.forwarding_connectors, report.configuration_drift) == (None, None)
    assert FORWARDING_CONNECTORS not in metrics.values
    assert CONFIGURATION_DRIFT not in metrics.values


def test_outside_the_dr_region_the_probe_reads_the_ledger_without_writing(
    topology: Topology, control_records: ControlRecords
) -> None:
    probe, ledger = _probe(topology, control_records, Outflows({}), region="us-east-1")
    calls: list[bool] = []
    original = ledger.pending  # type: ignore[attr-defined]

    def spy(queue: str, limit: int = 1000, *, read_only: bool = False) -> list[object]:
        calls.append(read_only)
        return original(queue, limit, read_only=read_only)

    ledger.pending = spy  # type: ignore[attr-defined]
    probe.probe()

    assert calls and all(calls)


@pytest.mark.parametrize(("bridges", "connected"), [(1, 1), (0, 0)])
def test_the_bridge_is_connected_when_every_outflow_on_the_primary_has_a_consumer(
    topology: Topology, control_records: ControlRecords, bridges: int, connected: int
) -> None:
    probe, _ = _probe(topology, control_records, Outflows({}, bridges=bridges))
    metrics = RecordingMetrics()

    emit(probe.probe(), metrics)

    assert metrics.values[BRIDGE_CONNECTED] == [connected]


def test_the_fullest_synced_queues_memory_on_dr_is_emitted_as_the_purges_reach(
    topology: Topology, control_records: ControlRecords
) -> None:
    synced = [q.name for q in topology.queues if q.captures_consumed]
    probe, _ = _probe(topology, control_records, Outflows({}, memory={synced[0]: 12, synced[-1]: 64}))
    metrics = RecordingMetrics()

    report = probe.probe()
    emit(report, metrics)

    assert metrics.values[DR_QUEUE_MEMORY_PERCENT] == [64]
    assert report.queues[synced[-1]].dr_memory_percent == 64


def test_the_dr_brokers_own_memory_is_emitted_because_a_full_broker_stalls_queues_below_their_mark(
    topology: Topology, control_records: ControlRecords
) -> None:
    synced = [q.name for q in topology.queues if q.captures_consumed]
    probe, _ = _probe(topology, control_records, Outflows({}, memory={synced[0]: 47}, broker_memory=100))
    metrics = RecordingMetrics()

    report = probe.probe()
    emit(report, metrics)

    assert metrics.values[DR_QUEUE_MEMORY_PERCENT] == [47]
    assert metrics.values[DR_BROKER_MEMORY_PERCENT] == [100]
    assert report.dr_broker_memory_percent == 100


def test_a_dr_broker_that_cannot_be_read_leaves_its_reach_out_instead_of_reporting_room(
    topology: Topology, control_records: ControlRecords
) -> None:
    report, metrics = _probe_unreadable_brokers(topology, control_records)

    assert "drMemory" in report.unmeasured
    assert DR_QUEUE_MEMORY_PERCENT not in metrics.values
    assert DR_BROKER_MEMORY_PERCENT not in metrics.values


def test_messages_produced_on_dr_to_an_active_active_queue_and_not_yet_copied_back_are_counted(
    control_records: ControlRecords,
) -> None:
    topology = load_topology(Path(__file__).resolve().parents[2] / "examples" / "active-active.yaml")
    returning = topology.copy_name("CARTS", topology.primary)
    probe, _ = _probe(topology, control_records, Outflows({returning: 17}))
    metrics = RecordingMetrics()

    report = probe.probe()
    emit(report, metrics)

    assert report.queues["CARTS"].return_backlog == 17
    assert report.queues["ORDERS"].return_backlog is None
    assert metrics.values[RETURN_BACKLOG_TOTAL] == [17]


def test_a_pair_without_active_active_queues_emits_no_return_backlog(
    topology: Topology, control_records: ControlRecords
) -> None:
    probe, _ = _probe(topology, control_records, Outflows({}))
    metrics = RecordingMetrics()

    emit(probe.probe(), metrics)

    assert RETURN_BACKLOG_TOTAL not in metrics.values


def test_a_broker_running_with_advisories_turned_off_is_reported(
    topology: Topology, control_records: ControlRecords
) -> None:
    """Edited on the running broker, or applied by a failover that went on over it: a render refuses it."""
    quiet = render_configuration(topology, "dr").replace("<broker ", '<broker advisorySupport="false" ', 1)
    probe, _ = _probe(topology, control_records, Outflows({}), documents={"orders-usw2": quiet})
    metrics = RecordingMetrics()

    report = probe.probe()
    emit(report, metrics)

    assert report.unsafe_settings is not None
    assert list(report.unsafe_settings) == ["orders-usw2"]
    assert "advisorySupport" in report.unsafe_settings["orders-usw2"][0]
    assert metrics.values[UNSAFE_BROKER_SETTINGS] == [1]


def test_brokers_running_what_brokersync_rendered_have_advisories_on(
    topology: Topology, control_records: ControlRecords
) -> None:
    probe, _ = _probe(
        topology, control_records, Outflows({}), documents={"orders-usw2": render_configuration(topology, "dr")}
    )
    metrics = RecordingMetrics()

    emit(probe.probe(), metrics)

    assert metrics.values[UNSAFE_BROKER_SETTINGS] == [0]


def _with_queue(topology: Topology, name: str) -> Topology:
    data = topology.model_dump(mode="json")
    data["queues"].append({**data["queues"][0], "name": name})
    return Topology.model_validate(data)


def test_brokers_running_what_apply_config_renders_for_their_role_have_no_drift(
    topology: Topology, control_records: ControlRecords
) -> None:
    probe, _ = _probe(
        topology, control_records, Outflows({}), documents={"orders-usw2": render_configuration(topology, "dr")}
    )
    metrics = RecordingMetrics()

    report = probe.probe()
    emit(report, metrics)

    assert report.configuration_drift == {}
    assert metrics.values[CONFIGURATION_DRIFT] == [0]


def test_a_queue_added_to_the_topology_and_never_applied_is_configuration_drift(
    topology: Topology, control_records: ControlRecords
) -> None:
    """Its copies and its advisories need the broker's configuration: nothing else tells it from a quiet queue."""
    grown = _with_queue(topology, "INVOICES")
    documents = {"orders-use1": render_configuration(topology, "primary")}
    probe, _ = _probe(grown, control_records, Outflows({}), region="us-east-1", documents=documents)
    metrics = RecordingMetrics()

    report = probe.probe()
    emit(report, metrics)

    assert report.configuration_drift is not None
    assert list(report.configuration_drift) == ["orders-use1"]
    assert any("+" in line and 'name="INVOICES"' in line for line in report.configuration_drift["orders-use1"])
    assert metrics.values[CONFIGURATION_DRIFT] == [1]


def test_a_configuration_in_another_layout_is_not_drift(topology: Topology, control_records: ControlRecords) -> None:
    """Amazon MQ may store a revision with other spacing; only what apply-config would change counts."""
    spaced = render_configuration(topology, "dr").replace("><", ">\n\n   <").replace('" ', '"  ')
    probe, _ = _probe(topology, control_records, Outflows({}), documents={"orders-usw2": spaced})

    assert probe.probe().configuration_drift == {}


def test_an_old_primary_back_is_stale_not_drift(topology: Topology, control_records: ControlRecords) -> None:
    RoleStore(control_records).write(RoleAssignment.initial(topology).swapped("FAILOVER exec-1"))
    documents = {"orders-use1": render_configuration(topology, "primary")}
    probe, _ = _probe(topology, control_records, Outflows({}), region="us-east-1", documents=documents)

    report = probe.probe()

    assert (report.stale_primaries, report.configuration_drift) == (["orders-use1"], {})


class WithoutOutflow(Outflows):
    """The primary's counters as a broker reports them when its configuration declares no ``Q.DR`` for one queue."""

    def __init__(self, absent: str) -> None:
        super().__init__({})
        self.absent = absent

    def queue_stats(self, names: list[str]) -> dict[str, QueueStats]:
        return {n: s for n, s in super().queue_stats(names).items() if n != self.absent}


def test_a_queue_without_an_outflow_on_the_primary_is_named_and_the_bridge_alarm_still_fires(
    topology: Topology, control_records: ControlRecords
) -> None:
    """Every outflow is declared by the primary's configuration: one missing is a queue that is not copied."""
    probe, _ = _probe(topology, control_records, WithoutOutflow("PAYMENTS.DR"))
    metrics = RecordingMetrics()

    report = probe.probe()
    emit(report, metrics)

    assert report.missing_outflows == ["PAYMENTS"]
    assert metrics.values[BRIDGE_CONNECTED] == [0]
