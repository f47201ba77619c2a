"""JMS selectors that match exactly a list of sync keys, and nothing else.

The selector is the only thing standing between the purge and a message that was never
consumed, so it is built from validated keys only (:mod:`brokersync.keys` refuses anything
with a quote, comma, blank or wildcard) and each key is quoted as a JMS string literal.

ActiveMQ caps one STOMP header line at 10,240 bytes, measured after STOMP 1.2 escaping
(``:`` becomes ``\\c``, so message ids cost more). A key list is split into as few
selectors as fit: 352 ULIDs, or about 225 message ids, per selector.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from brokersync.broker.stomp import stomp_escape
from brokersync.keys import validate_key
from brokersync.topology import SyncKey

#: ActiveMQ's STOMP codec refuses a header line longer than this (measured: DESIGN.md).
MAX_HEADER_LINE_BYTES = 10_240
_HEADER_NAME = "selector:"
_FIELD: dict[SyncKey, str] = {"correlation-id": "JMSCorrelationID", "message-id": "JMSMessageID"}


def stomp_escaped_length(text: str) -> int:
    """Bytes ``text`` takes in a STOMP 1.2 header after escaping (``\\`` ``\\n`` ``\\r`` ``:``)."""
    return len(stomp_escape(text).encode())


def _literal(key: str) -> str:
    return "'" + key.replace("'", "''") + "'"


def selector_for(keys: Sequence[str], kind: SyncKey) -> str:
    """``JMSCorrelationID IN ('k1','k2')``: one selector for keys already known to fit."""
    if not keys:
        raise ValueError("a selector needs at least one key")
    return f"{_FIELD[kind]} IN ({','.join(_literal(k) for k in keys)})"


def selector_line_bytes(keys: Sequence[str], kind: SyncKey) -> int:
    """Bytes the ``selector:`` header line for ``keys`` takes on the wire, its newline included."""
    return len(_HEADER_NAME) + stomp_escaped_length(selector_for(keys, kind)) + 1


def selector_batches(
    keys: Iterable[str], kind: SyncKey, *, max_line_bytes: int = MAX_HEADER_LINE_BYTES
) -> list[tuple[list[str], str]]:
    """Split ``keys`` into ``(keys, selector)`` pairs whose header line fits ``max_line_bytes``.

    Every key is validated first (raising ``InvalidKeyError``) so that no batch is sent
    when any key is bad. Duplicates are dropped; order is kept (oldest keys first).
    """
    unique = list(dict.fromkeys(validate_key(k, kind) for k in keys))
    fixed = len(_HEADER_NAME) + stomp_escaped_length(f"{_FIELD[kind]} IN ()") + 1  # +1: the newline
    batches: list[tuple[list[str], str]] = []
    current: list[str] = []
    used = fixed
    for key in unique:
        cost = stomp_escaped_length(_literal(key)) + (1 if current else 0)
        if fixed + cost > max_line_bytes:
            raise ValueError(f"key {key!r} alone does not fit a {max_line_bytes}-byte selector header")
        if used + cost > max_line_bytes:
            batches.append((current, selector_for(current, kind)))
            current, used = [], fixed
            cost = stomp_escaped_length(_literal(key))
        current.append(key)
        used += cost
    if current:
        batches.append((current, selector_for(current, kind)))
    return batches


def split_off_partial(
    keys: Sequence[str], kind: SyncKey, *, max_line_bytes: int = MAX_HEADER_LINE_BYTES
) -> tuple[list[str], list[str]]:
    """``keys`` as ``(whole, partial)``: the keys that fill whole selectors, then those of a last
    selector that still has room for another key as long as its longest.

    Why: on a deep DR queue every purge subscription costs the broker a pass over the whole
    backlog, whatever its selector holds (decision 0024), so a selector a sixth full costs as
    much as a full one. The caller may keep ``partial`` for a later round, when more keys
    fill it. Raises ``InvalidKeyError`` as :func:`selector_batches` does.
    """
    batches = selector_batches(keys, kind, max_line_bytes=max_line_bytes)
    if not batches:
        return [], []
    last, _selector = batches[-1]
    line = selector_line_bytes(last, kind)
    longest = max(stomp_escaped_length(_literal(k)) for k in last)
    if line + 1 + longest > max_line_bytes:  # +1: the comma before one more key
        return [k for batch, _ in batches for k in batch], []
    return [k for batch, _ in batches[:-1] for k in batch], list(last)
