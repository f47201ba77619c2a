"""What an operator-invoked function takes as its event: a JSON object, or a sentence saying so.

The snapshot, repair, export and failover-steps functions are also invoked by hand (``aws lambda invoke``, the
console's test events). An event that is not an object, such as ``"dr"`` or ``["ORDERS"]``,
would otherwise fail on its first ``event.get`` with ``'str' object has no attribute 'get'``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any


def event_object(
    event: object, example: Mapping[str, Any], *, error: type[Exception] = ValueError
) -> Mapping[str, Any]:
    """``event`` when it is a JSON object; else ``error`` showing what was given and ``example``.

    ``error`` lets a function raise the class its callers match on (the failover steps raise a
    ``FailoverRequestError``, which the state machines never retry).
    """
    if isinstance(event, Mapping):
        return event
    given = json.dumps(event, default=repr)[:200]
    raise error(f"the event must be a JSON object like {json.dumps(example)}, got {given}")
