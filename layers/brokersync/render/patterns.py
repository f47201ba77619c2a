"""ActiveMQ destination wildcards, as the broker's ``DestinationMap`` applies them.

``*`` matches one dot-separated segment, ``>`` the rest of the name (one segment or more).
Used to find the customer policy entry a synced queue inherits from, and every
authorization entry that reaches a destination BrokerSync protects.
"""

from __future__ import annotations


def pattern_matches(pattern: str, name: str) -> bool:
    """Whether the wildcard ``pattern`` matches the plain destination ``name``."""
    pattern_parts, name_parts = pattern.split("."), name.split(".")
    for index, part in enumerate(pattern_parts):
        if part == ">":
            return index < len(name_parts)
        if index >= len(name_parts) or (part not in ("*", name_parts[index])):
            return False
    return len(pattern_parts) == len(name_parts)


def specificity(pattern: str) -> tuple[int, int]:
    """How specific a pattern is: literal segments first, then length (most specific sorts last)."""
    parts = pattern.split(".")
    return (sum(p not in ("*", ">") for p in parts), len(parts))
