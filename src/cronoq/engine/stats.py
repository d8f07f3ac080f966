"""Statistics the engine keeps: learned durations and windowed quality figures.

* :class:`DurationModel` — EWMA (alpha :data:`RUN_EWMA_ALPHA`) of successful run times per (pool, kind).
* :class:`LogHistogram` — a sparse log-linear histogram of ns values (8 sub-buckets per
  power of two, so quantiles are within ~6%); bounded memory whatever the sample count.
* :class:`PoolWindow` — a ring of one-second slots covering the quality window
  (docs/reference/behaviour.md#metrics): counters and histograms per slot.  Recording a sample is O(1);
  nothing keeps a list of samples.  A snapshot adds the current slot to the sum of the earlier live slots,
  which is computed once per second (earlier slots never change), not per snapshot.
* :class:`CapacityIntegral` — capacity as a step function over time: worker-seconds since
  start and provisioned slot-time inside the window.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence
from itertools import accumulate
from typing import TYPE_CHECKING, Final

from cronoq.engine.time import NS

if TYPE_CHECKING:
    from cronoq.engine.model import TaskOptions

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
            n = v.bit_length()  # (_bucket's formula, its constants folded)
            b = (n << 3) - 16 + ((v >> (n - 4)) & 7)
        c = self.counts
        c[b] = c.get(b, 0) + 1
        self.n += 1
        self.total += v

    def merge(self, other: LogHistogram) -> None:
        c = self.counts
        if not c:
            self.counts = dict(other.counts)
        else:
            for b, k in other.counts.items():
                c[b] = c.get(b, 0) + k
        self.n += other.n
        self.total += other.total

    def quantile(self, q: float) -> int:
        return self.quantiles((q,))[0]

    def quantiles(self, qs: Sequence[float]) -> list[int]:
        """For each q, the value of the first bucket whose cumulative count reaches q * n."""
        if self.n == 0:
            return [0] * len(qs)
        keys = sorted(self.counts)
        cum = list(accumulate(map(self.counts.__getitem__, keys)))
        last = len(keys) - 1
        return [_bucket_value(keys[min(bisect_left(cum, q * self.n), last)]) for q in qs]

    def mean(self) -> float:
        return self.total / self.n if self.n else 0.0


#: The weight of the newest successful run in the engine's run-time averages: the per-(pool,
#: kind) :class:`DurationModel` and the pool's own average (``PoolState.run_ewma``, the
#: autoscaler's service time).  0.2 forgets a change of run time within about ten runs.
RUN_EWMA_ALPHA: Final = 0.2


class DurationModel:
    """EWMA of successful run times per (pool index, kind), in ns."""

    __slots__ = ("alpha", "defaults", "keys", "values")

    def __init__(self, alpha: float = RUN_EWMA_ALPHA, defaults: Sequence[int] = ()) -> None:
        self.alpha = alpha
        self.values: dict[object, float] = {}
        self.defaults = tuple(defaults)  # per pool index: its default_duration
        self.keys: dict[tuple[int, str], tuple[int, str]] = {}

    def key(self, pool_index: int, kind: str) -> tuple[int, str]:
        """The one ``(pool index, kind)`` tuple every options object of that pair notes as its
        ``stats_key`` (keyed resources make an options object per key: they share it, and
        its lookups in ``values`` match by identity)."""
        k = (pool_index, kind)
        return self.keys.setdefault(k, k)

    def expected(self, opts: TaskOptions) -> int:
        """docs/reference/behaviour.md#expected-duration: the hint, else the learned EWMA for
        (pool, kind), else the pool's default duration (ns)."""
        if opts.duration_hint is not None:
            return opts.duration_hint
        learned = self.values.get(opts.stats_key)
        if learned is not None:
            return int(learned)
        return self.defaults[opts.pool_index]

    def observe(self, key: object, run_ns: int) -> None:
        v = self.values.get(key)
        self.values[key] = float(run_ns) if v is None else v + self.alpha * (run_ns - v)

    def get(self, key: object) -> float | None:
        return self.values.get(key)


class WindowTotals:
    """The sum of some slots: counters and merged histograms."""

    __slots__ = (
        "busy_ns",
        "dispatched",
        "failed",
        "fs_hits",
        "fs_total",
        "jumped",
        "retried",
        "run",
        "succeeded",
        "useful_ns",
        "wait",
    )

    def __init__(self) -> None:
        self.dispatched = self.succeeded = self.failed = self.retried = self.jumped = 0
        self.fs_total = self.fs_hits = self.busy_ns = self.useful_ns = 0
        self.wait = LogHistogram()
        self.run = LogHistogram()

    def add(self, s: WindowTotals) -> None:
        self.dispatched += s.dispatched
        self.succeeded += s.succeeded
        self.failed += s.failed
        self.retried += s.retried
        self.jumped += s.jumped
        self.fs_total += s.fs_total
        self.fs_hits += s.fs_hits
        self.busy_ns += s.busy_ns
        self.useful_ns += s.useful_ns
        self.wait.merge(s.wait)
        self.run.merge(s.run)


class Slot(WindowTotals):
    """The samples of one second of the window."""

    __slots__ = ("end", "second", "start")

    def __init__(self, second: int) -> None:
        super().__init__()
        self.second = second
        self.start = second * NS
        self.end = self.start + NS


class PoolWindow:
    """Sliding window of one-second slots (``window_ns`` long).

    Samples only ever go to the slot of ``now``'s second, so the slots of earlier seconds are
    final: :meth:`totals` sums them once per second (``_done``) and adds only the current slot
    on each call, instead of merging every slot's histograms on every snapshot.
    """

    __slots__ = ("_done", "_done_sec", "cur", "nslots", "slots")

    def __init__(self, window_ns: int) -> None:
        self.nslots = max(1, -(-window_ns // NS))
        self.slots: list[Slot | None] = [None] * self.nslots
        self.cur = Slot(-(1 << 40))  # the slot of the latest sample (hot-path cache)
        self._done = WindowTotals()  # the live slots before second _done_sec
        self._done_sec: int | None = None

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
        done = self._done_sec
        if done is not None and sec < done:  # (time never goes back in the engine; be safe)
            self._done_sec = None
        return s

    def totals(self, now: int) -> WindowTotals:
        """The sum of the live slots (those of the last ``nslots`` seconds up to ``now``)."""
        sec = now // NS
        if self._done_sec != sec:
            lo = sec - self.nslots
            done = WindowTotals()
            for s in self.slots:
                if s is not None and lo < s.second < sec:
                    done.add(s)
            self._done = done
            self._done_sec = sec
        out = WindowTotals()
        out.add(self._done)
        s = self.slots[sec % self.nslots]
        if s is not None and s.second == sec:
            out.add(s)
        return out


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
