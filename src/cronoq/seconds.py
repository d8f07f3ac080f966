"""Durations in seconds as every layer reads them: a leaf module (it imports nothing of cronoq).

A duration is a finite, non-negative ``int`` or ``float`` (never a ``bool``); the longest kept
is :data:`MAX_SECONDS` (2**62 ns, about 146 years), longer ones are cut to it so that instants
and stored Unix nanoseconds (now + duration) stay within int64.  :func:`valid_seconds` is the
one rule: :func:`cronoq.engine.time.check_seconds` raises the documented errors where it says
None, and :func:`cronoq.errors.outcome_of` ignores a ``Retryable.retry_after`` it rejects.
"""

from __future__ import annotations

import math

__all__ = ["MAX_NS", "MAX_SECONDS", "NS", "valid_seconds"]

#: Nanoseconds per second.
NS = 1_000_000_000

#: The longest duration the engine keeps, in ns (docs/reference/behaviour.md#task-fields).
MAX_NS = 1 << 62

#: :data:`MAX_NS` in seconds.
MAX_SECONDS = MAX_NS / NS


def valid_seconds(value: object) -> float | None:
    """``value`` as a duration in seconds (cut to :data:`MAX_SECONDS`), or None when it is not
    a finite, non-negative number (e.g. a ``Retryable.retry_after`` to ignore)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        v = float(value)
    except OverflowError:  # an int beyond float range
        return None
    if not math.isfinite(v) or v < 0:
        return None
    return v if v <= MAX_SECONDS else MAX_SECONDS
