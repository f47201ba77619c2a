"""Reading back which role a broker configuration was rendered for.

A returning old primary restarts with the configuration it had: the primary role's network
connector (named ``brokersync-…``, the same shape :mod:`merge` recognises as ours) copying
its queues to the peer. Reading the broker's current revision for that connector is how the
health probe tells that a broker the role record calls DR still runs as primary.
"""

from __future__ import annotations

from lxml import etree

from brokersync.exceptions import RenderError
from brokersync.render.connectors import is_brokersync_connector
from brokersync.render.document import core


def runs_primary_configuration(document: str) -> bool:
    """Does this broker configuration copy to the peer (a BrokerSync network connector)?"""
    try:
        root = etree.fromstring(document.encode("utf-8"), etree.XMLParser(resolve_entities=False, no_network=True))
    except etree.XMLSyntaxError as e:
        raise RenderError(f"the broker's configuration is not XML: {e}") from e
    return any(is_brokersync_connector(c) for c in root.iter(core("networkConnector")))
