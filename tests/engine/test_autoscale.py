"""docs/reference/behaviour.md#autoscaling: the queue-pressure autoscaler, under virtual time, plus unit tests
of its formula.

``raw = max(slots(λ·s/target_utilization + B·s/drain_time), max_c slots(B_c·s/slo[c]), busy) + R``
clamped to [min, max], ``slots(x) = 0 if x < 0.01 else ceil(x)``; up by at most
``max(ceil(capacity × 1.0), max_step_up_abs)`` per evaluation; down only to the highest raw of
the stabilization window, by at most ``max_step_down`` per ``cooldown``.

The engine only *emits* ``Scale(pool, desired)``; here the test plays the scaler and applies
each request with ``set_capacity`` (as the in-process SlotScaler does) unless it says otherwise.
"""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cronoq.engine.actions import Scale
from cronoq.engine.autoscale import Autoscaler, slots
from cronoq.engine.config import AutoscaleConfig, PoolConfig
from cronoq.engine.model import TaskOptions
from cronoq.engine.resources import Resource
from cronoq.engine.time import NS
from cronoq.engine.time import to_ns as sec

CRITICAL, HIGH, NORMAL, LOW = 0, 1, 2, 3


def scaled_pool(name="default", *, min=1, max=100, initial=None, default_duration=1.0, **auto):
    auto.setdefault("interval", 1.0)
    return PoolConfig(
        name,
        min=min,
        max=max,
        initial=initial,
        default_duration=default_duration,
        autoscale=AutoscaleConfig(**auto),
    )


class Run:
    """Drive evaluations second by second, playing the scaler."""

    def __init__(self, d, pool="default", apply=True):
        self.d = d
        self.pool = pool
        self.apply = apply
        self.desired: dict[float, int] = {}  # t -> snapshot desired after that evaluation
        self.capacity: dict[float, int] = {}
        self.scales: list[tuple[float, int]] = []

    def until(self, t_end: float, each=None):
        d = self.d
        for _ in range(100_000):  # a step budget: a wake-up that never advances is a failure
            w = d.core.next_wakeup()
            if w is None or w > sec(t_end):
                break
            d.at_ns(w)
            if each is not None:
                each(d.now / NS)
            d.core.tick(d.now)
            for a in d.collect():
                if isinstance(a, Scale) and a.pool == self.pool:
                    self.scales.append((d.now / NS, a.desired))
                    if self.apply:
                        d.set_capacity(a.desired, self.pool)
            d.tick()
            snap = d.snapshot(self.pool)
            t = round(d.now / NS, 6)
            self.desired[t] = snap.desired
            self.capacity[t] = snap.capacity
        else:
            raise AssertionError(f"no end in sight before t={t_end}: the engine wakes without advancing")
        return self


def backlog(d, n, priority=NORMAL, **opts):
    for _ in range(n):
        d.submit(priority, **opts)


# ---------------------------------------------------------------------------- the formula


@pytest.mark.parametrize(
    ("x", "want"),
    [(0.0, 0), (0.005, 0), (0.0099, 0), (0.01, 1), (0.5, 1), (1.0, 1), (1.000001, 2), (2.5, 3), (7.0, 7)],
)
def test_slots(x, want):
    assert slots(x) == want


def make_scaler(lo=0, hi=1000, **cfg) -> Autoscaler:
    return Autoscaler(AutoscaleConfig(**cfg), lo, hi, 0)


def ref_raw(cfg: AutoscaleConfig, rate, s, b, by_class, busy, r) -> int:
    def sl(x: float) -> int:
        return 0 if x < 0.01 else math.ceil(x - 1e-9)

    base = sl(rate * s / cfg.target_utilization + b * s / cfg.drain_time)
    slo = 0
    for c in range(4):
        if c in cfg.slo:
            slo = max(slo, sl(sum(by_class[: c + 1]) * s / cfg.slo[c]))
    return max(base, slo, busy) + r


