"""Who may write what BrokerSync trusts: the ``authorizationPlugin`` entries, merged and checked.

BrokerSync trusts three things to mean "gone from the primary": an advisory in
``BROKERSYNC.CONSUMED`` (forwarded from Q's consumed, expired and DLQ'd advisory topics), a
receipt in ``BROKERSYNC.RECEIPTS``, and (for the copy) what arrives through ``Q.DR``. Anyone
who can send to those can make the purge remove a real, unconsumed message from DR. So:

* both roles render the same entries (a failover swaps configurations, not trust), but for
  one: ``Q.DR`` is writable only on the broker playing DR, where the peer's bridge delivers
  the copies. On a primary nobody may write it (the composite queue's forward is the broker's
  own and is not checked), so an old primary that comes back from a lost region still
  running the primary configuration cannot bounce copies with the new primary: each refuses
  the other's bridge until the failback makes the old one DR. Without this the copies
  travel there and back, return with a hop count the bridge never forwards again, and stay
  stranded in the new primary's outflow;
* BrokerSync's destinations are writable, readable and administrable only by BrokerSync's
  group and the trusted operator groups (``BROKERSYNC.RECEIPTS`` also writable by the
  receipt groups); application groups get each synced queue, the advisory topics to read,
  temporary destinations, and the patterns the topology lists;
* on the broker playing DR, a ``sync`` queue holds copies only, and its only readers are
  BrokerSync (the purge) and the operators: an application consuming there (a
  ``failover:`` URI that lists both brokers picks either) would take a copy while its
  message still waits on the primary, unrecorded, and a failover would then lose the
  message. So the DR role grants the application groups no read there, and takes away the
  read a primary's render gave them (a failback renders the DR role over a primary's
  configuration); a failover rendering the primary role gives it back. Groups you grant
  yourself keep theirs: they are yours to point at the primary;
* ActiveMQ grants the **union** of every entry whose pattern matches a destination
  (``DefaultAuthorizationMap.getAllEntries``), so one broad entry (``queue=">"``) would undo
  all of this. After merging, every entry is checked against every protected destination
  and rendering stops with a :class:`RenderError` naming the entry that would let another
  group in, rather than upload a configuration that only looks safe;
* ``populateJMSXUserID`` makes the broker stamp every client-sent message with the
  authenticated user, which a client cannot forge: the relay refuses an "advisory" that
  carries one, because the broker's own advisories never do (defence in depth).

Entries are merged into the customer's: an entry for the same destination pattern gains our
groups (a set union, so rendering twice changes nothing); otherwise ours is appended.
"""

from __future__ import annotations

from dataclasses import dataclass

from lxml import etree

from brokersync.exceptions import RenderError
from brokersync.render.document import container, core, element
from brokersync.render.patterns import pattern_matches
from brokersync.topology import (
    CONSUMED_QUEUE,
    DEAD_LETTER_QUEUE,
    DEPARTURE_ADVISORY_PREFIXES,
    PARKED_QUEUE,
    RECEIPTS_QUEUE,
    Topology,
)

#: Every queue BrokerSync owns lives under this prefix.
BROKERSYNC_QUEUES = "BROKERSYNC.>"
ADVISORY_TOPICS = "ActiveMQ.Advisory.>"
STATISTICS_QUEUES = "ActiveMQ.Statistics.>"
_OPERATIONS = ("read", "write", "admin")


@dataclass(frozen=True)
class Grant:
    """One authorization entry: a destination pattern and the groups of each operation."""

    kind: str  # "queue" or "topic"
    pattern: str
    read: tuple[str, ...] = ()
    write: tuple[str, ...] = ()
    admin: tuple[str, ...] = ()
    #: Groups whose read a merge takes away from an existing entry (a sync queue on DR).
    unread: tuple[str, ...] = ()


@dataclass(frozen=True)
class Protected:
    """A destination BrokerSync trusts, and the groups that may perform each checked operation on it."""

    kind: str
    name: str
    allowed: dict[str, frozenset[str]]


def _dedupe(*groups: list[str] | tuple[str, ...]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(g for part in groups for g in part))


def advisory_topics(topology: Topology) -> list[str]:
    """The advisory topics BrokerSync forwards into ``BROKERSYNC.CONSUMED``."""
    return [prefix + q.name for q in topology.captured_queues for prefix in DEPARTURE_ADVISORY_PREFIXES]


def copies_only(topology: Topology) -> list[str]:
    """The queues that hold nothing but copies on the broker playing DR: each ``sync`` queue."""
    return [q.name for q in topology.captured_queues if not q.copies_both_ways]


def protected_destinations(topology: Topology) -> list[Protected]:
    access = topology.access
    ours = frozenset(access.brokersync_groups)
    full = dict.fromkeys(_OPERATIONS, ours)
    protected = [Protected("queue", name, full) for name in (CONSUMED_QUEUE, PARKED_QUEUE)]
    protected.append(Protected("queue", RECEIPTS_QUEUE, {**full, "write": ours | frozenset(access.receipt_groups)}))
    protected += [Protected("queue", name, full) for q in topology.queues for name in topology.copy_names(q)]
    # Reading an advisory topic is harmless (it is a copy); writing one forges consumption.
    protected += [Protected("topic", name, {"write": ours}) for name in advisory_topics(topology)]
    return protected


