"""docs/reference/behaviour.md#fixed-starts: fixed starts — scheduled until start, holds, miss policies,
reservations, hit rate."""

from __future__ import annotations

import pytest

from cronoq.engine.config import PoolConfig
from cronoq.engine.model import FAIL, ON_SUCCESS, RUN_LATE, SKIP, TaskOptions
from cronoq.engine.reservations import MAX_HOLD_NS, max_overlap, reservation_limit
from cronoq.engine.time import to_ns as sec
from cronoq.errors import SubmitError


def fixed(d, start, *, key=None, tol=1.0, hint=None, on_miss=RUN_LATE, deps=None, **opts):
    """Submit a fixed-start task (``start``, ``tol``, ``hint`` in seconds); returns the id."""
    o = TaskOptions(
        tolerance=sec(tol), on_miss=on_miss, duration_hint=None if hint is None else sec(hint), **opts
    )
    try:
        return d.core.submit(d.now, o, None, key, None, sec(start), deps)[0]
    finally:
        d.collect()


def poolcfg(name="default", cap=1, max=None, **kw):
    """A fixed-capacity pool whose ``max`` (which sets the reservation limit) may exceed ``cap``."""
    return PoolConfig(name, min=cap, max=max or cap, initial=cap, autoscale=False, **kw)


def at_tick(d, seconds):
    d.at(seconds)
    return d.tick()


# ---------------------------------------------------------------------------- basics


def test_scheduled_until_start_then_dispatched_exactly_at_start(drv):
    d = drv
    t = fixed(d, 10)
    assert d.status(t) == "scheduled"
    snap = d.snapshot()
    assert (snap.reservations, snap.held, snap.pending, snap.ready) == (1, 0, 1, 0)
    assert d.wakeup_in() == sec(10) - MAX_HOLD_NS  # the hold comes first
    assert at_tick(d, 8.999) == []
    assert d.snapshot().held == 0
    assert at_tick(d, 9) == []  # start - 1 s: a slot is held
    assert d.status(t) == "scheduled"
    assert d.snapshot().held == 1
    assert d.wakeup_in() == sec(1)
    d.at_ns(sec(10) - 1)
    assert d.tick() == []
    assert at_tick(d, 10) == [t]
    task = d.task(t)
    assert task.started_at == sec(10)
    snap = d.snapshot()
    assert (snap.reservations, snap.held, snap.busy, snap.fixed_start_hit_rate) == (0, 0, 1, 1.0)


def test_start_in_the_past_is_ready_at_once(drv):
    d = drv
    d.at(5)
    t = fixed(d, 3, tol=10)
    assert d.status(t) == "ready"
    assert d.snapshot().held == 1
    assert d.tick() == [t]


def test_start_now_is_ready_at_once(drv):
    d = drv
    d.at(5)
    t = fixed(d, 5)
    assert d.status(t) == "ready"
    assert d.tick() == [t]
    assert d.snapshot().fixed_start_hit_rate == 1.0


def test_hold_immediately_when_submitted_within_max_hold(drv):
    d = drv
    d.at(9.5)
    t = fixed(d, 10)
    assert d.status(t) == "scheduled"
    assert d.snapshot().held == 1
    d.submit()
    assert len(d.tick()) == 1  # one slot left for ordinary work
    d.submit()
    assert d.tick() == []
    assert at_tick(d, 10) == [t]


def test_completion_and_events(drv):
    d = make_published(drv)
    t = fixed(d, 2)
    at_tick(d, 2)
    d.complete(t)
    assert d.status(t) == "succeeded"
    assert d.statuses(t) == ["succeeded"]


def make_published(d):
    d.core.publish = True
    return d


# ---------------------------------------------------------------------------- holds


