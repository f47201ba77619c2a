"""Feeding the reconciliation's purge list back to the ledger, so the purge loop removes what advisories missed.

The reconciliation lists DR messages that should not be there: consumed per the ledger but
still on DR (``reason = "ledger"``: a copy that arrived after the key was given up on, a
bridge redelivery after the purge), or gone from the primary with no ledger record at all
(``reason = "gone_from_primary"``: a console delete, an advisory lost in a primary restart).

The invariant decides what may be recorded: only an exact message id is ever made pending.
A ``ledger`` row names no message (the snapshot keys messages by sync key, and two messages
can share one), so its message ids are read from the ledger itself, which recorded each
consumed message with its id; a ULID the ledger cannot name is skipped and counted. A
``gone_from_primary`` row carries the DR copy's own id (the reconciliation lists only copies
that came through the copy path, never a message produced or stranded on DR itself).
Either way the entry is recorded as consumed now, so the purge treats it as new work.
"""

from __future__ import annotations

import json
import logging
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import timedelta

from brokersync.keys import InvalidKeyError, key_identity, key_kind
from brokersync.ledger.base import LedgerEntry, LedgerStore

logger = logging.getLogger(__name__)

#: How far after a ULID's creation its consumed entries are searched (as ``was_consumed``).
CONSUMED_WINDOW = timedelta(hours=24)
#: Entries recorded per ledger call.
BATCH = 500


#: The reasons the reconciliation job gives in its purge list (``jobs/reconcile``; tested against).
PURGE_REASONS = frozenset({"ledger", "gone_from_primary"})
#: The reason of a line that is not a purge-list row: counted, never recorded.
MALFORMED = "malformed"


@dataclass(frozen=True)
class PurgeListRow:
    queue: str
    key: str
    message_id: str | None
    reason: str


#: What a line that is no purge-list row, or a part that cannot be read, becomes.
MALFORMED_ROW = PurgeListRow("", "", None, MALFORMED)


def purge_list_row(line: str | bytes) -> PurgeListRow:
    """One JSON line of the purge list. A line that is not a row comes back with reason
    :data:`MALFORMED`, which the repair counts and never records: one bad line must not stop
    the rows after it."""
    try:
        row = json.loads(line)
    except (ValueError, RecursionError) as e:
        logger.warning("purge-list line is not JSON: %s", e)
        return MALFORMED_ROW
    if isinstance(row, dict):
        queue, key, message_id, reason = (row.get(f) for f in ("queue", "key", "message_id", "reason"))
        texts = isinstance(queue, str) and bool(queue) and isinstance(key, str) and isinstance(reason, str)
        if texts and (message_id is None or isinstance(message_id, str)):
            return PurgeListRow(queue, key, message_id, reason)
    logger.warning("purge-list line is not a row of queue, key, message_id and reason: %.200r", line)
    return MALFORMED_ROW


@dataclass
class RepairReport:
    recorded: int = 0
    skipped: Counter[str] = field(default_factory=Counter)


def repair_from_purge_list(
    ledger: LedgerStore, rows: Iterable[PurgeListRow], *, window: timedelta = CONSUMED_WINDOW
) -> RepairReport:
    """Record every purge-list row that names an exact message as pending; count the rest by why.

    The ``ledger`` rows that name no message are looked up ``BATCH`` keys of a queue at a time
    (``consumed_entries_of``): each key's window is a day of its queue's ledger, and the keys
    of one reconciliation run were made within hours of each other, so one by one they read
    mostly the same items again.
    """
    report = RepairReport()
    batches: dict[str, list[LedgerEntry]] = defaultdict(list)
    lookups: dict[str, list[str]] = defaultdict(list)

    def add(queue: str, entries: list[LedgerEntry]) -> None:
        for entry in entries:
            batches[queue].append(entry)
            if len(batches[queue]) >= BATCH:
                report.recorded += _flush(ledger, queue, batches.pop(queue))

    for row in rows:
        exact = _exact_entries(row, report)
        if exact is not None:
            add(row.queue, exact)
            continue
        lookups[row.queue].append(row.key)
        if len(lookups[row.queue]) >= BATCH:
            add(row.queue, _looked_up(ledger, row.queue, lookups.pop(row.queue), window, report))
    for queue, keys in lookups.items():
        add(queue, _looked_up(ledger, queue, keys, window, report))
    for queue, entries in batches.items():
        report.recorded += _flush(ledger, queue, entries)
    if report.skipped:
        logger.warning("purge-list rows not recorded: %s", dict(report.skipped))
    return report


def _exact_entries(row: PurgeListRow, report: RepairReport) -> list[LedgerEntry] | None:
    """The row's entry when it names its message exactly, [] when it is skipped (and counted), None when only
    the ledger can name its messages (a valid ULID of a ``ledger`` row)."""
    if row.reason not in PURGE_REASONS:  # a line that was no row, or a reason this code does not know
        report.skipped[MALFORMED] += 1
        return []
    try:
        key, message_id = key_identity(row.key, key_kind(row.key), row.message_id or None)
    except InvalidKeyError:
        report.skipped["invalid"] += 1
        return []
    if message_id is not None:
        return [LedgerEntry(key, 0, message_id)]
    if row.reason != "ledger":
        report.skipped["no-message-id"] += 1
        return []
    return None


def _looked_up(
    ledger: LedgerStore, queue: str, keys: list[str], window: timedelta, report: RepairReport
) -> list[LedgerEntry]:
    """The consumed messages the ledger recorded under ``keys`` (each a row: a key twice counts twice)."""
    found = ledger.consumed_entries_of(queue, list(dict.fromkeys(keys)), window)
    entries = []
    for key in keys:
        if found.get(key):
            entries.extend(found[key])
        else:
            report.skipped["not-in-ledger"] += 1
    return entries


def _flush(ledger: LedgerStore, queue: str, entries: list[LedgerEntry]) -> int:
    ledger.add_pending(queue, entries)
    return len(entries)
