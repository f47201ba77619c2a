"""Selectors that name many message ids in few bytes, exactly: ActiveMQ's ``REGEX`` over ``JMSMessageID``.

STOMP caps a selector at one 10 KB header line, which holds about 210 message ids as a
``JMSMessageID IN (...)`` list (:mod:`brokersync.purge.selectors`). Each purge subscription
costs the DR broker scans of its whole backlog (decisions 0015 and 0058), so ids per
subscription are what the purge's cost at depth turns on. A producer's ids differ only in
their last field, a decimal sequence number, so one pattern per producer id, with the
sequence numbers as digit classes, names hundreds of them in a few hundred bytes.

The pattern must match exactly the ids given and nothing else, or the purge is delivered a
message it may not remove (whose redelivery counter the broker then raises). It is exact by
construction:

* ``\\A`` and ``\\z`` anchor it (``$`` would also match before a final line terminator);
* every character of the producer id that is not an ASCII letter or digit is escaped, and a
  producer id may hold only ``[A-Za-z0-9._:-]`` (what :mod:`brokersync.keys` accepts), so
  no character of it is special;
* a sequence number is written digit for digit, only its last digit as a class of the
  digits present, and only canonical numbers are written (``0`` or no leading zero, no
  sign), so ``12[05]`` is exactly ``120`` and ``125``: not ``12``, not ``1205``, not
  ``0120``.

An id this builder cannot write exactly (a sign, a leading zero) is returned for a list
selector. ActiveMQ evaluates ``REGEX(pattern, value)`` with ``java.util.regex``'s
``Matcher.find()``; the constructs used here mean the same in Python's :mod:`re`, which the
property tests check the patterns with.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Sequence

from brokersync.keys import validate_key
from brokersync.purge.selectors import MAX_HEADER_LINE_BYTES, stomp_escaped_length

_PRODUCER_ID = re.compile(r"[A-Za-z0-9._:-]+", re.ASCII)
_CANONICAL_SEQUENCE = re.compile(r"0|[1-9][0-9]{0,18}", re.ASCII)
_HEADER_NAME = "selector:"


def split_message_id(message_id: str) -> tuple[str, str] | None:
    """``(producer id, sequence)`` when a pattern can name ``message_id`` exactly; else None."""
    producer, sep, sequence = message_id.rpartition(":")
    if not sep or not _PRODUCER_ID.fullmatch(producer) or not _CANONICAL_SEQUENCE.fullmatch(sequence):
        return None
    return producer, sequence


def _escaped(text: str) -> str:
    return "".join(ch if ch.isascii() and ch.isalnum() else "\\" + ch for ch in text)


def _digit_class(digits: Iterable[str]) -> str:
    """``[0-35]`` for 0, 1, 2, 3 and 5; a lone digit as itself."""
    present = sorted(set(digits))
    if len(present) == 1:
        return present[0]
    runs: list[str] = []
    start = prev = present[0]
    for digit in [*present[1:], None]:
        if digit is not None and ord(digit) == ord(prev) + 1:
            prev = digit
            continue
        runs.append(start if start == prev else f"{start}{prev}" if ord(prev) == ord(start) + 1 else f"{start}-{prev}")
        if digit is not None:
            start = prev = digit
    return "[" + "".join(runs) + "]"


def sequences_pattern(sequences: Iterable[str]) -> str:
    """An alternation matching exactly the canonical decimal ``sequences``: ``12[05]|7``."""
    by_stem: dict[str, list[str]] = defaultdict(list)
    for sequence in sequences:
        by_stem[sequence[:-1]].append(sequence[-1])
    return "|".join(stem + _digit_class(last) for stem, last in sorted(by_stem.items()))


def regex_selector(message_ids: Sequence[str]) -> str:
    """``REGEX('\\A(?:...)\\z', JMSMessageID)`` matching exactly ``message_ids``, each of which
    :func:`split_message_id` accepts."""
    by_producer: dict[str, list[str]] = defaultdict(list)
    for message_id in message_ids:
        parts = split_message_id(message_id)
        if parts is None:
            raise ValueError(f"{message_id!r} cannot be named exactly by a pattern")
        by_producer[parts[0]].append(parts[1])
    if not by_producer:
        raise ValueError("a selector needs at least one message id")
    alternatives = "|".join(
        f"{_escaped(producer)}\\:(?:{sequences_pattern(sequences)})"
        for producer, sequences in sorted(by_producer.items())
    )
    return f"REGEX('\\A(?:{alternatives})\\z', JMSMessageID)"


def regex_batches(
    message_ids: Iterable[str], *, max_ids: int, max_line_bytes: int = MAX_HEADER_LINE_BYTES
) -> tuple[list[tuple[list[str], str]], list[str]]:
    """``(batches, rest)``: ``(ids, selector)`` pairs of at most ``max_ids`` ids whose header line
    fits, and the ids no pattern can name exactly, for list selectors.

    Every id is validated first (raising ``InvalidKeyError``), duplicates are dropped and order
    is kept, as :func:`brokersync.purge.selectors.selector_batches` does.
    """
    unique = list(dict.fromkeys(validate_key(k, "message-id") for k in message_ids))
    named = [k for k in unique if split_message_id(k) is not None]
    rest = [k for k in unique if split_message_id(k) is None]
    batches: list[tuple[list[str], str]] = []
    start = 0
    while start < len(named):
        size = min(max_ids, len(named) - start)
        while True:
            chunk = named[start : start + size]
            selector = regex_selector(chunk)
            if len(_HEADER_NAME) + stomp_escaped_length(selector) + 1 <= max_line_bytes or size == 1:
                break
            size = max(1, size // 2)
        if len(_HEADER_NAME) + stomp_escaped_length(selector) + 1 > max_line_bytes:
            rest.append(chunk[0])
        else:
            batches.append((chunk, selector))
        start += size
    return batches, rest
