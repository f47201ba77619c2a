"""A clock a test sets by hand: what every clock-taking part of BrokerSync accepts (``() -> float``)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class FakeClock:
    """Seconds since the epoch (or any origin the code under test takes), moved only by the test."""

    now: float = 100.0

    def __call__(self) -> float:
        return self.now
