"""Broker settings under which BrokerSync would record messages that were not consumed.

Capture trusts one signal: the broker's consumed-message advisory for a captured queue means
the message left that queue for good. Two settings a customer may have in the configuration
a render merges into break that, silently:

* ``advisorySupport="false"``: ActiveMQ installs no advisory broker, so nothing consumed is
  ever recorded and every consumed message stays on DR, a duplicate after a failover.
* a ``redeliveryPlugin`` whose policies cover a captured queue: on a poison ack (a STOMP NACK,
  or an OpenWire client's redeliveries exhausted) the broker takes the message off the queue,
  raising the consumed advisory, and its scheduler sends the message back later with the same
  id. The purge removes the DR copy meanwhile, and the DR broker drops the copy made when the
  message returns as a duplicate of one it has seen, so the message is unprotected from then
  on (measured on the real pair: ``tests/integration/test_broker_redelivery.py``). Without a
  policy for the queue, a poison-acked message goes to the dead-letter queue, which is a
  departure like any other.

A render refuses both (:func:`check_settings`); a failover renders over them and reports
them, and the health probe alarms on brokers running them (:func:`unsafe_settings`).
"""

from __future__ import annotations

from lxml import etree

from brokersync.exceptions import RenderError
from brokersync.render.document import core, spring_boolean
from brokersync.render.patterns import pattern_matches
from brokersync.topology import Topology


def advisories_off(root: etree._Element) -> bool:
    """Whether the ``<broker>`` element ``root`` turns advisories off (they are on by default)."""
    return not spring_boolean(root.get("advisorySupport"), default=True)


def redelivered_queues(root: etree._Element, topology: Topology) -> list[str]:
    """The captured queues that a ``redeliveryPlugin`` policy of ``root`` covers, in topology order.

    A ``defaultEntry`` covers every queue; an entry covers the queues its ``queue`` patterns
    (comma-separated, ActiveMQ wildcards) match.
    """
    patterns: list[str] = []
    for plugin in root.iterfind(f"{core('plugins')}/{core('redeliveryPlugin')}"):
        for policy in plugin.iter(core("redeliveryPolicy")):
            parent = policy.getparent()
            if parent is not None and parent.tag == core("defaultEntry"):
                patterns.append(">")
            else:
                patterns.extend(p.strip() for p in policy.get("queue", "").split(",") if p.strip())
    return [q.name for q in topology.captured_queues if any(pattern_matches(p, q.name) for p in patterns)]


def unsafe_settings(root: etree._Element, topology: Topology) -> list[str]:
    """Why ``root`` would make BrokerSync record messages that were not consumed; empty when it would not."""
    reasons = []
    if advisories_off(root):
        reasons.append(
            f'advisorySupport="{root.get("advisorySupport")}" turns off every advisory, the consumed-message '
            "advisories BrokerSync captures included: no consumption would be recorded, and every message "
            "consumed on the primary would stay on DR as a duplicate. Remove the attribute (advisories are "
            "on by default)"
        )
    redelivered = redelivered_queues(root, topology)
    if redelivered:
        reasons.append(
            f"the redeliveryPlugin's policies cover {', '.join(redelivered)}: on a poison ack (a NACK, or a "
            "client's redeliveries exhausted) the broker takes a message off the queue, which raises the "
            "consumed advisory, and sends it back later with the same id. BrokerSync would remove its DR "
            "copy meanwhile, and the DR broker drops the copy made when it returns as a duplicate. Give "
            "these queues no redelivery policy (entries for your other queues instead of a defaultEntry): "
            "a poison-acked message then goes to the dead-letter queue, and the consumer's own redelivery "
            "still applies before that"
        )
    return reasons


def check_settings(root: etree._Element, topology: Topology) -> None:
    """Raise :class:`RenderError` naming every unsafe setting of ``root``."""
    reasons = unsafe_settings(root, topology)
    if reasons:
        raise RenderError("; and ".join(reasons))
