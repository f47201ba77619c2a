"""Reading back a broker's running configuration: which role it was rendered for, and whether it is behind the topology.

A returning old primary restarts with the configuration it had: the primary role's network
connector (named ``brokersync-…``, the same shape :mod:`merge` recognises as ours) copying
its queues to the peer. Reading the broker's current revision for that connector is how the
health probe tells that a broker the role record calls DR still runs as primary.

A broker can also run a configuration older than the topology: a queue added, a setting
changed, and ``apply-config`` not run, or not rebooted onto. :func:`configuration_drift`
says what applying it would change.
"""

from __future__ import annotations

import difflib

from lxml import etree

from brokersync.exceptions import RenderError
from brokersync.render import render_configuration
from brokersync.render.connectors import is_brokersync_connector
from brokersync.render.document import core, parse_configuration, serialize_configuration
from brokersync.topology import Role, Topology


def runs_primary_configuration(document: str) -> bool:
    """Does this broker configuration copy to the peer (a BrokerSync network connector)?"""
    try:
        root = etree.fromstring(document.encode("utf-8"), etree.XMLParser(resolve_entities=False, no_network=True))
    except etree.XMLSyntaxError as e:
        raise RenderError(f"the broker's configuration is not XML: {e}") from e
    return any(is_brokersync_connector(c) for c in root.iter(core("networkConnector")))


#: Lines of difference a drift report keeps (the probe logs them; status prints them).
DRIFT_LINES = 20
_DRIFT_LINE_CHARS = 200


def configuration_drift(document: str, topology: Topology, role: Role) -> list[str]:
    """How the configuration a broker runs differs from what ``apply-config`` would make of it for ``role``.

    Empty when it runs what the topology renders for that role. Why this comparison: a queue
    added to the topology whose configuration was never applied (or applied and never
    rebooted onto) is neither copied nor captured, and nothing else says so until a failover
    loses it. Rendering over the running document keeps the customer's own content, and
    rendering the result again gives the same bytes (a tested property), so any difference
    is one that ``brokersync apply-config --role ROLE --reboot`` would make. Both sides are
    serialized alike first, so a document that differs only in layout (as stored by Amazon
    MQ, say) is no drift. What would be refused there (a forwarding connector, an unsafe
    setting) has its own check and alarm, so it is rendered over here, not refused.

    Returns the changed lines (``-`` running, ``+`` rendered), at most :data:`DRIFT_LINES`;
    raises ``RenderError`` for a document that is not a broker configuration.
    """
    running = serialize_configuration(parse_configuration(document))
    wanted = render_configuration(topology, role, base=document, refuse_unsafe_base=False)
    if wanted == running:
        return []
    changed = [
        line[:_DRIFT_LINE_CHARS]
        for line in difflib.unified_diff(running.splitlines(), wanted.splitlines(), lineterm="", n=0)
        if line[:1] in "+-" and not line.startswith(("+++", "---"))
    ]
    return changed[:DRIFT_LINES] or ["the rendered configuration differs in layout only"]