def test_raw_terms():
    sc = make_scaler(target_utilization=0.5, drain_time=10.0)
    sc.rate = 3.0
    # λ·s/u = 3·2/0.5 = 12; B·s/drain = 5·2/10 = 1 -> 13
    assert sc.raw(service_s=2.0, backlog=5, backlog_by_class=[0, 0, 5, 0], busy=0, reservations_peak=0) == 13
    assert sc.raw(service_s=2.0, backlog=5, backlog_by_class=[0, 0, 5, 0], busy=20, reservations_peak=0) == 20
    assert sc.raw(service_s=2.0, backlog=5, backlog_by_class=[0, 0, 5, 0], busy=20, reservations_peak=3) == 23
    sc.rate = 0.0
    assert sc.raw(service_s=1.0, backlog=0, backlog_by_class=[0] * 4, busy=0, reservations_peak=0) == 0
    # a tiny remainder below 0.01 slot rounds to nothing
    assert sc.raw(service_s=0.001, backlog=1, backlog_by_class=[0, 0, 1, 0], busy=0, reservations_peak=0) == 0


def test_raw_slo_term_counts_class_and_more_important():
    sc = make_scaler(drain_time=1e6, slo={"high": 2.0, LOW: 100.0})
    # B_high = critical + high = 6 + 4 = 10 -> 10·1/2 = 5 slots; B_low = 40 -> 40/100 -> 1
    by = [6, 4, 10, 20]
    assert sc.raw(service_s=1.0, backlog=40, backlog_by_class=by, busy=0, reservations_peak=0) == 5
    # Normal/Low backlog alone does not feed the High SLO term
    by = [0, 0, 30, 10]
    assert sc.raw(service_s=1.0, backlog=40, backlog_by_class=by, busy=0, reservations_peak=0) == 1


@settings(max_examples=300)
@given(
    rate=st.floats(0, 500),
    s=st.floats(0.001, 100),
    by=st.lists(st.integers(0, 1000), min_size=4, max_size=4),
    busy=st.integers(0, 100),
    r=st.integers(0, 10),
    u=st.sampled_from([0.25, 0.5, 0.75, 1.0]),
    drain=st.sampled_from([1.0, 30.0, 600.0]),
    slo=st.dictionaries(st.integers(0, 3), st.sampled_from([0.5, 5.0, 60.0]), max_size=3),
)
def test_raw_matches_the_formula(rate, s, by, busy, r, u, drain, slo):
    cfg = AutoscaleConfig(target_utilization=u, drain_time=drain, slo=slo)
    sc = Autoscaler(cfg, 0, 10**9, 0)
    sc.rate = rate
    got = sc.raw(service_s=s, backlog=sum(by), backlog_by_class=by, busy=busy, reservations_peak=r)
    assert got == ref_raw(cfg, rate, s, sum(by), by, busy, r)


def ev(sc, t, cap, *, backlog=0, busy=0, s=1.0, r=0, by=None):
    return sc.evaluate(
        sec(t),
        cap,
        service_s=s,
        backlog=backlog,
        backlog_by_class=by if by is not None else [0, 0, backlog, 0],
        busy=busy,
        reservations_peak=r,
    )


def test_evaluate_arrival_rate_ewma():
    sc = make_scaler()
    sc.arrivals = 10
    ev(sc, 1, 0)
    assert sc.rate == pytest.approx(3.0)  # 0 + 0.3·(10/1 − 0)
    ev(sc, 2, 0)
    assert sc.rate == pytest.approx(2.1)
    sc.arrivals = 4
    ev(sc, 4, 0)  # dt = 2 s: 2/s
    assert sc.rate == pytest.approx(2.07)
    assert sc.arrivals == 0


def test_evaluate_clamps_to_min_and_max():
    sc = make_scaler(lo=2, hi=6, max_step_up_abs=100)
    assert ev(sc, 1, 2) == 2, "no work: stays at min"
    assert ev(sc, 2, 0) == 2, "below min: back up to min"
    assert ev(sc, 3, 2, busy=50) == 6, "never above max"


