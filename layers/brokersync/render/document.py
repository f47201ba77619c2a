"""Reading and writing Amazon MQ configuration documents without disturbing what we do not own.

Rendering merges into the customer's document, so parsing keeps comments and attribute
order, and serialising is deterministic (one indentation, one declaration): rendering the
output again must give the same bytes.
"""

from __future__ import annotations

from collections.abc import Iterable

from lxml import etree

from brokersync.exceptions import RenderError
from brokersync.render.allowlist import CORE_NS

EMPTY_CONFIGURATION = f'<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n<broker xmlns="{CORE_NS}"/>\n'


#: How Spring reads a boolean attribute (``CustomBooleanEditor``: trimmed, case-insensitive).
_SPRING_TRUE = frozenset({"true", "on", "yes", "1"})
_SPRING_FALSE = frozenset({"false", "off", "no", "0"})


def spring_boolean(value: str | None, default: bool) -> bool:
    """An attribute's boolean as the broker reads it; ``default`` when absent or not a boolean word."""
    word = (value or "").strip().lower()
    return True if word in _SPRING_TRUE else False if word in _SPRING_FALSE else default


def core(name: str) -> str:
    """Clark notation for an element of ActiveMQ's core namespace."""
    return f"{{{CORE_NS}}}{name}"


def local_name(element: etree._Element) -> str | None:
    tag = element.tag
    return etree.QName(tag).localname if isinstance(tag, str) else None


def parse_configuration(text: str) -> etree._Element:
    """Parse a configuration document, refusing DTDs and entities (they have no place in one)."""
    parser = etree.XMLParser(remove_blank_text=True, resolve_entities=False, no_network=True, load_dtd=False)
    try:
        root = etree.fromstring(text.strip().encode("utf-8"), parser)
    except etree.XMLSyntaxError as e:
        raise RenderError(f"the base configuration is not well-formed XML: {e}") from e
    if root.getroottree().docinfo.doctype:
        # The parser neither loads nor expands a DTD, and serialising drops it: a document
        # that used its entities would come out naming entities nothing declares any more.
        raise RenderError(
            "the base configuration has a <!DOCTYPE>: Amazon MQ configurations take no DTD or "
            "entities; remove it and write any entity's text in place"
        )
    if root.tag != core("broker"):
        raise RenderError(
            f'the base configuration\'s root must be <broker xmlns="{CORE_NS}">, found {root.tag!r} '
            "(Amazon MQ configurations are the <broker> element alone, without <beans>)"
        )
    return root


def serialize_configuration(root: etree._Element) -> str:
    etree.indent(root, space="  ")
    body = etree.tostring(root, encoding="unicode")
    return f'<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n{body}\n'


def element(
    name: str, attributes: Iterable[tuple[str, str]] = (), children: Iterable[etree._Element] = ()
) -> etree._Element:
    """A core-namespace element with attributes in the given order (attribute order is output order)."""
    node = etree.Element(core(name))
    for key, value in attributes:
        node.set(key, value)
    node.extend(children)
    return node


def container(parent: etree._Element, *path: str) -> etree._Element:
    """The element at ``path`` below ``parent``, creating missing levels.

    A created child goes before the first sibling whose name sorts after it: ActiveMQ's
    schema has required the broker's children in alphabetical order, and keeping that
    order costs nothing for the other levels.
    """
    node = parent
    for name in path:
        found = next((c for c in node if c.tag == core(name)), None)
        if found is None:
            found = etree.Element(core(name))
            after = next((c for c in node if (local_name(c) or "") > name), None)
            if after is None:
                node.append(found)
            else:
                # A comment right above a sibling describes that sibling: stay above the comment.
                while (previous := after.getprevious()) is not None and local_name(previous) is None:
                    after = previous
                after.addprevious(found)
        node = found
    return node


def replace_run(parent: etree._Element, old: list[etree._Element], new: list[etree._Element]) -> None:
    """Replace the ``old`` children by ``new``, where the first of ``old`` stood (else at the end)."""
    index = parent.index(old[0]) if old else len(parent)
    for child in old:
        parent.remove(child)
    for offset, child in enumerate(new):
        parent.insert(index + offset, child)
