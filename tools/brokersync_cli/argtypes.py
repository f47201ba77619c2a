"""Argument types for the CLI's numbers: a value that cannot be meant is a usage error (exit 2).

A negative rate priced a month at minus a dollar, a zero timeout gave up before the first
poll, and ``nan`` passes every comparison that is written as ``x < 0``. Each type states what
it accepts in its message, so the user sees the fix, not a traceback.
"""

from __future__ import annotations

import argparse
import math
import re
from collections.abc import Callable


def _number(text: str, what: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of {what}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"{text} is not a finite number of {what}")
    return value


#: The most msg/s ``brokersync cost`` takes: well above what one Amazon MQ broker ingests, and
#: low enough that every line of the estimate stays a finite number of dollars at the default prices.
MAX_COST_RATE = 1_000_000.0


def positive(what: str, *, most: float | None = None) -> Callable[[str], float]:
    """More than 0 (a rate, a duration, a timeout, a poll interval), and at most ``most`` when given.

    A bound keeps a figure derived from the value finite: ``brokersync cost --rate 1e308``
    priced a month at ``Infinity``, which is not JSON.
    """

    def parse(text: str) -> float:
        value = _number(text, what)
        if value <= 0:
            raise argparse.ArgumentTypeError(f"{text} is not more than 0 {what}")
        if most is not None and value > most:
            raise argparse.ArgumentTypeError(f"{text} is more than {most:,.0f} {what}")
        return value

    parse.__name__ = f"positive {what}"  # argparse names the type in its message
    return parse


def non_negative(what: str) -> Callable[[str], float]:
    """0 or more (a warm-up, a moment into the traffic)."""

    def parse(text: str) -> float:
        value = _number(text, what)
        if value < 0:
            raise argparse.ArgumentTypeError(f"{text} is not 0 or more {what}")
        return value

    parse.__name__ = f"non-negative {what}"
    return parse


def _whole(text: str, what: str, low: int, high: int | None = None) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not {what}") from None
    if value < low or (high is not None and value > high):
        bounds = f"{low} or more" if high is None else f"{what} ({low}-{high})"
        raise argparse.ArgumentTypeError(f"{text} is not {bounds}")
    return value


def count(text: str) -> int:
    """A whole number of 1 or more (messages in a burst)."""
    return _whole(text, "a whole number", 1)


def port(text: str) -> int:
    """A TCP port a local broker or server can listen on."""
    return _whole(text, "a port", 1, 65535)


#: The stacks' PairName, as template.yaml's AllowedPattern says (a test holds the two equal): it
#: names the ledger table, the state machines and the SSM parameters the commands look up.
PAIR_NAME_PATTERN = r"^[a-z][a-z0-9-]{0,31}$"


def pair_name(text: str) -> str:
    """A PairName the stacks could have been deployed with; anything else names nothing to find."""
    if not re.fullmatch(PAIR_NAME_PATTERN, text, re.ASCII):
        raise argparse.ArgumentTypeError(
            f"{text[:40]!r} is not a PairName: lower-case letters, digits and hyphens, starting with a letter "
            "(at most 32), as the stacks were deployed with"
        )
    return text