def test_evaluate_step_up_limit():
    sc = make_scaler(max_step_up_abs=4)
    assert ev(sc, 1, 1, busy=100) == 5  # max(ceil(1·1.0), 4) = 4
    assert ev(sc, 2, 5, busy=100) == 10  # max(5, 4)
    assert ev(sc, 3, 10, busy=100) == 20
    assert ev(sc, 4, 0, busy=100) == 4
    sc = make_scaler(max_step_up_abs=0)
    assert ev(sc, 1, 3, busy=100) == 6
    assert ev(sc, 2, 0, busy=100) == 0, "ratio 1.0 of nothing and no absolute step: stuck at 0"


def test_evaluate_stabilization_window():
    sc = make_scaler(stabilization_window=10.0, cooldown=0.0, max_step_down=100)
    assert ev(sc, 0, 20, busy=12) == 12  # down at once, to raw (nothing higher in the window)
    assert ev(sc, 1, 12, busy=3) == 12, "12 was seen within the window"
    assert ev(sc, 5, 12, busy=7) == 12
    assert ev(sc, 10, 12, busy=3) == 12, "t=0 is still inside [now-10, now]"
    assert ev(sc, 10.5, 12, busy=3) == 7, "the highest raw left in the window is 7 (t=5)"
    assert ev(sc, 15, 7, busy=3) == 7, "t=5 (7) is still inside [5, 15]"
    assert ev(sc, 15.5, 7, busy=3) == 3


def test_evaluate_cooldown_and_max_step_down():
    sc = make_scaler(stabilization_window=0.0, cooldown=5.0, max_step_down=2)
    assert ev(sc, 0, 10) == 8
    for t in (1, 2, 3, 4, 4.999):
        assert ev(sc, t, 8) == 8, t
    assert ev(sc, 5, 8) == 6
    assert ev(sc, 6, 6) == 6
    assert ev(sc, 10, 6) == 4
    # scaling up is not subject to the cooldown
    assert ev(sc, 10.5, 4, busy=9) == 8
    sc = make_scaler(stabilization_window=0.0, cooldown=0.0, max_step_down=0)
    assert ev(sc, 0, 10) == 10, "max_step_down=0 never scales down"


@settings(max_examples=200)
@given(
    steps=st.lists(
        st.tuples(st.integers(0, 3000), st.integers(0, 60), st.integers(0, 60), st.booleans()),
        min_size=1,
        max_size=40,
    ),
    lo=st.integers(0, 3),
    hi=st.integers(3, 50),
    window=st.sampled_from([0.0, 2.0, 10.0]),
    cooldown=st.sampled_from([0.0, 1.5, 5.0]),
    down=st.integers(0, 3),
    up_abs=st.integers(0, 6),
)
def test_evaluate_invariants(steps, lo, hi, window, cooldown, down, up_abs):
    """Whatever the inputs: clamps, step limits, window floor and cooldown hold."""
    cfg = AutoscaleConfig(
        stabilization_window=window, cooldown=cooldown, max_step_down=down, max_step_up_abs=up_abs
    )
    sc = Autoscaler(cfg, lo, hi, 0)
    now = 0
    cap = lo
    raws: list[tuple[int, int]] = []
    last_down = None
    for dt_ms, busy, b, follow in steps:
        now += dt_ms * 1_000_000
        rate_before = sc.rate
        sc_rate_dt = (now - sc.last_eval) / NS
        out = sc.evaluate(
            now, cap, service_s=1.0, backlog=b, backlog_by_class=[0, 0, b, 0], busy=busy, reservations_peak=0
        )
        rate = rate_before + 0.3 * (0 - rate_before) if sc_rate_dt > 0 else rate_before
        raw = min(max(ref_raw(cfg, rate, 1.0, b, [0, 0, b, 0], busy, 0), lo), hi)
        raws.append((now, raw))
        if out > cap:
            assert out <= raw and out - cap <= max(math.ceil(cap * 1.0), up_abs)
            assert out == min(raw, cap + max(cap, up_abs))
        elif out < cap:
            floor = max(r for t, r in raws if t >= now - round(window * NS))
            assert out >= max(raw, floor), "never below the highest raw of the window"
            assert cap - out <= down
            assert last_down is None or now - last_down >= round(cooldown * NS)
            last_down = now
        else:
            assert raw <= cap or cap + max(cap, up_abs) == cap
        if follow:
            cap = out


