"""Whether a configuration leaves the broker's advisories on, which capture cannot do without.

BrokerSync learns what was consumed from the broker's consumed-message advisories. A broker
with ``advisorySupport="false"`` raises none at all (ActiveMQ does not install its advisory
broker), so nothing consumed would ever be recorded and every consumed message would stay on
DR, a duplicate after a failover, with no error anywhere. Both roles need them: the DR
broker captures active-active queues and becomes the primary after a failover.
"""

from __future__ import annotations

from lxml import etree

from brokersync.exceptions import RenderError

#: How Spring reads a boolean attribute as false (``CustomBooleanEditor``, case-insensitive).
_SPRING_FALSE = frozenset({"false", "off", "no", "0"})


def advisories_off(root: etree._Element) -> bool:
    """Whether the ``<broker>`` element ``root`` turns advisories off (they are on by default)."""
    return root.get("advisorySupport", "true").strip().lower() in _SPRING_FALSE


def advisories_refusal(value: str) -> str:
    """What to tell the operator about ``advisorySupport="<value>"``."""
    return (
        f'advisorySupport="{value}" turns off every advisory, the consumed-message advisories '
        "BrokerSync captures included: no consumption would be recorded, and every message "
        "consumed on the primary would stay on DR as a duplicate. Remove the attribute "
        "(advisories are on by default)"
    )


def check_advisories(root: etree._Element) -> None:
    """Raise :class:`RenderError` when ``root`` turns advisories off."""
    if advisories_off(root):
        raise RenderError(advisories_refusal(root.get("advisorySupport", "")))
