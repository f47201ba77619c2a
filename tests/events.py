"""The one loader of sample events: tests use the same JSON files as `sam local invoke -e`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

EVENTS = Path(__file__).resolve().parent.parent / "events"


def load_event(name: str) -> dict[str, Any]:
    """``events/<name>.json`` as a dict; a fresh copy each call, so tests may mutate it."""
    return json.loads((EVENTS / f"{name}.json").read_text(encoding="utf-8"))
