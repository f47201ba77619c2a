"""The health probe: both risk windows, the roles and a stale primary, measured every minute whatever the load.

The purge reports depths only in rounds that removed nothing, so under load (or with the DR
region lost) the alarms had no data. The probe is scheduled in each region and measures
from scratch each time:

* the **loss window** (what a failover now would lose): per copied queue, the copies waiting
  in the primary's outflow and the age of the oldest, browsed without side effects
  (CRDR calls the same figure ReplicationLag);
* the **duplicate window** (what a failover now would duplicate): per synced queue, the whole
  pending purge up to a cap and the age of the oldest pending key, read from the ledger
  without writing to it;
* the roles and their epoch as this region reads them, and whether sync runs;
* whether the purge loop runs where it must (in the region holding the DR role);
* whether the bridge is connected: every outflow on the primary has a consumer (the network
  connector), read from the broker whichever region it is in, so the alarm follows the roles;
* a **stale primary**: a broker in this region that the role record calls DR while its
  current configuration still copies to the peer (an old primary back from an outage);
* **forwarding connectors**: a network connector of the customer's in the current
  configuration of a broker in this region that may forward a synced queue, a copy queue or
  BrokerSync's own (added to the running broker: ``brokersync render`` refuses one), whose
  forwarded messages would count as consumed;
* **configuration drift**: a broker in this region whose current configuration is not what
  ``brokersync apply-config`` would make of it for the role the record gives it (a queue added
  to the topology and never applied, or applied and never rebooted onto, is neither copied nor
  captured, and the other checks cannot tell that from a quiet queue);
* the **DR queues' reach**: how full each synced queue's memory limit is on the DR broker.
  ActiveMQ stops paging a queue in at 70 % of it, and copies behind that point are
  invisible to the purge's selectors, so a backlog that fills it stalls the purge; the alarm
  warns before (``tuning.dr.memory_limit_mb``);
* the **DR broker's memory**: each queue's limit is a share of the broker's, and every queue
  stops paging in when the broker's is full, however far below its own mark it is. A deep
  backlog on a DR broker whose memory (instance size) is smaller than the sum of its queues'
  limits stalls the purge this way, with the queue alarm silent.

A figure the probe cannot measure is left out, not sent as zero, so an alarm that treats
missing data as breaching fires: silence means broken.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from brokersync.broker.statistics import StatisticsClient
from brokersync.exceptions import BrokerSyncError
from brokersync.ledger.base import LedgerStore
from brokersync.metrics import MetricsSink
from brokersync.render.connectors import forwarding_connectors
from brokersync.render.document import parse_configuration
from brokersync.render.inspect import configuration_drift, runs_primary_configuration
from brokersync.render.safety import unsafe_settings
from brokersync.roles import RoleStore, apply_roles, roles_here
from brokersync.topology import Broker, Queue, Topology

logger = logging.getLogger(__name__)

#: Metric names the probe emits; the template's alarms are tested against these.
LOSS_WINDOW_SECONDS = "LossWindowSeconds"
COPY_BACKLOG_TOTAL = "CopyBacklogTotal"
DUPLICATE_WINDOW_SECONDS = "DuplicateWindowSeconds"
PENDING_PURGE_TOTAL = "PendingPurgeTotal"
ROLE_EPOCH = "RoleEpoch"
SYNC_RUNNING = "SyncRunning"
STALE_PRIMARY = "StalePrimary"
BRIDGE_CONNECTED = "BridgeConnected"
#: 1 unless this region holds the DR role and no purge loop execution runs here.
PURGE_LOOP_HEALTHY = "PurgeLoopHealthy"
#: The fullest synced queue's memory on the DR broker, in percent of its limit.
DR_QUEUE_MEMORY_PERCENT = "DrQueueMemoryPercent"
#: The DR broker's own memory, in percent of its limit (ActiveMQ.Statistics.Broker).
DR_BROKER_MEMORY_PERCENT = "DrBrokerMemoryPercent"
#: Messages produced on the DR broker to active-active queues, not yet copied to the primary.
RETURN_BACKLOG_TOTAL = "ReturnCopyBacklog"
#: Customer network connectors, on the brokers of this region, that may forward what BrokerSync counts on.
FORWARDING_CONNECTORS = "ForwardingConnectors"
#: Brokers of this region whose configuration holds a setting brokersync.render.safety refuses.
UNSAFE_BROKER_SETTINGS = "UnsafeBrokerSettings"
#: Brokers of this region whose current configuration is behind the topology for their role.
CONFIGURATION_DRIFT = "ConfigurationDrift"
#: Where the alarm on it fires: below the high-water mark, before the purge stalls.
DR_QUEUE_MEMORY_ALARM_PERCENT = 60
#: Where the alarm on the broker's memory fires, before it is full.
DR_BROKER_MEMORY_ALARM_PERCENT = 85
#: Pending keys counted at most (a bounded read); ``pending_capped`` says the count reached it.
PENDING_CAP = 100_000


@dataclass
class QueueHealth:
    queue: str
    copy_backlog: int | None = None
    loss_window_s: float | None = None
    pending_purge: int | None = None
    pending_capped: bool = False
    duplicate_window_s: float | None = None
    #: Percent of the queue's memory limit in use on the DR broker (synced queues; None: unmeasured).
    dr_memory_percent: int | None = None
    #: Active-active queues only: messages produced on the DR broker still waiting to be copied
    #: to the primary, where the queue is consumed (None: not active-active, or unmeasured).
    return_backlog: int | None = None


@dataclass
class HealthReport:
    region: str | None
    epoch: int
    primary: str
    dr: str
    sync_running: bool
    roles_here: list[str]
    queues: dict[str, QueueHealth] = field(default_factory=dict)
    #: Every outflow on the primary has a consumer: the bridge to DR is connected (None: unmeasured).
    bridge_connected: bool | None = None
    #: Queues whose outflow the primary does not have at all: its configuration (which declares
    #: every outflow) does not copy them, so they are not copied, bridge or no bridge.
    missing_outflows: list[str] = field(default_factory=list)
    #: This region holds the DR role and its purge loop runs (None: not DR here, or not measured).
    purge_loop_running: bool | None = None
    #: The DR broker's own memory in percent of its limit; full stalls every queue (None: unmeasured).
    dr_broker_memory_percent: int | None = None
    #: Brokers in this region the record calls DR that run the primary configuration.
    stale_primaries: list[str] = field(default_factory=list)
    #: Per broker of this region, its customer network connectors that may forward kept queues,
    #: with those queues (None: configurations not read).
    forwarding_connectors: dict[str, dict[str, list[str]]] | None = None
    #: Per broker of this region, the settings of its configuration under which capture records
    #: what was not consumed, or nothing (brokersync.render.safety; None: configurations not read).
    unsafe_settings: dict[str, list[str]] | None = None
    #: Per broker of this region whose current configuration is not what ``apply-config`` would
    #: make of it for its role: the lines that would change (None: configurations not read).
    #: A stale primary is reported as such, not here.
    configuration_drift: dict[str, list[str]] | None = None
    #: What could not be measured, and why.
    unmeasured: dict[str, str] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


class HealthProbe:
    def __init__(
        self,
        roles: RoleStore,
        topology: Topology,
        ledger: LedgerStore,
        statistics: Callable[[Broker], StatisticsClient],
        oldest_timestamp_ms: Callable[[Broker, Queue], int | None],
        region: str | None,
        *,
        configuration: Callable[[str], str] | None = None,
        purge_loop_running: Callable[[], bool] | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.roles = roles
        self.topology = topology
        self.ledger = ledger
        self.statistics = statistics
        self.oldest_timestamp_ms = oldest_timestamp_ms
        self.region = region
        self.configuration = configuration
        self.purge_loop_running = purge_loop_running
        self.clock = clock

    def probe(self) -> HealthReport:
        assignment = self.roles.assignment(self.topology)
        now = apply_roles(self.topology, assignment)
        report = HealthReport(
            region=self.region,
            epoch=assignment.epoch,
            primary=now.primary.name,
            dr=now.dr.name,
            sync_running=assignment.sync_running,
            roles_here=sorted(roles_here(now, self.region)),
            queues={q.name: QueueHealth(q.name) for q in now.queues},
        )
        self._loss_window(now, report)
        self._duplicate_window(now, report)
        if self.configuration is not None:
            # Both checks read a broker's current configuration: one request per broker per probe.
            read = functools.cache(self.configuration)
            self._stale_primary(now, report, read)
            self._configurations(now, report, read)
        self._purge_loop(now, report)
        self._dr_queues(now, report)
        return report

    def _dr_queues(self, topology: Topology, report: HealthReport) -> None:
        """From one read of the DR broker's counters: the synced queues' memory, the broker's, what waits to return.

        The memories are the purge's reach (DR_QUEUE_MEMORY_PERCENT, DR_BROKER_MEMORY_PERCENT);
        the return backlog is what was produced on DR to an active-active queue and not yet
        copied to the primary.
        """
        synced = [q.name for q in topology.captured_queues]
        returning = {topology.copy_name(q, topology.primary): q.name for q in topology.queues if q.copies_both_ways}
        if not synced and not returning:
            return
        try:
            snapshot = self.statistics(topology.dr).snapshot([*synced, *returning])
        except BrokerSyncError as e:
            for key, wanted in (("drMemory", synced), ("returnBacklog", returning)):
                if wanted:
                    report.unmeasured[key] = f"DR {topology.dr.name}: {e}"
            return
        stats = snapshot.queues
        if synced:
            report.dr_broker_memory_percent = snapshot.broker.memory_percent
        for name in synced:
            report.queues[name].dr_memory_percent = stats[name].memory_percent if name in stats else 0
        for outflow, name in returning.items():
            report.queues[name].return_backlog = stats[outflow].size if outflow in stats else 0

    def _purge_loop(self, topology: Topology, report: HealthReport) -> None:
        if self.purge_loop_running is None or "dr" not in roles_here(topology, self.region):
            return
        try:
            report.purge_loop_running = self.purge_loop_running()
        except (BrokerSyncError, BotoCoreError, ClientError) as e:
            report.unmeasured["purgeLoop"] = str(e)

    def _loss_window(self, topology: Topology, report: HealthReport) -> None:
        outflows = {topology.dr_name(q): q for q in topology.queues}
        try:
            stats = self.statistics(topology.primary).queue_stats(list(outflows))
            report.bridge_connected = all(o in stats and stats[o].consumer_count > 0 for o in outflows)
            report.missing_outflows = [q.name for o, q in outflows.items() if o not in stats]
            now_ms = int(self.clock() * 1000)
            for outflow, queue in outflows.items():
                health = report.queues[queue.name]
                size = stats[outflow].size if outflow in stats else 0
                health.copy_backlog = size
                if size == 0:
                    health.loss_window_s = 0.0
                    continue
                oldest = self.oldest_timestamp_ms(topology.primary, queue.model_copy(update={"name": outflow}))
                health.loss_window_s = max(0.0, (now_ms - oldest) / 1000) if oldest else 0.0
        except BrokerSyncError as e:
            report.unmeasured["lossWindow"] = f"primary {topology.primary.name}: {e}"

    def _duplicate_window(self, topology: Topology, report: HealthReport) -> None:
        # Outside the DR region a read must not tidy the ledger (a marks write there would race
        # the purge's across regions), hence read_only.
        read_only = "dr" not in roles_here(topology, self.region)
        now_ms = int(self.clock() * 1000)
        for queue in topology.captured_queues:
            try:
                pending = self.ledger.pending(queue.name, limit=PENDING_CAP, read_only=read_only)
            except BrokerSyncError as e:
                report.unmeasured[f"duplicateWindow:{queue.name}"] = str(e)
                continue
            health = report.queues[queue.name]
            health.pending_purge = len(pending)
            health.pending_capped = len(pending) >= PENDING_CAP
            oldest = min((p.consumed_at_ms for p in pending), default=None)
            health.duplicate_window_s = max(0.0, (now_ms - oldest) / 1000) if oldest is not None else 0.0

    def _here(self, broker: Broker) -> bool:
        """Whether ``broker`` is this region's to look at (each region reads its own brokers)."""
        return not (broker.region and self.region and broker.region != self.region)

    def _stale_primary(self, topology: Topology, report: HealthReport, read: Callable[[str], str]) -> None:
        dr = topology.dr
        if not self._here(dr):
            return
        try:
            if runs_primary_configuration(read(dr.name)):
                report.stale_primaries.append(dr.name)
        except (BrokerSyncError, KeyError, BotoCoreError, ClientError) as e:
            report.unmeasured["stalePrimary"] = f"{dr.name}: {e}"

    def _configurations(self, topology: Topology, report: HealthReport, read: Callable[[str], str]) -> None:
        """In the configurations this region's brokers run: what a render refuses, what apply-config would change."""
        found: dict[str, dict[str, list[str]]] = {}
        unsafe: dict[str, list[str]] = {}
        drift: dict[str, list[str]] = {}
        for broker in filter(self._here, topology.brokers):
            try:
                document = read(broker.name)
                root = parse_configuration(document)
                forwarding = forwarding_connectors(root, topology)
            except (BrokerSyncError, KeyError, BotoCoreError, ClientError) as e:
                report.unmeasured["forwardingConnectors"] = f"{broker.name}: {e}"
                return
            if broker.name not in report.stale_primaries:
                role = "primary" if broker.name == topology.primary.name else "dr"
                try:
                    changes = configuration_drift(document, topology, role)
                except BrokerSyncError as e:
                    report.unmeasured["configurationDrift"] = f"{broker.name}: {e}"
                    changes = []
                if changes:
                    logger.warning("%s runs a configuration behind the topology for %s: %s", broker.name, role, changes)
                    drift[broker.name] = changes
            if forwarding:
                found[broker.name] = forwarding
            reasons = unsafe_settings(root, topology)
            for reason in reasons:
                logger.warning("%s: %s", broker.name, reason)
            if reasons:
                unsafe[broker.name] = reasons
        report.forwarding_connectors = found
        report.unsafe_settings = unsafe
        if "configurationDrift" not in report.unmeasured:
            report.configuration_drift = drift


