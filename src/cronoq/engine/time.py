"""Engine time: integer nanoseconds.

The engine never reads a clock.  Instants are ``int`` nanoseconds since the engine's epoch
(whatever the shell chose as zero); durations are ``int`` nanoseconds.  The Python API speaks
float seconds, converted once at the boundary by the helpers here.
"""

from __future__ import annotations

import math
from decimal import Decimal

from cronoq.errors import ArgumentTypeError

NS = 1_000_000_000
MS = 1_000_000
US = 1_000

#: The longest duration the engine keeps (2**62 ns, about 146 years): any finite duration is
#: accepted (docs/reference/behaviour.md#task-fields) and longer ones are cut to this, so that instants and
#: stored Unix nanoseconds (now + duration) stay within int64 — "never" in practice.
MAX_NS = 1 << 62
MAX_SECONDS = MAX_NS / NS


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
    try:
        v = float(value)
    except OverflowError:  # an int beyond float range
        v = math.inf
    if not math.isfinite(v) or v < 0:
        got = show_number(value)
        raise ValueError(f"{name} must be a finite, non-negative number of seconds (got {got})")
    return v if v <= MAX_SECONDS else MAX_SECONDS


def valid_seconds(value: object) -> float | None:
    """``value`` as a duration in seconds (cut to :data:`MAX_SECONDS`), or None when it is not
    a finite, non-negative number (e.g. a ``Retryable.retry_after`` to ignore)."""
    try:
        return check_seconds("value", value)
    except ValueError:
        return None


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
