"""engine.stats: the window's totals equal the sum of its live slots, however it is polled."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from cronoq.engine.stats import LogHistogram, PoolWindow, Slot, WindowTotals, _bucket, _bucket_value
from cronoq.engine.time import NS

WINDOW_S = 5


@given(st.integers(min_value=0, max_value=1 << 70))
def test_add_buckets_as_bucket_does(v: int) -> None:
    """``LogHistogram.add`` inlines ``_bucket`` with its constants folded: the same bucket."""
    h = LogHistogram()
    h.add(v)
    assert list(h.counts) == [_bucket(v)]


def naive(w: PoolWindow, now: int) -> WindowTotals:
    """The definition: every slot of the last ``nslots`` seconds up to ``now``, summed."""
    sec = now // NS
    out = WindowTotals()
    for s in w.slots:
        if s is not None and sec - w.nslots < s.second <= sec:
            out.add(s)
    return out


def as_tuple(t: WindowTotals) -> tuple[object, ...]:
    return (
        t.dispatched, t.succeeded, t.failed, t.retried, t.jumped, t.fs_total, t.fs_hits,
        t.busy_ns, t.useful_ns, sorted(t.wait.counts.items()), t.wait.n, t.wait.total,
        sorted(t.run.counts.items()), t.run.n, t.run.total,
    )  # fmt: skip


def record(s: Slot, v: int) -> None:
    s.dispatched += 1
    s.succeeded += v & 1
    s.failed += (v >> 1) & 1
    s.busy_ns += v
    s.wait.add(v)
    s.run.add(v * 3 + 1)


# steps: (advance ns, sample value or None for "take a snapshot here")
steps = st.lists(
    st.tuples(st.integers(0, 3 * NS), st.one_of(st.none(), st.integers(0, 10**9))),
    min_size=1,
    max_size=80,
)


@settings(max_examples=200)
@given(steps)
def test_totals_equal_the_sum_of_live_slots(plan: list[tuple[int, int | None]]) -> None:
    w = PoolWindow(WINDOW_S * NS)
    now = 0
    for dt, v in plan:
        now += dt
        if v is None:
            assert as_tuple(w.totals(now)) == as_tuple(naive(w, now))
        else:
            record(w.slot(now), v)
    assert as_tuple(w.totals(now)) == as_tuple(naive(w, now))
    # polling again in the same second after more samples still sees them
    record(w.slot(now), 7)
    assert as_tuple(w.totals(now)) == as_tuple(naive(w, now))


def test_totals_do_not_alias_the_cached_sum() -> None:
    w = PoolWindow(WINDOW_S * NS)
    record(w.slot(0), 5)
    first = w.totals(NS)  # second 0 is now a finished slot, cached
    first.wait.add(99)
    first.dispatched += 10
    again = w.totals(NS)
    assert again.dispatched == 1 and again.wait.n == 1


def test_samples_leave_the_window_after_it_passes() -> None:
    w = PoolWindow(WINDOW_S * NS)
    record(w.slot(0), 5)
    assert w.totals((WINDOW_S - 1) * NS).dispatched == 1
    assert w.totals(WINDOW_S * NS).dispatched == 0


def test_histogram_quantiles_are_within_the_bucket_precision() -> None:
    h = LogHistogram()
    for v in range(1, 10_001):
        h.add(v * 1000)
    for q, exact in ((0.5, 5_000_000), (0.9, 9_000_000), (0.99, 9_900_000)):
        assert abs(h.quantile(q) - exact) / exact < 0.07


def _quantile_by_walking(h: LogHistogram, q: float) -> int:
    """The definition: walk the buckets in order until the cumulative count reaches q * n."""
    if h.n == 0:
        return 0
    seen, last = 0, 0
    for b in sorted(h.counts):
        seen += h.counts[b]
        last = b
        if seen >= q * h.n:
            break
    return _bucket_value(last)


@settings(max_examples=200)
@given(st.lists(st.integers(0, 10**10), max_size=300), st.lists(st.floats(0.0, 1.0), min_size=1, max_size=6))
def test_quantiles_match_the_walk(values: list[int], qs: list[float]) -> None:
    h = LogHistogram()
    for v in values:
        h.add(v)
    assert h.quantiles(qs) == [_quantile_by_walking(h, q) for q in qs]
    assert [h.quantile(q) for q in qs] == h.quantiles(qs)
