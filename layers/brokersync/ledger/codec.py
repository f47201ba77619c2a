"""Compact encoding of ULID sync keys inside ledger items.

Cost is item size (1 write unit per KB), so a ULID is stored as its 16 binary bytes
instead of 26 characters.
"""

from __future__ import annotations

from ulid import ULID


def ulid_bytes(key: str) -> bytes:
    return ULID.from_str(key).bytes


def ulid_from_bytes(raw: bytes) -> str:
    return str(ULID.from_bytes(raw))
