"""Engine time: integer nanoseconds.

The engine never reads a clock.  Instants are ``int`` nanoseconds since the engine's epoch
(whatever the shell chose as zero); durations are ``int`` nanoseconds.  The Python API speaks
float seconds, converted once at the boundary by the helpers here.
"""

from __future__ import annotations

import math
from decimal import Decimal

from cronoq.errors import ArgumentTypeError
from cronoq.seconds import MAX_NS, MAX_SECONDS, NS, valid_seconds

__all__ = [
    "MAX_NS",
    "MAX_SECONDS",
    "MS",
    "NS",
    "US",
    "check_seconds",
    "next_backoff",
    "opt_seconds_to_ns",
    "seconds_to_ns",
    "show_number",
    "to_ns",
    "to_seconds",
    "valid_seconds",
]

MS = 1_000_000
US = 1_000

# MAX_NS (2**62 ns, about 146 years) is the longest duration the engine keeps: any finite
# duration is accepted (docs/reference/behaviour.md#task-fields) and longer ones are cut to it
# (cronoq.seconds, a leaf module that errors.py can import too).


def show_number(value: object) -> str:
    """A number as the reference's messages print it (``(got <v>)``), as the published
    implementation does: integral floats without ``.0`` (``-1``), ``NaN``/``inf``/``-inf``, no
    exponent (``0.0000001``); anything else as its ``repr``."""
    if isinstance(value, float):
        if math.isnan(value):
            return "NaN"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        if value.is_integer():
            return "-0" if value == 0 and math.copysign(1.0, value) < 0 else str(int(value))
        return format(Decimal(repr(value)), "f")
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return repr(value)


def check_seconds(name: str, value: object) -> float:
    """Validate a duration in seconds: finite and >= 0, else the documented ValueError.  Durations
    beyond :data:`MAX_SECONDS` are cut to it."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ArgumentTypeError(f"{name} must be a finite, non-negative number of seconds (got {value!r})")
    v = valid_seconds(value)
    if v is None:
        raise ValueError(
            f"{name} must be a finite, non-negative number of seconds (got {show_number(value)})"
        )
    return v


def next_backoff(delay: float, lo: float, hi: float) -> float:
    """The delay after ``delay`` in an exponential backoff: doubled, kept within [lo, hi].

    The reconnect and store-retry loops of the shells step with it; a task's retry policy
    has its own closed form with seeded jitter (``RetryPolicy.delay``).
    """
    return min(max(delay * 2, lo), hi)


def to_ns(seconds: float) -> int:
    """Seconds (float) to integer nanoseconds, rounded to the nearest ns."""
    return round(seconds * NS)


def seconds_to_ns(name: str, value: object) -> int:
    """Validate a duration in seconds and convert it to ns."""
    return to_ns(check_seconds(name, value))


def opt_seconds_to_ns(name: str, value: object) -> int | None:
    return None if value is None else seconds_to_ns(name, value)


def to_seconds(ns: int) -> float:
    return ns / NS
