"""Merging a role's parts into a customer's configuration, idempotently.

What we own is recognised by shape, not by markers a customer could delete:
* a network connector whose name starts with ``brokersync-``;
* a composite queue ``Q`` forwarding only to ``Q<suffix>`` (or, for an active-active queue,
  only what was produced here to ``Q<suffix>.<broker>``), a composite queue ``Q<suffix>``
  (or ``Q<suffix>.<broker>``) forwarding only to ``Q``, and a composite topic on a departure
  advisory topic (consumed, expired, DLQ'd) forwarding only to ``BROKERSYNC.CONSUMED``.
Owned pieces are replaced where they stand (stale ones, for queues no longer in the
topology, are removed); everything else is kept. A customer composite queue that already
has our name keeps its own forwards and gains ours. A synced queue's policy goes into the
customer's entry for exactly that queue when there is one; otherwise a new entry starts as
a copy of the most specific customer entry that matched the queue (often ``queue=">"``),
so our exact-name entry does not silently take their settings away from that queue.
A broker that ran ActiveMQ's default interceptors (none configured) gets the default virtual
topic written out beside our composites, which would otherwise replace it.
"""

from __future__ import annotations

import copy

from lxml import etree

from brokersync.exceptions import RenderError
from brokersync.render.access import merge_authorization
from brokersync.render.connectors import is_brokersync_connector
from brokersync.render.document import container, core, element, local_name, replace_run, spring_boolean
from brokersync.render.parts import RoleParts
from brokersync.render.patterns import pattern_matches, specificity
from brokersync.topology import CONSUMED_QUEUE, DEPARTURE_ADVISORY_PREFIXES, Topology


def merge(root: etree._Element, parts: RoleParts, topology: Topology) -> None:
    """Apply ``parts`` to the configuration ``root`` in place."""
    if parts.destinations:
        _merge_destinations(container(root, "destinations"), parts.destinations)
    virtual = _existing(root, "destinationInterceptors", "virtualDestinationInterceptor", "virtualDestinations")
    if parts.composites or virtual is not None:
        if virtual is None:
            keeps_default = _existing(root, "destinationInterceptors") is None
            virtual = container(root, "destinationInterceptors", "virtualDestinationInterceptor", "virtualDestinations")
            if keeps_default:
                _write_out_default_interceptors(root, virtual)
        _merge_composites(virtual, parts.composites, topology)
    if parts.policies:
        _merge_policies(container(root, "destinationPolicy", "policyMap", "policyEntries"), parts.policies)
    connectors = _existing(root, "networkConnectors")
    if parts.connectors or connectors is not None:
        connectors = connectors if connectors is not None else container(root, "networkConnectors")
        ours = [c for c in connectors if is_brokersync_connector(c)]
        replace_run(connectors, ours, parts.connectors)
    if parts.journal:
        kahadb = container(root, "persistenceAdapter", "kahaDB")
        for key, value in parts.journal:
            kahadb.set(key, value)
    if parts.plugins:
        plugins = container(root, "plugins")
        for name in parts.plugins:
            if not any(c.tag == core(name) for c in plugins):
                plugins.append(element(name))
    if topology.access.enforce:
        merge_authorization(root, topology, accepts_copies=parts.accepts_copies)
    _drop_empty(root)


def _write_out_default_interceptors(root: etree._Element, virtual: etree._Element) -> None:
    """ActiveMQ's default interceptors (``BrokerService.createDefaultDestinationInterceptor``), spelled out.

    A broker whose configuration has no ``destinationInterceptors`` runs a virtual topic on
    ``VirtualTopic.>`` (unless ``useVirtualTopics="false"``) and, with ``useMirroredQueues="true"``,
    mirrored queues. Configuring any interceptor replaces those defaults, so without this the
    composite queues a render adds would silently stop every ``VirtualTopic.*`` topic reaching
    its ``Consumer.*.`` queues.
    """
    if spring_boolean(root.get("useVirtualTopics"), default=True):
        virtual.append(default_virtual_topic())
    if spring_boolean(root.get("useMirroredQueues"), default=False):
        container(root, "destinationInterceptors").append(element("mirroredQueue"))


def default_virtual_topic() -> etree._Element:
    """The virtual topic ActiveMQ runs when no interceptor is configured: ``VirtualTopic.>`` into ``Consumer.*.``."""
    return element("virtualTopic", [("name", "VirtualTopic.>"), ("prefix", "Consumer.*."), ("selectorAware", "false")])


