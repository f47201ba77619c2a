"""What an operator-invoked function takes as its event: a JSON object, or a sentence saying so.

The snapshot, repair and export functions are also invoked by hand (``aws lambda invoke``, the
console's test events). An event that is not an object, such as ``"dr"`` or ``["ORDERS"]``,
would otherwise fail on its first ``event.get`` with ``'str' object has no attribute 'get'``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any


def event_object(event: object, example: Mapping[str, Any]) -> Mapping[str, Any]:
    """``event`` when it is a JSON object; else a ValueError showing what was given and ``example``."""
    if isinstance(event, Mapping):
        return event
    given = json.dumps(event, default=repr)[:200]
    raise ValueError(f"the event must be a JSON object like {json.dumps(example)}, got {given}")
