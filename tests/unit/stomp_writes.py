"""Reading back the bytes a test transport recorded, as the broker would split them into frames."""

from __future__ import annotations

import stomp


def frames_in(*writes: bytes) -> list[stomp.utils.Frame]:
    """The frames in ``writes``, in order (NUL-terminated, optional EOLs between them)."""
    return [
        stomp.utils.parse_frame(chunk.lstrip(b"\n"))
        for data in writes
        for chunk in data.split(b"\x00")
        if chunk.strip(b"\n")
    ]