def _existing(root: etree._Element, *path: str) -> etree._Element | None:
    node: etree._Element | None = root
    for name in path:
        node = next((c for c in node if c.tag == core(name)), None) if node is not None else None
    return node


def _merge_destinations(destinations: etree._Element, names: list[str]) -> None:
    present = {c.get("physicalName") for c in destinations if c.tag == core("queue")}
    for name in names:
        if name not in present:
            destinations.append(element("queue", [("physicalName", name)]))
            present.add(name)


def _forwards(composite: etree._Element) -> list[etree._Element]:
    """The composite's forward elements (comments and the like left out)."""
    forward_to = composite.find(core("forwardTo"))
    return [] if forward_to is None else [t for t in forward_to if local_name(t)]


def _target(forward: etree._Element) -> tuple[str | None, str | None]:
    """``(kind, name)`` of one forward; a filtered forward is ``("filteredDestination", its queue)``."""
    return local_name(forward), forward.get("physicalName") or forward.get("queue")


def _forward_targets(composite: etree._Element) -> list[tuple[str | None, str | None]]:
    return [_target(t) for t in _forwards(composite)]


def _is_ours(composite: etree._Element, topology: Topology) -> bool:
    name = composite.get("name", "")
    targets = _forward_targets(composite)
    if len(targets) != 1:
        return False
    kind, target = targets[0]
    suffix = topology.dr_suffix
    if composite.tag == core("compositeTopic"):
        return name.startswith(DEPARTURE_ADVISORY_PREFIXES) and (kind, target) == ("queue", CONSUMED_QUEUE)
    if kind == "filteredDestination":
        return target is not None and target.startswith(f"{name}{suffix}.")
    return kind == "queue" and (
        target == f"{name}{suffix}"
        or (name.endswith(suffix) and target == name[: -len(suffix)])
        or (target is not None and _is_inflow_of(name, target, suffix))
    )


def _is_inflow_of(name: str, queue: str, suffix: str) -> bool:
    """``Q<suffix>.<broker>``: an active-active queue's inflow on the broker of that name."""
    head = f"{queue}{suffix}."
    broker = name[len(head) :]
    return name.startswith(head) and bool(broker) and "." not in broker


def _merge_composites(virtual: etree._Element, new: list[etree._Element], topology: Topology) -> None:
    wanted = {(c.tag, c.get("name")): c for c in new}
    ours: list[etree._Element] = []
    for existing in list(virtual):
        key = (existing.tag, existing.get("name"))
        if _is_ours(existing, topology):
            ours.append(existing)
        elif key in wanted:
            _extend_customer_composite(existing, wanted.pop(key))
    replace_run(virtual, ours, [c for c in new if (c.tag, c.get("name")) in wanted])


def _extend_customer_composite(existing: etree._Element, ours: etree._Element) -> None:
    """A customer composite with our name: keep their forwards, add ours, refuse a contradiction."""
    if existing.get("forwardOnly", "true") != ours.get("forwardOnly"):
        raise RenderError(
            f"{local_name(existing)} {existing.get('name')!r} already exists with forwardOnly="
            f"{existing.get('forwardOnly', 'true')}; BrokerSync needs forwardOnly={ours.get('forwardOnly')} there"
        )
    forward_to = existing.find(core("forwardTo"))
    if forward_to is None:
        forward_to = element("forwardTo")
        existing.append(forward_to)
    present = set(_forward_targets(existing))
    for forward in _forwards(ours):
        kind, target = _target(forward)
        if (kind, target) not in present and kind and target:
            forward_to.append(copy.deepcopy(forward))


def _merge_policies(entries: etree._Element, policies: dict[str, list[tuple[str, str]]]) -> None:
    queue_entries = [e for e in entries if e.tag == core("policyEntry") and e.get("queue")]
    for queue, attributes in policies.items():
        target = next((e for e in queue_entries if e.get("queue") == queue), None)
        if target is None:
            matching = [e for e in queue_entries if pattern_matches(e.get("queue", ""), queue)]
            if matching:
                template = max(matching, key=lambda e: specificity(e.get("queue", "")))
                target = copy.deepcopy(template)
                target.set("queue", queue)
            else:
                target = element("policyEntry", [("queue", queue)])
            entries.append(target)
            queue_entries.append(target)
        for key, value in attributes:
            target.set(key, value)


def _drop_empty(root: etree._Element) -> None:
    """Remove containers a merge left empty (a stale connector list, say): Amazon MQ keeps them otherwise."""
    for name in ("networkConnectors",):
        node = _existing(root, name)
        if node is not None and len(node) == 0:
            root.remove(node)
