"""Customer network connectors that could carry away what BrokerSync counts on.

A network bridge consumes what it forwards. ActiveMQ acknowledges each forwarded message on
this broker as it does any consumer's (``Queue.removeMessage`` calls ``acknowledge``, and so
``messageConsumed``, for network subscriptions too), so a synced queue's consumed advisory
fires for a message that only moved to another broker. That is why the rendered policy sets
``advisoryForConsumed`` on each synced queue by name and never by wildcard: our own bridge
consumes ``Q.DR``. A network of brokers of the customer's own (Amazon MQ's mesh examples
bridge every destination, ``duplex="true"`` and no filters) would then:

* forward a synced queue's messages to a broker where a consumer waits, and BrokerSync would
  remove their DR copies although nobody consumed them: they sit on a broker of the same
  region, and a region loss takes both;
* on the broker playing DR, hand the copies waiting there to another broker;
* take copies (``Q.DR``) before they reach DR, or the advisories, parked advisories and
  receipts (``BROKERSYNC.*``) before the relay reads them.

So rendering refuses a customer connector that may forward any of these, and says which
``excludedDestinations`` entries make it safe. Which destinations a bridge forwards is
ActiveMQ's ``DemandForwardingBridgeSupport.isPermissableDestination``: an exclusion wins,
then a static inclusion, then, unless the bridge is static, a dynamic inclusion (a bridge
with no dynamic inclusions listed may forward everything on demand). Our own connectors
(named ``brokersync-...``) are not checked: they are rendered, and carry only ``Q.DR``.
"""

from __future__ import annotations

from dataclasses import dataclass

from lxml import etree

from brokersync.exceptions import RenderError
from brokersync.render.document import core, local_name
from brokersync.render.patterns import pattern_matches
from brokersync.topology import CONNECTOR_PREFIX, CONSUMED_QUEUE, PARKED_QUEUE, RECEIPTS_QUEUE, Topology

_KINDS = ("queue", "topic")
#: Spring's spellings of a true boolean attribute.
_TRUE = frozenset({"true", "on", "yes", "1"})


@dataclass(frozen=True)
class Filter:
    """One destination of a connector's filter list: ``queue`` or ``topic``, and a wildcard pattern."""

    kind: str
    pattern: str

    def matches(self, kind: str, name: str) -> bool:
        return self.kind == kind and pattern_matches(self.pattern, name)


def is_brokersync_connector(connector: etree._Element) -> bool:
    """Whether a ``networkConnector`` is BrokerSync's: named ``brokersync-...``, as rendering names them."""
    return connector.tag == core("networkConnector") and connector.get("name", "").startswith(CONNECTOR_PREFIX)


def _parts(destination: etree._Element) -> list[Filter]:
    """A ``<queue physicalName="A,topic://B"/>`` is a composite: each part with its own type."""
    kind = local_name(destination)
    if kind not in _KINDS:
        return []  # temporary destinations: never one of ours
    filters = []
    for part in (p.strip() for p in destination.get("physicalName", "").split(",")):
        scheme, separator, rest = part.partition("://")
        part_kind, pattern = (scheme, rest) if separator and scheme in _KINDS else (kind, part)
        if pattern:
            filters.append(Filter(part_kind, pattern))
    return filters


def _filters(connector: etree._Element, holder: str) -> list[Filter]:
    found = connector.find(core(holder))
    return [] if found is None else [f for destination in found for f in _parts(destination)]


def may_forward(connector: etree._Element, kind: str, name: str) -> bool:
    """Whether a bridge configured by ``connector`` may forward destination ``name`` of ``kind``."""
    if any(f.matches(kind, name) for f in _filters(connector, "excludedDestinations")):
        return False
    if any(f.matches(kind, name) for f in _filters(connector, "staticallyIncludedDestinations")):
        return True
    if connector.get("staticBridge", "false").strip().lower() in _TRUE:
        return False
    dynamic = _filters(connector, "dynamicallyIncludedDestinations")
    return not dynamic or any(f.matches(kind, name) for f in dynamic)


def kept_queues(topology: Topology) -> list[str]:
    """The queues no customer bridge may forward: captured queues, copy queues, BrokerSync's own."""
    names = [q.name for q in topology.captured_queues]
    names += [name for q in topology.queues for name in topology.copy_names(q)]
    names += [CONSUMED_QUEUE, PARKED_QUEUE, RECEIPTS_QUEUE]
    return list(dict.fromkeys(names))


def forwarding_connectors(root: etree._Element, topology: Topology) -> dict[str, list[str]]:
    """Each customer connector in ``root`` that may forward a kept queue, with those queues."""
    kept = kept_queues(topology)
    found: dict[str, list[str]] = {}
    for position, connector in enumerate(root.iter(core("networkConnector")), start=1):
        if is_brokersync_connector(connector):
            continue
        forwarded = [queue for queue in kept if may_forward(connector, "queue", queue)]
        if forwarded:
            found[connector.get("name") or f"(unnamed, network connector {position})"] = forwarded
    return found


def check_network_connectors(root: etree._Element, topology: Topology) -> None:
    """Raise :class:`RenderError` for the first customer connector that may forward a kept queue."""
    for name, queues in forwarding_connectors(root, topology).items():
        raise RenderError(refusal(name, queues))


def refusal(connector: str, queues: list[str]) -> str:
    """What is wrong with ``connector`` and the exclusions that put it right."""
    exclusions = "".join(f'<queue physicalName="{q}"/>' for q in queues)
    return (
        f"networkConnector {connector!r} may forward {', '.join(queues)} to another broker. "
        "A bridge acknowledges what it forwards, so ActiveMQ raises the same consumed advisory as for an "
        "application, and BrokerSync would remove the DR copies of messages that only moved to a broker of "
        "the same region (on the broker playing DR, the copies themselves would leave). Exclude them: "
        f"<excludedDestinations>{exclusions}</excludedDestinations> in that connector, and run these "
        "queues' consumers on this broker"
    )