# ---------------------------------------------------------------------------- in the engine


def test_ramp_up_is_step_limited(make):
    d = make([scaled_pool(min=1, max=100, max_step_up_abs=4)])
    backlog(d, 2000)
    d.tick()
    run = Run(d).until(7)
    assert run.scales == [(1.0, 5), (2.0, 10), (3.0, 20), (4.0, 40), (5.0, 80), (6.0, 100)]
    assert run.capacity[7.0] == 100 and run.desired[7.0] == 100
    assert d.snapshot().busy == 100


def test_ramp_up_absolute_step_dominates_small_pools(make):
    d = make([scaled_pool(min=2, max=100, max_step_up_abs=8)])
    backlog(d, 2000)
    d.tick()
    run = Run(d).until(3)
    assert run.scales == [(1.0, 10), (2.0, 20), (3.0, 40)]


def test_evaluation_every_interval(make):
    d = make([scaled_pool(min=1, max=100, interval=0.25)])
    backlog(d, 2000)
    d.tick()
    run = Run(d).until(1)
    assert [t for t, _ in run.scales] == [0.25, 0.5, 0.75, 1.0]


def test_no_scale_down_within_the_stabilization_window_then_one_step_per_cooldown(make):
    d = make(
        [scaled_pool(min=1, max=50, initial=8, stabilization_window=10.0, cooldown=5.0, max_step_down=1)]
    )
    backlog(d, 8)
    d.tick()
    assert d.snapshot().busy == 8

    def finish(t):
        if t == 3.0:
            for x in list(d.core.leases.values()):
                d.complete(x.id)

    run = Run(d).until(30, each=finish)
    # raw was 8 (busy) at t=1..2 and the work ended at t=3: nothing lower than 8 until t=2 has
    # left the window [now-10, now] (at t=13), then one slot per cooldown (5 s)
    assert all(run.desired[float(t)] == 8 for t in range(1, 13)), run.desired
    assert run.scales == [(13.0, 7), (18.0, 6), (23.0, 5), (28.0, 4)]


def test_max_step_down_per_cooldown(make):
    d = make(
        [scaled_pool(min=1, max=50, initial=20, stabilization_window=0.0, cooldown=2.0, max_step_down=3)]
    )
    d.submit()  # arms the autoscaler
    d.tick()
    d.complete(1)
    run = Run(d).until(9)
    downs = [x for _, x in run.scales]
    assert downs[:3] == [17, 14, 11]
    assert [t for t, _ in run.scales][:3] == [1.0, 3.0, 5.0]


def test_scale_down_to_min_and_then_the_timer_stops(make):
    d = make([scaled_pool(min=2, max=10, initial=4, stabilization_window=0.0, cooldown=0.0, max_step_down=5)])
    d.submit()
    d.tick()
    d.complete(1)
    run = Run(d).until(200)
    assert run.capacity[max(run.capacity)] == 2
    assert d.core.next_wakeup() is None, "idle at min: no more evaluations (no polling)"
    d.advance(1000)
    d.submit()  # new work re-arms it
    assert d.core.next_wakeup() == d.now + sec(1.0)


