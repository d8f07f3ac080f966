"""Engine time: integer nanoseconds.

The engine never reads a clock.  Instants are ``int`` nanoseconds since the engine's epoch
(whatever the shell chose as zero); durations are ``int`` nanoseconds.  The Python API speaks
float seconds, converted once at the boundary by the helpers here.
"""

from __future__ import annotations

import math

NS = 1_000_000_000
MS = 1_000_000
US = 1_000

#: SPEC §17.1: durations are bounded (here, so that ns arithmetic never leaves int64).
MAX_SECONDS = 100 * 365 * 24 * 3600.0


def check_seconds(name: str, value: object) -> float:
    """Validate a duration in seconds: finite and >= 0, else the SPEC's ValueError."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{name} must be a finite, non-negative number of seconds (got {value!r})")
    try:
        v = float(value)
    except OverflowError:  # an int beyond float range
        v = math.inf
    if not math.isfinite(v) or v < 0 or v > MAX_SECONDS:
        raise ValueError(f"{name} must be a finite, non-negative number of seconds (got {value})")
    return v


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
