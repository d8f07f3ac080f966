"""Fixed-start reservation arithmetic (docs/reference/behaviour.md#fixed-starts), pure functions over windows.

A fixed-start task reserves ``[start - tolerance, start + expected + tolerance]`` in its
pool until it is dispatched or ends.  A pool accepts at most
``limit = max(1, floor(max * reservable_fraction))`` overlapping windows: a new window
conflicts when, at some instant strictly inside it, ``limit`` existing windows already
overlap (intervals are open, so windows that only touch do not overlap).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from cronoq.engine.model import TaskState

#: How long before its start a free slot is held for a fixed-start task
#: (docs/reference/behaviour.md#fixed-starts, fixed).
MAX_HOLD_NS = 1_000_000_000


class FixedStart:
    """Per-task fixed-start bookkeeping (only fixed-start tasks carry one)."""

    __slots__ = ("counted", "hi", "holding", "in_due", "lo", "prev", "recurring", "reserved", "start")

    def __init__(self, start: int, lo: int, hi: int) -> None:
        self.start = start
        self.lo = lo
        self.hi = hi
        self.holding = False  # a slot of the pool is held for it
        self.reserved = False  # its window counts against the pool's limit
        self.counted = False  # counted in fixed_start_hit_rate
        self.in_due = False  # ready, queued in the pool's due heap (not in a class lane)
        self.recurring: str | None = None  # name of the schedule that materialized it
        self.prev: TaskState | None = None  # overlap=skip: the previous occurrence, checked when due


def reservation_limit(max_capacity: int, fraction: float) -> int:
    return max(1, math.floor(max_capacity * fraction))


def max_overlap(windows: Iterable[tuple[int, int]], lo: int, hi: int) -> int:
    """The largest number of ``windows`` that overlap at one instant inside open ``(lo, hi)``."""
    points: list[tuple[int, int]] = []
    for a, b in windows:
        a2 = a if a > lo else lo
        b2 = b if b < hi else hi
        if a2 < b2:  # open intervals: a positive-length intersection is needed
            points.append((a2, 1))
            points.append((b2, -1))
    if not points:
        return 0
    points.sort()  # at equal times, ends (-1) sort before starts (+1)
    best = cur = 0
    for _, d in points:
        cur += d
        if cur > best:
            best = cur
    return best