def test_pool_starting_above_min_scales_down_with_no_work_at_all(make):
    """docs/reference/behaviour.md#autoscaling evaluates every interval from the start: initial > min and
    nothing submitted."""
    d = make([scaled_pool(min=1, max=10, initial=5, stabilization_window=0.1, cooldown=0.3)])
    assert d.core.next_wakeup() == sec(1.0), "armed at construction"
    run = Run(d).until(60)
    assert run.scales[0] == (1.0, 4)
    assert run.capacity[max(run.capacity)] == 1
    assert d.core.next_wakeup() is None, "idle at min: the timer stops"


def test_pool_starting_below_min_wants_min_with_no_work(make):
    """A server pool before any worker connects: capacity 0, min 2 - desired is 2 (the metric
    KEDA reads), also when the scaler leaves capacity alone (ExternalScaler)."""
    d = make([scaled_pool(min=2, max=10, initial=0)])
    assert d.core.next_wakeup() == sec(1.0)
    run = Run(d, apply=False).until(30)
    assert run.scales == [(1.0, 2)]
    assert run.desired[max(run.desired)] == 2 and run.capacity[max(run.capacity)] == 0
    assert d.core.next_wakeup() is None, "nothing to do until work or a worker comes"


def test_pool_starting_at_min_arms_nothing(make):
    d = make([scaled_pool(min=2, max=10)])
    assert d.core.next_wakeup() is None


def test_slo_term_per_class(make):
    cfg = {"min": 0, "max": 100, "initial": 0, "drain_time": 1000.0, "max_step_up_abs": 100}
    with_slo = make([scaled_pool(slo={"high": 1.0}, **cfg)])
    backlog(with_slo, 20, CRITICAL)
    without = make([scaled_pool(**cfg)])
    backlog(without, 20, CRITICAL)
    low_only = make([scaled_pool(slo={"high": 1.0}, **cfg)])
    backlog(low_only, 20, LOW)
    got = {}
    for name, d in (("slo", with_slo), ("none", without), ("low", low_only)):
        run = Run(d, apply=False).until(1)
        got[name] = run.desired[1.0]
    # λ = 0.3·20 = 6/s -> 6·1/0.75 + 20·1/1000 = 8.02 -> 9 slots;  B_high = 20 critical -> 20/1 = 20
    assert got == {"slo": 20, "none": 9, "low": 9}


def test_slo_accepts_priority_int_and_name_keys():
    from cronoq.engine.model import Priority

    cfg = AutoscaleConfig(slo={Priority.CRITICAL: 1.0, 1: 2.0, "Normal": 3.0})
    assert cfg.slo == {0: 1.0, 1: 2.0, 2: 3.0}
    with pytest.raises(ValueError):
        AutoscaleConfig(slo={"urgent": 1.0})
    with pytest.raises(ValueError):
        AutoscaleConfig(slo={"high": 0.0})


def fixed(d, start, **kw):
    tid = d.core.submit(d.now, TaskOptions(**kw), None, None, None, sec(start), None)[0]
    d.collect()
    return tid


def test_reservations_are_counted(make):
    def engine(starts):
        p = scaled_pool(min=0, max=10, initial=0, stabilization_window=5.0, cooldown=0.0, max_step_down=10)
        p.reservable_fraction = 1.0
        d = make([p])
        for s in starts:
            fixed(d, s)
        return d

    overlapping = engine([30, 30, 30, 200])  # three windows overlap at ~30 s; 200 s is beyond 60 s
    spread = engine([30, 40, 50])  # never more than one at a time
    r1 = Run(overlapping).until(25)
    r2 = Run(spread).until(25)
    # tasks with a start ahead are not arrivals (they count when their start comes due; R
    # covers them until then): λ = 0 and raw = R from the first evaluation on
    assert r1.desired[25.0] == 3 and r1.capacity[25.0] == 3
    assert r1.desired[15.0] == 3, "no arrival-rate term for starts 30 s ahead"
    assert max(r1.desired.values()) == 3, "future fixed starts never scale beyond their overlap"
    assert r2.desired[25.0] == 1
    assert overlapping.snapshot().reservations == 4


