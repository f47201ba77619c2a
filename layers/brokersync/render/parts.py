"""What each role needs in its broker configuration, derived from the topology.

Primary role, per queue Q (dr name Q.DR):
* destinations Q and Q.DR (and BROKERSYNC.CONSUMED / RECEIPTS / PARKED);
* composite queue Q (forwardOnly=false) that also forwards into Q.DR: the copy;
* for sync queues only, a composite topic named after each of Q's departure advisory topics
  (consumed, expired, moved to a DLQ) that forwards into BROKERSYNC.CONSUMED, and
  ``advisoryForConsumed`` on Q's policy. Named per queue: a wildcard would also catch the
  bridge's own consumption of Q.DR;
* network connector(s) to the DR broker that statically include every Q.DR.

DR role, per queue Q: destination Q; composite queue Q.DR (forwardOnly=true) into Q, so the
bridged copy lands in Q; a policy that pages enough of Q into memory for selector
consumers to find deep messages (the purge) and lets a browser see the whole queue; and,
unless the topology asks for ``always``, a periodic journal sync (see DrTuning).

Both roles load ``statisticsBrokerPlugin``: queue counters over STOMP are the only
counters Amazon MQ lets us read.

Active-active queues (produced to on either broker) are copied both ways, so both roles
render the same copy path for them, each towards the other broker: the composite queue Q
forwards into ``Q<suffix>.<peer>`` only what was produced to Q on this broker (a selector on
``JMSDestination``, which ActiveMQ evaluates against the original destination a composite
forward records), a composite queue ``Q<suffix>.<this broker>`` forwards the peer's copies
into Q, and this broker's network connector to its peer includes ``Q<suffix>.<peer>``.
Without that selector each copy would be forwarded back towards its origin, where the
bridge refuses a message that has already crossed it and the copy waits in the outflow for
ever (measured; decision 0010). Either broker may consume an active-active queue (the role
record's per-queue active side, :mod:`brokersync.sides`), so both roles render its capture
and the purge's paging policy: moving a queue's active side is a role record write, with no
configuration change and no reboot.

CRDR pairs are replicated by Amazon MQ itself, so neither role renders the copy path (no
composite queue, no connector); the capture and the policies are still rendered, because
the ledger is what measures duplicates and drives the drill.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from lxml import etree

from brokersync.render.document import element
from brokersync.topology import (
    ACTIVEMQ_MAX_RECONNECT_DELAY_MS,
    CONNECTOR_PREFIX,
    CONSUMED_QUEUE,
    DEPARTURE_ADVISORY_PREFIXES,
    PARKED_QUEUE,
    RECEIPTS_QUEUE,
    BridgeTuning,
    Broker,
    Queue,
    Role,
    Topology,
)

#: A queue that never exists: the bridge's only dynamically included destination, so that
#: nothing but the static includes is bridged even if staticBridge were sanitized away.
NOTHING_DYNAMIC = "BROKERSYNC.NOTHING"
STATISTICS_PLUGIN = "statisticsBrokerPlugin"


@dataclass
class RoleParts:
    """Everything one role contributes to a configuration, before merging."""

    destinations: list[str] = field(default_factory=list)
    composites: list[etree._Element] = field(default_factory=list)
    policies: dict[str, list[tuple[str, str]]] = field(default_factory=dict)
    connectors: list[etree._Element] = field(default_factory=list)
    journal: list[tuple[str, str]] = field(default_factory=list)
    plugins: list[str] = field(default_factory=lambda: [STATISTICS_PLUGIN])
    #: Whether the peer's bridge may write this broker's ``Q.DR`` queues (the DR role only): a
    #: primary refuses copies, so two brokers that both run the primary role (an old primary
    #: back from a lost region before its failback) cannot bounce copies between them.
    accepts_copies: bool = False


def _forward(name: str, forward_only: bool, targets: list[tuple[str, str]]) -> etree._Element:
    kind = "compositeTopic" if name.startswith(DEPARTURE_ADVISORY_PREFIXES) else "compositeQueue"
    forward_to = element("forwardTo", children=[element(t, [("physicalName", n)]) for t, n in targets])
    return element(kind, [("name", name), ("forwardOnly", str(forward_only).lower())], [forward_to])


def produced_here(queue: str) -> str:
    """The selector that matches what was produced to ``queue`` on this broker, not a copy from the peer.

    A copy reaches ``queue`` through the inflow composite, and a composite forward records where
    the message was sent (``originalDestination``); ActiveMQ's ``JMSDestination`` in a selector
    is that original destination when there is one. So a message sent straight to ``queue`` is
    ``queue://<queue>`` and a copy is ``queue://<queue><suffix>.<this broker>``.
    """
    return f"JMSDestination = 'queue://{queue}'"


def _forward_produced_here(queue: str, outflow: str) -> etree._Element:
    """Composite ``queue`` that also forwards what its own producers sent, not the peer's copies, into ``outflow``."""
    filtered = element("filteredDestination", [("selector", produced_here(queue)), ("queue", outflow)])
    forward_to = element("forwardTo", children=[filtered])
    return element("compositeQueue", [("name", queue), ("forwardOnly", "false")], [forward_to])


def _both_ways(topology: Topology, me: Broker, parts: RoleParts) -> None:
    """The copy path of every active-active queue on broker ``me``: its outflow to the peer, its inflow into Q."""
    peer = topology.peer(me)
    for queue in (q for q in topology.queues if q.copies_both_ways):
        outflow, inflow = topology.copy_name(queue, peer), topology.copy_name(queue, me)
        parts.destinations.append(outflow)  # Q itself: each role's own loop
        parts.composites.append(_forward_produced_here(queue.name, outflow))
        parts.composites.append(_forward(inflow, True, [("queue", queue.name)]))