def test_held_slot_is_not_given_to_ordinary_work(make, mkpool):
    d = make([mkpool(cap=2)])
    long = d.submit()
    assert d.tick() == [long]
    t = fixed(d, 10)
    d.at(9)
    crit = [d.submit(0) for _ in range(3)]
    assert d.tick() == []  # the only free slot is held
    snap = d.snapshot()
    assert (snap.busy, snap.held, snap.ready) == (1, 1, 3)
    d.at(9.5)
    assert d.tick() == []
    assert at_tick(d, 10) == [t]  # on its held slot, ahead of critical work
    assert d.snapshot().held == 0
    d.complete(long)
    assert d.tick() == [crit[0]]


def test_dispatched_on_time_although_the_pool_was_saturated(make, mkpool):
    d = make([mkpool(cap=2)])
    a, b = d.submit(), d.submit()
    queued = d.submit()
    assert d.tick() == [a, b]
    t = fixed(d, 10)
    at_tick(d, 9)
    # the hold is counted but no slot is free: the snapshot shows what is actually held
    assert d.core.pools[0].held == 1
    assert d.core.snapshot(d.now).pools[0].held == 0
    d.at(9.5)
    d.complete(a)
    assert d.tick() == []  # the freed slot is kept for the fixed start, not the queued task
    assert d.core.snapshot(d.now).pools[0].held == 1
    assert d.status(queued) == "ready"
    assert at_tick(d, 10) == [t]
    assert d.task(t).started_at == sec(10)
    d.complete(b)
    assert d.tick() == [queued]


def test_slot_freed_within_tolerance_goes_to_the_fixed_start(make, mkpool):
    d = make([mkpool(cap=1)])
    a = d.submit()
    assert d.tick() == [a]
    queued = d.submit(0)
    t = fixed(d, 10, tol=1)
    assert at_tick(d, 10) == []
    assert d.status(t) == "ready"
    d.at(10.5)
    d.complete(a)
    assert d.tick() == [t]
    assert d.status(queued) == "ready"
    assert d.snapshot().fixed_start_hit_rate == 1.0


def test_two_fixed_starts_hold_two_slots(make, mkpool):
    d = make([PoolConfig("default", min=2, max=4, initial=2, autoscale=False)])
    t1 = fixed(d, 10)
    t2 = fixed(d, 10)
    at_tick(d, 9)
    assert d.snapshot().held == 2
    d.submit()
    assert d.tick() == []
    assert at_tick(d, 10) == [t1, t2]


def test_cancel_releases_hold_and_reservation(drv):
    d = drv
    t = fixed(d, 10)
    at_tick(d, 9.5)
    assert d.snapshot().held == 1
    d.cancel(t)
    snap = d.snapshot()
    assert (snap.held, snap.reservations, snap.pending) == (0, 0, 0)
    assert d.core.next_wakeup() is None  # the remaining timers are stale


# ---------------------------------------------------------------------------- miss policies


@pytest.fixture
def busy1(make, mkpool):
    """One slot occupied by a long task (id 1) from t=0."""
    d = make([mkpool(cap=1)])
    d.submit()
    assert d.tick() == [1]
    return d


def test_run_late_stays_ready_and_runs_first_among_later_work(busy1):
    d = busy1
    t = fixed(d, 10, tol=1)
    later = [d.submit() for _ in range(2)]
    at_tick(d, 11)
    assert d.status(t) == "ready"  # start + tolerance reached: not missed yet
    d.at_ns(sec(11) + 1)
    assert d.tick() == []
    task = d.task(t)
    assert task.status_name == "ready"
    assert task.message is None
    snap = d.snapshot()
    assert (snap.held, snap.reservations, snap.ready) == (0, 1, 3)
    d.at(20)
    d.complete(1)
    assert d.tick() == [t]  # ahead of later-submitted work of its class
    assert d.snapshot().fixed_start_hit_rate == 0.0  # a late run counts as a miss
    assert d.snapshot().reservations == 0
    d.complete(t)
    assert d.tick() == [later[0]]
    assert d.totals()["missed"] == 0