def test_busy_keeps_capacity(make):
    d = make(
        [scaled_pool(min=1, max=50, initial=10, stabilization_window=0.0, cooldown=0.0, max_step_down=10)]
    )
    backlog(d, 10)
    d.tick()
    run = Run(d).until(20)
    assert set(run.capacity.values()) == {10}, "10 running attempts: raw ≥ busy = 10"
    assert run.scales == []


def test_desired_visible_in_snapshot_without_applying(make):
    """An external scaler that never follows: capacity stays, desired shows the request."""
    d = make([scaled_pool(min=1, max=100, max_step_up_abs=4)])
    backlog(d, 500)
    d.tick()
    run = Run(d, apply=False).until(3)
    assert d.snapshot().capacity == 1
    assert run.desired == {1.0: 5, 2.0: 5, 3.0: 5}, "steps are relative to the actual capacity"
    assert [x for _, x in run.scales] == [5, 5, 5], "re-requested every interval"
    d.set_capacity(3)  # capacity reported from outside
    assert d.snapshot().capacity == 3
    Run(d, apply=False).until(4)
    assert d.snapshot().desired == 7


def test_desired_without_autoscale_follows_set_capacity(make, mkpool):
    d = make([mkpool(cap=3)])
    assert d.snapshot().desired == 3
    d.set_capacity(7)
    assert d.snapshot().desired == 7
    assert d.core.next_wakeup() is None
    backlog(d, 100)
    assert d.core.next_wakeup() is None, "no autoscaler: no evaluations"


def test_set_capacity_is_not_clamped(make):
    d = make([scaled_pool(min=2, max=5)])
    d.set_capacity(9)
    assert d.snapshot().capacity == 9
    d.set_capacity(0)
    assert d.snapshot().capacity == 0


def test_learned_service_time_feeds_the_backlog_term(make):
    d = make([scaled_pool(min=0, max=100, initial=1, drain_time=10.0, max_step_up_abs=100)])
    d.submit()
    d.tick()
    d.at(0.9)
    d.complete(1)  # one run of 3 s would say s = 3; this one took 0.9 s
    d2 = make([scaled_pool(min=0, max=100, initial=1, drain_time=10.0, max_step_up_abs=100)])
    d2.submit()
    d2.tick()
    d2.at(0.9)  # d2's attempt is still running: nothing learned, s = default_duration
    # same arrivals and backlog (100 at t=0.9), different service times: 0.9 s learned vs 1.0 s default
    for x in (d, d2):
        x.core.set_capacity(x.now, "default", 0)
        x.collect()
        backlog(x, 100)
    r1 = Run(d, apply=False).until(1)
    r2 = Run(d2, apply=False).until(1)
    # t=1: λ = 0.3·101 = 30.3/s; s=0.9: 30.3·0.9/0.75 + 100·0.9/10 = 45.36 -> 46
    #      (d2, s=1 and one attempt still running): 40.4 + 10 = 50.4 -> 51
    assert r1.desired[1.0] == 46
    assert r2.desired[1.0] == 51


def test_service_time_uses_duration_hints(make):
    """docs/reference/behaviour.md#autoscaling: s is the mean expected duration
    (docs/reference/behaviour.md#expected-duration) of the pool's work: hints count."""
    d = make([scaled_pool(min=0, max=100, initial=0, drain_time=40.0, max_step_up_abs=100)])
    backlog(d, 30, duration_hint=sec(10))
    Run(d, apply=False).until(40)  # capacity stays 0: the backlog stays queued
    # λ has decayed (< 0.01 slot): B·s/drain = 30·10/40 = 7.5 -> 8 slots (with s = 1: 0.75 -> 1)
    assert d.snapshot().desired == 8


