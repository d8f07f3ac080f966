"""Statistics the engine keeps: learned durations and windowed quality figures.

* :class:`DurationModel` — EWMA (alpha 0.2) of successful run times per (pool, kind).
* :class:`LogHistogram` — a sparse log-linear histogram of ns values (8 sub-buckets per
  power of two, so quantiles are within ~6%); bounded memory whatever the sample count.
* :class:`PoolWindow` — a ring of one-second slots covering the quality window (SPEC §14):
  counters and histograms per slot; a snapshot merges the live slots.  Recording a sample is
  O(1); nothing keeps a list of samples.
* :class:`CapacityIntegral` — capacity as a step function over time: worker-seconds since
  start and provisioned slot-time inside the window.
"""

from __future__ import annotations

from collections.abc import Iterable

from cronoq.engine.time import NS

SUB_BITS = 3
SUB = 1 << SUB_BITS


def _bucket(v: int) -> int:
    if v < SUB:
        return v if v > 0 else 0
    b = v.bit_length()
    return ((b - SUB_BITS) << SUB_BITS) + ((v >> (b - SUB_BITS - 1)) & (SUB - 1)) + SUB


def _bucket_value(i: int) -> int:
    """A representative (midpoint) value of bucket ``i``."""
    if i < SUB:
        return i
    i -= SUB
    octave = (i >> SUB_BITS) + SUB_BITS
    sub = i & (SUB - 1)
    lo = (1 << (octave - 1)) + (sub << (octave - 1 - SUB_BITS))
    width = 1 << (octave - 1 - SUB_BITS)
    return lo + width // 2


class LogHistogram:
    __slots__ = ("counts", "n", "total")

    def __init__(self) -> None:
        self.counts: dict[int, int] = {}
        self.n = 0
        self.total = 0

    def add(self, v: int) -> None:
        if v < SUB:
            b = v if v > 0 else 0
        else:
            n = v.bit_length()
            b = ((n - SUB_BITS) << SUB_BITS) + ((v >> (n - SUB_BITS - 1)) & (SUB - 1)) + SUB
        c = self.counts
        c[b] = c.get(b, 0) + 1
        self.n += 1
        self.total += v

    def merge(self, other: LogHistogram) -> None:
        c = self.counts
        for b, k in other.counts.items():
            c[b] = c.get(b, 0) + k
        self.n += other.n
        self.total += other.total

    def quantile(self, q: float) -> int:
        if self.n == 0:
            return 0
        rank = q * self.n
        seen = 0
        last = 0
        for b in sorted(self.counts):
            seen += self.counts[b]
            last = b
            if seen >= rank:
                break
        return _bucket_value(last)

    def mean(self) -> float:
        return self.total / self.n if self.n else 0.0


class DurationModel:
    """EWMA of successful run times per (pool index, kind), in ns."""

    __slots__ = ("alpha", "values")

    def __init__(self, alpha: float = 0.2) -> None:
        self.alpha = alpha
        self.values: dict[object, float] = {}

    def observe(self, key: object, run_ns: int) -> None:
        v = self.values.get(key)
        self.values[key] = float(run_ns) if v is None else v + self.alpha * (run_ns - v)

    def get(self, key: object) -> float | None:
        return self.values.get(key)


class Slot:
    __slots__ = (
        "busy_ns",
        "dispatched",
        "end",
        "failed",
        "fs_hits",
        "fs_total",
        "jumped",
        "retried",
        "run",
        "second",
        "start",
        "succeeded",
        "useful_ns",
        "wait",
    )

    def __init__(self, second: int) -> None:
        self.second = second
        self.start = second * NS
        self.end = self.start + NS
        self.dispatched = 0
        self.succeeded = 0
        self.failed = 0
        self.retried = 0
        self.jumped = 0
        self.fs_total = 0
        self.fs_hits = 0
        self.busy_ns = 0
        self.useful_ns = 0
        self.wait = LogHistogram()
        self.run = LogHistogram()


class PoolWindow:
    """Sliding window of one-second slots (``window_ns`` long)."""

    __slots__ = ("cur", "nslots", "slots")

    def __init__(self, window_ns: int) -> None:
        self.nslots = max(1, -(-window_ns // NS))
        self.slots: list[Slot | None] = [None] * self.nslots
        self.cur = Slot(-(1 << 40))  # the slot of the latest sample (hot-path cache)

    def slot(self, now: int) -> Slot:
        cur = self.cur
        if cur.start <= now < cur.end:
            return cur
        sec = now // NS
        i = sec % self.nslots
        s = self.slots[i]
        if s is None or s.second != sec:
            s = Slot(sec)
            self.slots[i] = s
        self.cur = s
        return s

    def live(self, now: int) -> Iterable[Slot]:
        sec = now // NS
        lo = sec - self.nslots
        for s in self.slots:
            if s is not None and lo < s.second <= sec:
                yield s


class CapacityIntegral:
    """Capacity over time as a step function: ``points`` are (since_ns, capacity)."""

    __slots__ = ("capacity", "last_at", "points", "total_ns")

    def __init__(self, now: int, capacity: int) -> None:
        self.points: list[tuple[int, int]] = [(now, capacity)]
        self.total_ns = 0  # capacity-ns accumulated up to last_at
        self.last_at = now
        self.capacity = capacity

    def change(self, now: int, capacity: int, window_ns: int) -> None:
        self.total_ns += self.capacity * (now - self.last_at)
        self.last_at = now
        self.capacity = capacity
        self.points.append((now, capacity))
        # keep one point at or before the window start
        lo = now - window_ns
        pts = self.points
        while len(pts) > 1 and pts[1][0] <= lo:
            pts.pop(0)

    def worker_ns(self, now: int) -> int:
        """Capacity-ns since start."""
        return self.total_ns + self.capacity * (now - self.last_at)

    def provisioned_ns(self, now: int, window_ns: int) -> int:
        """Capacity-ns inside ``[now - window, now]``."""
        lo = now - window_ns
        total = 0
        pts = self.points
        for i, (t, c) in enumerate(pts):
            end = pts[i + 1][0] if i + 1 < len(pts) else now
            start = t if t > lo else lo
            if end > start:
                total += c * (end - start)
        return total