def test_run_late_is_not_ahead_of_earlier_submitted_work(busy1):
    d = busy1
    earlier = d.submit()
    t = fixed(d, 10)
    at_tick(d, 12)
    d.complete(1)
    assert d.tick() == [earlier]
    d.complete(earlier)
    assert d.tick() == [t]


def test_run_late_competes_by_class(busy1):
    d = busy1
    t = fixed(d, 10, priority=3)
    d.at(12)
    crit = d.submit(0)
    d.tick()
    d.complete(1)
    assert d.tick() == [crit]
    assert d.status(t) == "ready"


def test_skip_policy_misses(busy1):
    d = make_published(busy1)
    t = fixed(d, 10, on_miss=SKIP)
    at_tick(d, 11)
    assert d.status(t) == "ready"
    d.at(11.001)
    d.tick()
    task = d.task(t)
    assert task.status_name == "missed"
    assert task.message == "fixed start missed"
    assert d.statuses(t) == ["missed"]
    assert d.events(t)[0].message == "fixed start missed"
    totals = d.totals()
    assert (totals["missed"], totals["failed"]) == (1, 0)
    snap = d.snapshot()
    assert (snap.held, snap.reservations, snap.pending, snap.fixed_start_hit_rate) == (0, 0, 0, 0.0)
    assert len(d.resolves(t)) == 1


def test_fail_policy_fails(busy1):
    d = busy1
    t = fixed(d, 10, on_miss=FAIL)
    d.at(12)
    d.tick()
    task = d.task(t)
    assert task.status_name == "failed"
    assert task.message == "fixed start missed"
    totals = d.totals()
    assert (totals["failed"], totals["missed"]) == (1, 0)
    assert d.snapshot().failed == 0  # no attempt failed
    assert d.snapshot().reservations == 0


def test_miss_applies_even_from_scheduled_when_ticked_late(drv):
    d = drv
    t = fixed(d, 10, on_miss=SKIP)
    d.at(30)  # nobody ticked in between
    assert d.tick() == []
    assert d.status(t) == "missed"


@pytest.mark.parametrize("policy", [RUN_LATE, SKIP, FAIL])
def test_tolerance_zero(busy1, policy):
    d = busy1
    t = fixed(d, 10, tol=0, on_miss=policy)
    at_tick(d, 10)
    assert d.status(t) == "ready"  # exactly at start: still on time
    d.at_ns(sec(10) + 1)
    d.tick()
    assert d.status(t) == ("ready", "missed", "failed")[policy]


def test_tolerance_zero_hit(drv):
    d = drv
    t = fixed(d, 10, tol=0, on_miss=SKIP)
    assert at_tick(d, 10) == [t]
    assert d.snapshot().fixed_start_hit_rate == 1.0


def test_dispatch_exactly_at_start_plus_tolerance_is_a_hit(busy1):
    d = busy1
    t = fixed(d, 10, tol=2, on_miss=SKIP)
    d.at(12)
    d.complete(1)
    assert d.tick() == [t]
    assert d.snapshot().fixed_start_hit_rate == 1.0


# ---------------------------------------------------------------------------- reservations


@pytest.mark.parametrize(
    ("mx", "frac", "limit"),
    [
        (1, 0.5, 1),
        (2, 0.5, 1),
        (3, 0.5, 1),
        (4, 0.5, 2),
        (5, 0.5, 2),
        (10, 0.25, 2),
        (10, 0.0, 1),
        (3, 1.0, 3),
    ],
)
def test_reservation_limit(make, mx, frac, limit):
    assert reservation_limit(mx, frac) == limit
    d = make([poolcfg(cap=1, max=mx, reservable_fraction=frac)])
    for _ in range(limit):
        fixed(d, 100)
    with pytest.raises(SubmitError) as e:
        fixed(d, 100)
    assert (e.value.code, e.value.message) == ("reservation_conflict", "fixed-start reservation conflict")
    assert d.snapshot().reservations == limit