def connector_uri(peer: Broker, bridge: BridgeTuning) -> str:
    """``masterslave:`` for an active/standby peer (two endpoints), ``static:`` for one.

    Both discovery agents read their reconnect backoff from the URI's own query: the cap is
    what decides how soon copying resumes once a rebooted DR broker listens again. ActiveMQ's
    own cap renders no query at all, the URI as it was before the cap was ours to set.
    """
    discovery = "masterslave" if len(peer.openwire) == 2 else "static"
    uri = f"{discovery}:({','.join(peer.openwire)})"
    if bridge.max_reconnect_delay_ms == ACTIVEMQ_MAX_RECONNECT_DELAY_MS:
        return uri
    return f"{uri}?maxReconnectDelay={bridge.max_reconnect_delay_ms}"


def _connectors(topology: Topology, peer: Broker, queues: list[Queue]) -> list[etree._Element]:
    """The network connectors to ``peer`` that carry the copies of ``queues`` (none without queues)."""
    if not queues:
        return []
    bridge = topology.tuning.bridge
    count, uri = bridge.parallel_bridges, connector_uri(peer, bridge)
    includes = [element("queue", [("physicalName", topology.copy_name(q, peer))]) for q in queues]
    connectors = []
    for index in range(1, count + 1):
        name = f"{CONNECTOR_PREFIX}{peer.name}" + (f"-{index}" if count > 1 else "")
        attributes = [("name", name), ("uri", uri), ("duplex", "false"), ("staticBridge", "true")]
        if bridge.user and peer.uses_tls:
            attributes.append(("userName", bridge.user))
        dynamic = element(
            "dynamicallyIncludedDestinations", children=[element("queue", [("physicalName", NOTHING_DYNAMIC)])]
        )
        static = element(
            "staticallyIncludedDestinations", children=[etree.fromstring(etree.tostring(i)) for i in includes]
        )
        connectors.append(element("networkConnector", attributes, [dynamic, static]))
    return connectors


def _capture(queue: Queue, parts: RoleParts) -> None:
    """Q's departure advisories forwarded into BROKERSYNC.CONSUMED, and advisoryForConsumed on Q."""
    parts.composites += [
        _forward(prefix + queue.name, False, [("queue", CONSUMED_QUEUE)]) for prefix in DEPARTURE_ADVISORY_PREFIXES
    ]
    parts.policies[queue.name] = [("advisoryForConsumed", "true")]


def _purge_policy(topology: Topology) -> list[tuple[str, str]]:
    """What a broker needs where the purge removes a queue's consumed copies (see DrTuning)."""
    tuning = topology.tuning.dr
    return [
        ("maxPageSize", str(tuning.max_page_size)),
        ("maxBrowsePageSize", str(tuning.max_browse_page_size)),
        ("memoryLimit", str(tuning.memory_limit_mb * 1024 * 1024)),
    ]


def primary_parts(topology: Topology) -> RoleParts:
    parts = RoleParts()
    copy = not topology.is_crdr
    for queue in topology.queues:
        parts.destinations.append(queue.name)
        if copy and not queue.copies_both_ways:  # active-active queues: _both_ways below
            parts.destinations.append(topology.dr_name(queue))
            parts.composites.append(_forward(queue.name, False, [("queue", topology.dr_name(queue))]))
        if queue.captures_consumed:
            _capture(queue, parts)
        if queue.copies_both_ways:
            parts.policies[queue.name] += _purge_policy(topology)
    parts.destinations += [CONSUMED_QUEUE, RECEIPTS_QUEUE, PARKED_QUEUE]
    # Explicit, because a failover renders the primary role over the DR broker's previous
    # configuration, whose periodic journal sync must not survive into the primary.
    parts.journal = [("journalDiskSyncStrategy", "always")]
    if copy:
        _both_ways(topology, topology.primary, parts)
        parts.connectors = _connectors(topology, topology.dr, topology.queues)
    return parts


def dr_parts(topology: Topology) -> RoleParts:
    parts = RoleParts(accepts_copies=True)
    tuning = topology.tuning.dr
    for queue in topology.queues:
        parts.destinations.append(queue.name)
        if not topology.is_crdr and not queue.copies_both_ways:
            parts.composites.append(_forward(topology.dr_name(queue), True, [("queue", queue.name)]))
        both_ways = queue.copies_both_ways and not topology.is_crdr
        if both_ways:
            _capture(queue, parts)
        parts.policies[queue.name] = parts.policies.get(queue.name, []) + _purge_policy(topology)
    if not topology.is_crdr:
        _both_ways(topology, topology.dr, parts)
        if any(q.copies_both_ways for q in topology.queues):
            parts.destinations += [CONSUMED_QUEUE, RECEIPTS_QUEUE, PARKED_QUEUE]
        parts.connectors = _connectors(topology, topology.primary, [q for q in topology.queues if q.copies_both_ways])
    parts.journal = [("journalDiskSyncStrategy", tuning.journal_disk_sync)]
    if tuning.journal_disk_sync == "periodic":
        parts.journal.append(("journalDiskSyncInterval", str(tuning.journal_sync_interval_ms)))
    return parts


def role_parts(topology: Topology, role: Role) -> RoleParts:
    return primary_parts(topology) if role == "primary" else dr_parts(topology)