def emit(report: HealthReport, metrics: MetricsSink) -> None:
    """The pair's figures as metrics; what was not measured is left out (alarms read it as breaching)."""
    metrics.add_metric(ROLE_EPOCH, "Count", report.epoch)
    metrics.add_metric(SYNC_RUNNING, "Count", 1 if report.sync_running else 0)
    metrics.add_metric(STALE_PRIMARY, "Count", len(report.stale_primaries))
    if report.forwarding_connectors is not None:
        forwarding = sum(len(connectors) for connectors in report.forwarding_connectors.values())
        metrics.add_metric(FORWARDING_CONNECTORS, "Count", forwarding)
    if report.unsafe_settings is not None:
        metrics.add_metric(UNSAFE_BROKER_SETTINGS, "Count", len(report.unsafe_settings))
    if report.configuration_drift is not None:
        metrics.add_metric(CONFIGURATION_DRIFT, "Count", len(report.configuration_drift))
    if "purgeLoop" not in report.unmeasured:
        metrics.add_metric(PURGE_LOOP_HEALTHY, "Count", 0 if report.purge_loop_running is False else 1)
    if report.bridge_connected is not None:
        metrics.add_metric(BRIDGE_CONNECTED, "Count", 1 if report.bridge_connected else 0)
    if "lossWindow" not in report.unmeasured:
        metrics.add_metric(COPY_BACKLOG_TOTAL, "Count", sum(q.copy_backlog or 0 for q in report.queues.values()))
        metrics.add_metric(
            LOSS_WINDOW_SECONDS, "Seconds", max((q.loss_window_s or 0.0) for q in report.queues.values())
        )
    synced = [q for q in report.queues.values() if q.pending_purge is not None]
    if synced and not any(k.startswith("duplicateWindow") for k in report.unmeasured):
        metrics.add_metric(PENDING_PURGE_TOTAL, "Count", sum(q.pending_purge or 0 for q in synced))
        metrics.add_metric(DUPLICATE_WINDOW_SECONDS, "Seconds", max((q.duplicate_window_s or 0.0) for q in synced))
    returning = [q.return_backlog for q in report.queues.values() if q.return_backlog is not None]
    if returning:
        metrics.add_metric(RETURN_BACKLOG_TOTAL, "Count", sum(returning))
    reach = [q.dr_memory_percent for q in report.queues.values() if q.dr_memory_percent is not None]
    if reach:
        metrics.add_metric(DR_QUEUE_MEMORY_PERCENT, "Percent", max(reach))
    if report.dr_broker_memory_percent is not None:
        metrics.add_metric(DR_BROKER_MEMORY_PERCENT, "Percent", report.dr_broker_memory_percent)