def test_window_is_start_minus_tol_to_start_plus_expected_plus_tol(make):
    d = make([poolcfg(cap=1, max=2)])  # limit 1
    t = fixed(d, 100, tol=1, hint=10)
    assert d.core.pools[0].res == {t: (sec(99), sec(111))}
    # touching windows do not conflict (open intervals)
    fixed(d, 112, tol=1, hint=5)  # [111, 118]
    fixed(d, 96, tol=1, hint=1)  # [95, 98] ... [97 - 1, 97 + 1 + 1] would overlap
    fixed(d, 93.5, tol=0.5, hint=1)  # [93, 95]
    for start, tol, hint in [(110.5, 0.5, 0.1), (97.5, 0.5, 1), (120, 2.000000001, 1), (94.5, 0, 0.1)]:
        with pytest.raises(SubmitError):
            fixed(d, start, tol=tol, hint=hint)
    assert d.snapshot().reservations == 4


def test_default_and_learned_expected_duration_size_the_window(make):
    d = make([poolcfg(cap=1, max=2, default_duration=3.0)])
    t = fixed(d, 10, tol=0)
    assert d.core.pools[0].res[t] == (sec(10), sec(13))
    at_tick(d, 10)
    d.at(15)
    d.complete(t)  # learned: 5 s
    t2 = fixed(d, 20, tol=0)
    assert d.core.pools[0].res[t2] == (sec(20), sec(25))


def test_conflict_needs_limit_windows_at_one_instant(make):
    d = make([poolcfg(cap=1, max=4)])  # limit 2
    fixed(d, 1, tol=1, hint=8)  # [0, 10]
    fixed(d, 6, tol=1, hint=8)  # [5, 15]
    fixed(d, 13, tol=1, hint=6)  # [12, 20]: never 2 existing at one instant inside it
    with pytest.raises(SubmitError):
        fixed(d, 10, tol=1, hint=2)  # [9, 13]: (9, 10) already has two
    fixed(d, 11, tol=1, hint=0)  # [10, 12]: only [5, 15] inside (10, 12)
    assert d.snapshot().reservations == 4


def test_max_overlap_open_intervals():
    w = [(0, 10), (10, 20)]
    assert max_overlap(w, 0, 20) == 1
    assert max_overlap(w, 5, 15) == 1
    assert max_overlap([(0, 10), (5, 15)], 0, 20) == 2
    assert max_overlap([(0, 10), (5, 15)], 10, 20) == 1
    assert max_overlap([(0, 10)], 10, 12) == 0
    assert max_overlap([], 0, 1) == 0


def test_reservation_released_at_dispatch(make):
    d = make([poolcfg(cap=1, max=2)])
    t = fixed(d, 10, tol=1, hint=10)
    with pytest.raises(SubmitError):
        fixed(d, 12)
    at_tick(d, 10)
    assert d.snapshot().reservations == 0
    fixed(d, 12)  # the running task's window no longer counts
    assert d.status(t) == "running"


@pytest.mark.parametrize("ending", ["cancel", "miss"])
def test_reservation_released_when_the_task_ends(make, ending):
    d = make([poolcfg(cap=1, max=2)])
    d.submit()
    d.tick()
    t = fixed(d, 10, on_miss=SKIP)
    if ending == "cancel":
        d.cancel(t)
    else:
        at_tick(d, 12)
        assert d.status(t) == "missed"
    assert d.snapshot().reservations == 0
    fixed(d, 13)


def test_reservations_are_per_pool(make):
    d = make([poolcfg("a", max=2), poolcfg("b", max=2)])
    fixed(d, 10, pool="a")
    fixed(d, 10, pool="b")
    with pytest.raises(SubmitError):
        fixed(d, 10, pool="a")
    snap = d.core.snapshot(d.now)
    assert [p.reservations for p in snap.pools] == [1, 1]


