"""Control records: small versioned documents in the ledger table that both regions read.

The roles (who is primary, whether sync runs) and the transition in progress must be seen
by both regions' functions, and the ledger is already a global table in both. Each record is
one item ``R#<name>`` / ``current`` holding a JSON document and a version; every write
states the version it replaces (``ConditionExpression``), so two writers that read the same
version can never both win in one region.

Across regions a global table resolves concurrent writes per item, last writer wins; a
conditional write is evaluated against the replica of the region it is made in. A record
therefore also names its writer, and the reader that finds a record it did not write where
it expected its own (``TransitionConflictError`` at the next conditional write, or a role
record naming another execution) knows it lost. The local world's replication stand-in
resolves the same way (``tools/brokersync_local/replication.py``).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

from pynamodb.attributes import NumberAttribute, UnicodeAttribute
from pynamodb.exceptions import PutError
from pynamodb.models import Model

from brokersync.failover.errors import TransitionConflictError
from brokersync.ledger.dynamodb import PEER_READ, _translate

#: Partition key prefix of control records in the ledger table (see ``ledger/backend.py``).
CONTROL_PREFIX = "R#"
CONTROL_SORT_KEY = "current"


class ControlItem(Model):
    class Meta:
        table_name = "brokersync-ledger"
        max_retry_attempts = 5
        base_backoff_ms = 25

    pk = UnicodeAttribute(hash_key=True)
    sk = UnicodeAttribute(range_key=True)
    doc = UnicodeAttribute()
    version = NumberAttribute()
    writer = UnicodeAttribute(null=True)
    written_at_ms = NumberAttribute(null=True)


def control_model(
    table_name: str, region: str | None = None, host: str | None = None, *, peer: bool = False
) -> type[ControlItem]:
    settings = {"table_name": table_name, "region": region, "host": host, **(PEER_READ if peer else {})}
    meta = type("Meta", (), {**ControlItem.Meta.__dict__, **settings})
    return type("BoundControlItem", (ControlItem,), {"Meta": meta})


@dataclass(frozen=True)
class ControlRecord:
    document: dict[str, Any]
    #: 0 means "never written"; every write makes it one higher.
    version: int
    writer: str = ""
    written_at_ms: int = 0


class ControlRecords:
    """Versioned control documents of one ledger table, read strongly consistent in this region."""

    def __init__(self, model: type[ControlItem]) -> None:
        self.model = model

    def get(self, name: str) -> ControlRecord | None:
        def read() -> ControlItem | None:
            try:
                return self.model.get(CONTROL_PREFIX + name, CONTROL_SORT_KEY, consistent_read=True)
            except self.model.DoesNotExist:
                return None

        item = _translate(read)
        if item is None:
            return None
        return ControlRecord(json.loads(item.doc), int(item.version), item.writer or "", int(item.written_at_ms or 0))

    def put(
        self, name: str, document: dict[str, Any], replaces: int, writer: str, replaces_writer: str | None = None
    ) -> ControlRecord:
        """Write version ``replaces + 1``; :class:`TransitionConflictError` if the record moved on.

        ``replaces_writer`` also names who wrote the version being replaced: after a partition
        two regions can each hold *a* version ``replaces``, written by different transitions,
        and only the one this write was planned from may be replaced.
        """
        item = self.model(
            CONTROL_PREFIX + name,
            CONTROL_SORT_KEY,
            doc=json.dumps(document, sort_keys=True),
            version=replaces + 1,
            writer=writer[:256],
            written_at_ms=int(time.time() * 1000),
        )
        condition = self.model.pk.does_not_exist() if replaces == 0 else self.model.version == replaces
        if replaces and replaces_writer is not None:
            condition &= self.model.writer == replaces_writer[:256]
        try:
            _translate(lambda: item.save(condition=condition))
        except Exception as e:
            cause = e.__cause__ if isinstance(e.__cause__, PutError) else None
            if cause is not None and cause.cause_response_code == "ConditionalCheckFailedException":
                current = self.get(name)
                raise TransitionConflictError(
                    f"the {name} record moved on: expected version {replaces}, found "
                    f"{current.version if current else 0} written by {current.writer if current else '?'}"
                ) from e
            raise
        return ControlRecord(document, replaces + 1, writer, int(item.written_at_ms))
