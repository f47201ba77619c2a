"""Rendering Amazon MQ broker configurations from the topology.

``render_configuration(topology, role)`` returns the document Amazon MQ accepts for the
broker currently playing ``role`` (the ``<broker>`` element alone: Amazon MQ itself manages
transport connectors, persistence location, JMX and the like). With ``base`` it merges into
the customer's existing configuration; rendering the result again gives the same bytes.
"""

from __future__ import annotations

from brokersync.render.allowlist import check_allowed
from brokersync.render.connectors import check_network_connectors
from brokersync.render.document import EMPTY_CONFIGURATION, parse_configuration, serialize_configuration
from brokersync.render.merge import merge
from brokersync.render.parts import role_parts
from brokersync.render.safety import check_settings
from brokersync.topology import Role, Topology

__all__ = ["render_configuration"]


def render_configuration(
    topology: Topology, role: Role, *, base: str | None = None, refuse_unsafe_base: bool = True
) -> str:
    """The configuration for the broker playing ``role``, merged into ``base`` when given.

    Raises ``RenderError`` for a base that is not a configuration document, that holds a
    setting under which capture would record messages that were not consumed
    (:mod:`brokersync.render.safety`), or whose own network connectors may forward what
    BrokerSync counts on, and ``NotAllowedByAmazonMQError`` when the result
    holds anything Amazon MQ would silently remove, the customer's content included: better
    to stop here than to upload a configuration whose revision quietly lost a setting.

    ``refuse_unsafe_base=False`` is for a failover, which must not stop on what someone
    added to a running broker past the render (such a connector or setting): it renders, and
    its caller reports them through :func:`brokersync.render.connectors.forwarding_connectors`
    and :func:`brokersync.render.safety.unsafe_settings` instead.
    """
    root = parse_configuration(base if base is not None else EMPTY_CONFIGURATION)
    merge(root, role_parts(topology, role), topology)
    check_allowed(root)
    if refuse_unsafe_base:
        check_settings(root, topology)
        check_network_connectors(root, topology)
    return serialize_configuration(root)