def grants(topology: Topology, *, accepts_copies: bool = True) -> list[Grant]:
    """The entries BrokerSync needs; ``accepts_copies`` (the DR role) lets the bridge write ``Q.DR``."""
    access = topology.access
    ours = tuple(access.brokersync_groups)
    apps = tuple(access.application_groups)
    receipts = tuple(access.receipt_groups)
    everyone = _dedupe(ours, apps, receipts)
    entries = [
        Grant("queue", BROKERSYNC_QUEUES, ours, ours, ours),
        Grant("queue", STATISTICS_QUEUES, ours, ours, ours),
        Grant("topic", ADVISORY_TOPICS, everyone, ours, everyone),
    ]
    if receipts:
        entries.append(Grant("queue", RECEIPTS_QUEUE, (), receipts, ()))
    copies = set(copies_only(topology)) if accepts_copies else set()
    for queue in topology.queues:
        shared = _dedupe(ours, apps)
        if queue.name in copies:
            entries.append(Grant("queue", queue.name, ours, shared, shared, unread=apps))
        else:
            entries.append(Grant("queue", queue.name, shared, shared, shared))
        # An active-active queue's inflow takes the peer's copies whichever role this broker plays.
        writers = ours if accepts_copies or queue.copies_both_ways else ()
        entries += [Grant("queue", name, ours, writers, ours) for name in topology.copy_names(queue)]
    if access.trusted_groups:
        # Rendered authorization denies every destination no entry names, so without this no
        # client could read the dead letters: only the web console (JMX, unchecked) could, and
        # its Retry keeps the message id, which the DR broker then drops (decision 0043, the runbook).
        operators = tuple(access.trusted_groups)
        entries.append(Grant("queue", DEAD_LETTER_QUEUE, operators, operators, operators))
    shared = _dedupe(ours, apps)
    entries += [Grant("queue", p, shared, shared, shared) for p in access.application_queues]
    entries += [Grant("topic", p, shared, shared, shared) for p in access.application_topics]
    return entries


def merge_authorization(root: etree._Element, topology: Topology, *, accepts_copies: bool = True) -> None:
    """Merge :func:`grants` into the configuration's authorization map, then check it (see module docstring).

    A ``Q.DR`` entry's write groups are set, not merged: rendering the primary role over the DR
    configuration (a failover) must take the bridge's write away again. So is, in the DR role,
    the application groups' read of a ``sync`` queue (see the module docstring).
    """
    access = topology.access
    copy_queues = {name for q in topology.queues for name in topology.copy_names(q)}
    root.set("populateJMSXUserID", "true")
    root.set("useAuthenticatedPrincipalForJMSXUserID", "true")
    entries = container(root, "plugins", "authorizationPlugin", "map", "authorizationMap", "authorizationEntries")
    for grant in grants(topology, accepts_copies=accepts_copies):
        existing = next(
            (e for e in entries if e.tag == core("authorizationEntry") and e.get(grant.kind) == grant.pattern), None
        )
        if existing is None:
            existing = element("authorizationEntry", [(grant.kind, grant.pattern)])
            entries.append(existing)
        exact = grant.kind == "queue" and grant.pattern in copy_queues
        for operation in _OPERATIONS:
            groups = getattr(grant, operation)
            if exact and operation == "write":
                if groups:
                    existing.set(operation, ",".join(groups))  # in place: the attribute keeps its position
                else:
                    existing.attrib.pop(operation, None)
            elif groups:
                present = [g.strip() for g in existing.get(operation, "").split(",") if g.strip()]
                if operation == "read":  # a primary's render gave these; groups you grant stay
                    present = [g for g in present if g not in grant.unread or g in groups]
                existing.set(operation, ",".join(dict.fromkeys([*present, *groups])))
    authorization_map = entries.getparent()
    assert authorization_map is not None
    # <tempDestinationAuthorizationEntry> (the property) wraps one of the same name (the bean).
    holder = next((c for c in authorization_map if c.tag == core("tempDestinationAuthorizationEntry")), None)
    if holder is None:
        holder = element("tempDestinationAuthorizationEntry")
        authorization_map.append(holder)
    temporary = next((c for c in holder if c.tag == core("tempDestinationAuthorizationEntry")), None)
    if temporary is None:
        temporary = element("tempDestinationAuthorizationEntry")
        holder.append(temporary)
    everyone = _dedupe(access.brokersync_groups, access.application_groups, access.receipt_groups)
    for operation in _OPERATIONS:
        present = [g.strip() for g in temporary.get(operation, "").split(",") if g.strip()]
        temporary.set(operation, ",".join(dict.fromkeys([*present, *everyone])))
    check_authorization(root, topology)


def check_authorization(root: etree._Element, topology: Topology) -> None:
    """Raise :class:`RenderError` when any entry lets a group outside the allowed ones at a protected destination."""
    entries = root.iterfind(
        f"{core('plugins')}/{core('authorizationPlugin')}/{core('map')}/{core('authorizationMap')}"
        f"/{core('authorizationEntries')}/{core('authorizationEntry')}"
    )
    protected = protected_destinations(topology)
    for entry in entries:
        for kind in ("queue", "topic"):
            for pattern in (p.strip() for p in entry.get(kind, "").split(",") if p.strip()):
                for target in (p for p in protected if p.kind == kind and pattern_matches(pattern, p.name)):
                    for operation, allowed in target.allowed.items():
                        groups = {g.strip() for g in entry.get(operation, "").split(",") if g.strip()}
                        foreign = sorted(groups - allowed)
                        if foreign:
                            raise RenderError(_refusal(kind, pattern, operation, foreign, target.name))


def _refusal(kind: str, pattern: str, operation: str, groups: list[str], target: str) -> str:
    return (
        f'authorizationEntry {kind}="{pattern}" grants {operation} to {", ".join(groups)}, which reaches {target}: '
        "ActiveMQ grants the union of every matching entry, so these users could forge consumption (or steal the "
        "copy) and make BrokerSync remove unconsumed messages from DR. Narrow the entry to your applications' "
        "destinations (list them in the topology's access.application_queues/application_topics), or add the "
        "groups to access.trusted_groups if they are operators"
    )