def test_conflict_leaves_no_trace(make):
    d = make([poolcfg(cap=1, max=2)])
    fixed(d, 10, key="a")
    c = d.core
    before = (c.next_seq, dict(c.keys), dict(c.totals), len(c.timers), dict(c.pools[0].res))
    with pytest.raises(SubmitError):
        fixed(d, 10, key="b")
    assert (c.next_seq, dict(c.keys), dict(c.totals), len(c.timers), dict(c.pools[0].res)) == before


def test_duplicate_key_returns_existing_without_reserving(make):
    d = make([poolcfg(cap=1, max=2)])
    t = fixed(d, 10, key="a")
    assert fixed(d, 10, key="a") == t  # no conflict: the duplicate reserves nothing
    assert d.snapshot().reservations == 1


# ---------------------------------------------------------------------------- hit rate


def test_fixed_start_hit_rate(make, mkpool):
    d = make([mkpool(cap=1)])
    hits = [fixed(d, s) for s in (10, 20)]
    late = fixed(d, 30)
    skip = fixed(d, 40, on_miss=SKIP)
    assert d.snapshot().fixed_start_hit_rate == 1.0  # no data yet
    for s, t in zip((10, 20), hits, strict=True):
        assert at_tick(d, s) == [t]
        d.advance(1)
        d.complete(t)
    blocker = d.submit()
    assert d.tick() == [blocker]
    at_tick(d, 45)  # 30 and 40 both passed start + tolerance
    assert d.status(late) == "ready"
    assert d.status(skip) == "missed"
    d.complete(blocker)
    assert d.tick() == [late]
    assert d.snapshot().fixed_start_hit_rate == pytest.approx(2 / 4)
    assert d.snapshot().dispatched == 4


# ---------------------------------------------------------------------------- with dependencies


def test_blocked_then_scheduled_then_ready(drv):
    d = drv
    p = d.submit()
    t = fixed(d, 10, deps=[(p, ON_SUCCESS)])
    assert d.status(t) == "blocked"
    assert d.snapshot().reservations == 1  # reserved while blocked
    assert d.snapshot().held == 0
    d.tick()
    d.at(3)
    d.complete(p)
    assert d.status(t) == "scheduled"
    at_tick(d, 9)
    assert d.snapshot().held == 1
    assert at_tick(d, 10) == [t]
    assert d.snapshot().fixed_start_hit_rate == 1.0


def test_released_after_start_is_ready_at_once(drv):
    d = drv
    p = d.submit()
    t = fixed(d, 10, tol=2, deps=[(p, ON_SUCCESS)])
    d.tick()
    at_tick(d, 10.5)
    assert d.status(t) == "blocked"
    d.complete(p)
    assert d.status(t) == "ready"
    assert d.tick() == [t]
    assert d.snapshot().fixed_start_hit_rate == 1.0


@pytest.mark.parametrize("policy", [RUN_LATE, SKIP, FAIL])
def test_released_after_start_plus_tolerance(drv, policy):
    d = drv
    p = d.submit()
    t = fixed(d, 10, tol=1, on_miss=policy, deps=[(p, ON_SUCCESS)])
    d.tick()
    d.at(20)
    d.complete(p)
    got = d.tick()
    assert d.status(t) == ("running", "missed", "failed")[policy]
    assert got == ([t] if policy == RUN_LATE else [])
    assert d.snapshot().fixed_start_hit_rate == 0.0
    assert d.snapshot().reservations == 0


def test_blocked_fixed_start_skipped_releases_reservation(drv):
    d = drv
    p = d.submit()
    t = fixed(d, 10, deps=[(p, ON_SUCCESS)])
    d.tick()
    d.fail(p, "x", permanent=True)
    assert d.status(t) == "skipped"
    assert d.snapshot().reservations == 0
    assert d.snapshot().fixed_start_hit_rate == 1.0  # a skipped task never came due