def test_service_time_is_the_backlog_mean_weighted_by_class(make):
    d = make([scaled_pool(min=0, max=100, initial=0, drain_time=40.0, max_step_up_abs=100)])
    backlog(d, 10, duration_hint=sec(10))  # normal: s = 10
    backlog(d, 30, priority=HIGH)  # high, unhinted, nothing learned: the pool default (1 s)
    Run(d, apply=False).until(40)
    # s = (10·10 + 30·1) / 40 = 3.25; B·s/drain = 40·3.25/40 = 3.25 -> 4
    assert d.snapshot().desired == 4


# ---------------------------------------------------------------------------- work that cannot run


def settle(d, t_end):
    """Evaluate second by second until ``t_end``, long after the burst of arrivals (whose λ term
    asks for a burst of workers, and has decayed by then): the last raw capacity (before the
    damping) is the backlog's and the running attempts' alone."""
    Run(d).until(t_end)
    return d.core.pools[0].scaler.history[-1][1]


def test_work_held_by_a_resource_does_not_ask_for_workers(make):
    # 40 tasks, 4 permits: once 4 run, the other 36 wait for a permit, not for a worker
    d = make(
        [scaled_pool(min=1, max=64, initial=16, default_duration=600)],
        resources=[Resource.semaphore("db", 4)],
    )
    held = [d.submit(resources={"db": 1}, duration_hint=sec(600)) for _ in range(40)]
    d.tick()
    assert d.snapshot().busy == 4
    assert settle(d, 120) == 4  # (not 64, the max, for 36 tasks that cannot start)
    assert d.core.pools[0].backlog_by_class() == [0] * 4
    # one permit back: the next waiter runs, the rest still do not count
    d.complete(held[0])
    d.tick()
    assert d.snapshot().busy == 4 and d.core.pools[0].backlog_by_class() == [0] * 4
    # a cancelled waiter leaves the count too
    d.cancel(held[-1])
    assert d.core.pools[0].resource_held_by_class[NORMAL] == 34


def test_a_token_bucket_holds_work_too(make):
    d = make(
        [scaled_pool(min=1, max=64, initial=16, default_duration=600)],
        resources=[Resource.token_bucket("api", 0.01, 2)],
    )
    for _ in range(30):
        d.submit(resources={"api": 1}, duration_hint=sec(600))
    d.tick()
    assert d.snapshot().busy == 2
    assert settle(d, 90) == 2


def test_work_without_a_resource_still_asks_for_workers(make):
    d = make(
        [scaled_pool(min=1, max=64, initial=16, default_duration=600)],
        resources=[Resource.semaphore("db", 4)],
    )
    for _ in range(4):
        d.submit(resources={"db": 1}, duration_hint=sec(600))
    for _ in range(36):
        d.submit(duration_hint=sec(600))
    d.tick()
    assert d.snapshot().busy == 16
    Run(d).until(30)
    assert d.snapshot().desired > 16  # 24 ready tasks that a worker could start


def test_work_of_a_paused_pool_and_behind_an_edge_does_not_ask_for_workers(make):
    from cronoq.engine import control
    from cronoq.engine.model import ON_SUCCESS

    d = make([scaled_pool(min=1, max=64, initial=4, default_duration=600)])
    first = d.submit(duration_hint=sec(600))
    for _ in range(30):
        # blocked until ``first`` ends
        d.core.submit(
            d.now, TaskOptions(duration_hint=sec(600)), None, None, None, None, [(first, ON_SUCCESS)]
        )
    d.tick()
    assert d.snapshot().busy == 1
    assert settle(d, 90) == 1
    assert control.set_pool_paused(d.core, d.now, "default", True)
    for _ in range(30):
        d.submit(duration_hint=sec(600))
    assert settle(d, 200) == 1  # paused: 30 ready tasks, none of which may start
    assert control.set_pool_paused(d.core, d.now, "default", False)
    Run(d).until(205)
    assert d.core.pools[0].scaler.history[-1][1] > 4
