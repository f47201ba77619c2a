"""Compact encodings of sync keys inside ledger items.

Cost is item size (1 write unit per KB), so keys are packed: a ULID is 16 bytes in binary
instead of 26 characters, and message ids, which share a long connection prefix, are
zlib-compressed as one newline-joined block. Consume times are stored per key as 32-bit
millisecond offsets from the item's base time, so a time-range read is exact per key.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Sequence

from ulid import ULID

_OFFSET = struct.Struct(">I")


def pack_ulids(keys: Sequence[str]) -> bytes:
    return b"".join(ULID.from_str(k).bytes for k in keys)


def unpack_ulids(blob: bytes) -> list[str]:
    return [str(ULID.from_bytes(blob[i : i + 16])) for i in range(0, len(blob), 16)]


def pack_message_ids(keys: Sequence[str]) -> bytes:
    return zlib.compress("\n".join(keys).encode(), 9) if keys else b""


def unpack_message_ids(blob: bytes) -> list[str]:
    return zlib.decompress(blob).decode().split("\n") if blob else []


def pack_offsets(offsets: Sequence[int]) -> bytes:
    return b"".join(_OFFSET.pack(o) for o in offsets)


def unpack_offsets(blob: bytes) -> list[int]:
    return [_OFFSET.unpack_from(blob, i)[0] for i in range(0, len(blob), 4)]


def ulid_bytes(key: str) -> bytes:
    return ULID.from_str(key).bytes


def ulid_from_bytes(raw: bytes) -> str:
    return str(ULID.from_bytes(raw))
