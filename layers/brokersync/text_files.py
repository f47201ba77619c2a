"""Reading a file someone named (a topology, a base configuration, prices): bounded and UTF-8.

A path such as ``/dev/zero`` or a FIFO would otherwise be read until memory ran out, and a
binary file would end in a codec's traceback; callers turn the errors into their own
(``TopologyError``, the CLI's exit 2).
"""

from __future__ import annotations

from pathlib import Path

#: Larger than any broker configuration or price file; Amazon MQ's own limit on a
#: configuration is far below it.
MAX_INPUT_BYTES = 4 << 20


def read_text_file(path: str | Path, *, limit: int = MAX_INPUT_BYTES) -> str:
    """The text of ``path``; ``OSError`` if it cannot be read, ``ValueError`` if it is too large or not UTF-8."""
    with Path(path).open("rb") as file:
        raw = file.read(limit + 1)
    if len(raw) > limit:
        raise ValueError(f"larger than {limit:,} bytes")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ValueError(f"not UTF-8 text ({e.reason} at byte {e.start})") from e
