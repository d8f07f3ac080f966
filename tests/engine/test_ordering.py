"""docs/reference/behaviour.md#ordering: score (aging, deadline urgency), expected durations, dispatch order,
adherence."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cronoq.engine.config import PriorityConfig, UrgencyConfig
from cronoq.engine.model import Priority, RetryPolicy
from cronoq.engine.time import to_ns as sec

CRITICAL, HIGH, NORMAL, LOW = (int(p) for p in Priority)


@pytest.fixture
def idle(make, mkpool):
    """An engine whose only pool has no capacity yet: tasks wait until set_capacity."""
    return make([mkpool(cap=0)])


def release(d, n):
    """Give the pool ``n`` slots now and return the ids dispatched, in order."""
    d.set_capacity(n)
    return d.tick()


# ---------------------------------------------------------------------------- aging


@pytest.mark.parametrize(
    ("gap", "first"),
    [
        (45.0, "low"),  # equal scores: the older (lower sequence) Low task wins the tie
        (45.001, "low"),
        (46.0, "low"),
        (44.999, "normal"),
        (44.0, "normal"),
    ],
)
def test_low_overtakes_normal_that_became_ready_45s_later(idle, gap, first):
    d = idle
    low = d.submit(LOW)
    d.at(gap)
    normal = d.submit(NORMAL)
    d.at(100)
    s_low = d.core.score(d.task(low), d.now)
    s_normal = d.core.score(d.task(normal), d.now)
    assert s_low == pytest.approx(10 + 2 * 100)
    assert s_normal == pytest.approx(100 + 2 * (100 - gap))
    got = release(d, 1)
    assert got == [low if first == "low" else normal]


def test_aging_scores_are_base_plus_capped_rate_times_wait(idle):
    d = idle
    ids = [d.submit(c) for c in (CRITICAL, HIGH, NORMAL, LOW)]
    d.at(10)
    assert [d.core.score(d.task(t), d.now) for t in ids] == pytest.approx([10020, 1020, 120, 30])
    d.at(400)
    assert [d.core.score(d.task(t), d.now) for t in ids] == pytest.approx([10800, 1800, 900, 810])
    d.at(100_000)
    assert [d.core.score(d.task(t), d.now) for t in ids] == pytest.approx([10800, 1800, 900, 810])


@pytest.mark.parametrize("older", [NORMAL, LOW])
def test_low_and_normal_never_reach_high(idle, older):
    d = idle
    old = d.submit(older)
    d.at(100_000)
    high = d.submit(HIGH)
    assert d.core.score(d.task(old), d.now) < 1000
    assert release(d, 1) == [high]


def test_high_never_reaches_critical(idle):
    d = idle
    high = d.submit(HIGH)
    d.at(100_000)
    crit = d.submit(CRITICAL)
    assert release(d, 2) == [crit, high]


def test_custom_priority_config_is_used(make, mkpool):
    prio = PriorityConfig(base=(4, 3, 2, 1), aging_rate=(0, 0, 1, 1), age_cap=(9, 9, 9, 5))
    d = make([mkpool(cap=0)], priority=prio)
    n = d.submit(NORMAL)
    low = d.submit(LOW)
    d.at(3)
    assert d.core.score(d.task(n), d.now) == pytest.approx(2 + 3)
    assert d.core.score(d.task(low), d.now) == pytest.approx(1 + 3)
    d.at(50)
    assert d.core.score(d.task(low), d.now) == pytest.approx(1 + 5)


# ---------------------------------------------------------------------------- FIFO


def test_fifo_within_a_class(idle):
    d = idle
    ids = []
    for i in range(6):
        d.at(i * 0.25)
        ids.append(d.submit(NORMAL))
    assert release(d, 6) == ids


def test_fifo_within_a_class_one_slot_at_a_time(make, mkpool):
    d = make([mkpool(cap=1)])
    ids = [d.submit(LOW) for _ in range(5)]
    order = []
    for _ in ids:
        (tid,) = d.tick()
        order.append(tid)
        d.advance(1)
        d.complete(tid)
    assert order == ids


def test_classes_dispatch_by_importance_then_fifo(idle):
    d = idle
    low1 = d.submit(LOW)
    n1 = d.submit(NORMAL)
    c1 = d.submit(CRITICAL)
    h1 = d.submit(HIGH)
    n2 = d.submit(NORMAL)
    c2 = d.submit(CRITICAL)
    assert release(d, 6) == [c1, c2, h1, n1, n2, low1]


def _by_heads(d, ids, n):
    """The first ``n`` of ``ids`` in dispatch order, by the rule itself: repeatedly the best-scored
    lane head (per class the lowest-id task without a deadline and the deadline task with the
    earliest latest start), ties to the lower id."""
    ready = {t: d.task(t) for t in ids}
    out = []
    while ready and len(out) < n:
        heads = []
        for c in range(4):
            mine = [t for t in ready.values() if t.opts.priority == c]
            plain = [t for t in mine if t.deadline is None]
            dl = [t for t in mine if t.deadline is not None]
            if plain:
                heads.append(min(plain, key=lambda t: t.id))
            if dl:
                heads.append(min(dl, key=lambda t: (t.latest_start, t.id)))
        best = max(heads, key=lambda t: (d.core.score(t, d.now), -t.id))
        out.append(best.id)
        del ready[best.id]
    return out


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    base=st.lists(st.sampled_from([0.0, 10.0, 100.0, 810.0, 1000.0]), min_size=4, max_size=4),
    rate=st.lists(st.sampled_from([0.0, 2.0]), min_size=4, max_size=4),
    cap=st.lists(st.sampled_from([0.0, 90.0, 800.0]), min_size=4, max_size=4),
    items=st.lists(st.tuples(st.integers(0, 3), st.integers(0, 300), st.booleans()), min_size=1, max_size=10),
    slots=st.integers(1, 10),
)
def test_one_tick_dispatches_in_lane_head_score_order(make, mkpool, base, rate, cap, items, slots):
    """Whichever way the fill goes (scoring the lane heads, or straight down the FIFO of a class
    whose heads beat every other class's at any age, none of them with a deadline), the order is
    the scoring rule's (docs/reference/behaviour.md#score)."""
    d = make([mkpool(cap=0)], priority=PriorityConfig(base=base, aging_rate=rate, age_cap=cap))
    ids = []
    for c, gap, deadline in items:
        d.advance(gap)
        ids.append(d.submit(c, deadline=d.now / 1e9 + 20 if deadline else None))
    d.advance(100)
    assert release(d, slots) == _by_heads(d, ids, slots)


def test_retried_task_keeps_its_original_sequence_position(make, mkpool):
    d = make([mkpool(cap=1)])
    a = d.submit(NORMAL, retry=RetryPolicy(max_attempts=3))
    b = d.submit(NORMAL)
    c = d.submit(NORMAL)
    assert d.tick() == [a]
    d.at(10)
    d.fail(a, "again", retry_after=0)
    assert d.status(a) == "ready"
    # wait_s restarts at re-queue ...
    assert d.core.score(d.task(a), d.now) == pytest.approx(100)
    assert d.core.score(d.task(b), d.now) == pytest.approx(120)
    # ... but within its class the retried task keeps its place ahead of later submissions
    assert d.tick() == [a]
    d.complete(a)
    assert d.tick() == [b]
    d.complete(b)
    assert d.tick() == [c]


def test_retried_task_after_backoff_still_precedes_later_ones(make, mkpool):
    d = make([mkpool(cap=1)])
    a = d.submit(LOW, retry=RetryPolicy(max_attempts=2, initial_backoff=2.0, jitter=False))
    b = d.submit(LOW)
    assert d.tick() == [a]
    d.fail(a, "x")
    assert d.tick() == [b]
    c = d.submit(LOW)
    d.at(2)
    d.complete(b)
    assert d.tick() == [a]
    d.complete(a)
    assert d.tick() == [c]


# ---------------------------------------------------------------------------- urgency


def urgency(d, tid):
    """The urgency part of a task's score (score minus base and aging)."""
    t = d.task(tid)
    c = t.opts.priority
    wait = (d.now - t.ready_at) / 1e9
    base = (10000, 1000, 100, 10)[c]
    return d.core.score(t, d.now) - base - min(2 * wait, 800)


def test_urgency_zero_without_deadline_or_with_enough_slack(idle):
    d = idle
    plain = d.submit(NORMAL)
    far = d.submit(NORMAL, deadline=100, duration_hint=sec(1))
    d.at(50)
    assert urgency(d, plain) == pytest.approx(0)
    assert urgency(d, far) == pytest.approx(0)


@pytest.mark.parametrize(
    ("now", "expected"),
    [
        (0.0, 0.0),
        (4.0, 0.0),  # slack == W: still zero
        (5.0, 1000.0),  # slack 4 of 5
        (6.5, 2500.0),
        (8.0, 4000.0),
        (9.0, 5000.0),  # latest start
        (12.0, 5300.0),  # overdue 3 s: max + 100/s * 3
        (18.0, 5900.0),
        (19.0, 6000.0),  # overdue 10 s: cap reached
        (500.0, 6000.0),
    ],
)
def test_deadline_urgency_linear_window_then_overdue_capped(idle, now, expected):
    d = idle
    tid = d.submit(NORMAL, deadline=10, duration_hint=sec(1))
    assert d.task(tid).latest_start == sec(9)
    d.at(now)
    assert urgency(d, tid) == pytest.approx(expected)


@pytest.mark.parametrize(("now", "expected"), [(59.0, 0.0), (60.0, 0.0), (70.0, 2500.0), (75.0, 3750.0)])
def test_urgency_window_is_at_least_the_expected_duration(idle, now, expected):
    d = idle
    # expected duration 20 s > window 5 s, so W = 20 s: latest start 80 s
    tid = d.submit(HIGH, deadline=100, duration_hint=sec(20))
    d.at(now)
    assert urgency(d, tid) == pytest.approx(expected)


def test_custom_urgency_config(make, mkpool):
    d = make([mkpool(cap=0)], urgency=UrgencyConfig(max=1000, window=10, overdue_rate=10, overdue_cap=50))
    tid = d.submit(NORMAL, deadline=20, duration_hint=sec(2))  # latest start 18, W = 10
    d.at(13)
    assert urgency(d, tid) == pytest.approx(500)
    d.at(21)
    assert urgency(d, tid) == pytest.approx(1030)
    d.at(40)
    assert urgency(d, tid) == pytest.approx(1050)


def test_urgent_normal_beats_fresh_high_but_not_critical(idle):
    d = idle
    high = d.submit(HIGH)
    urgent = d.submit(NORMAL, deadline=3, duration_hint=sec(1))  # slack 2 of 5: +3000
    crit = d.submit(CRITICAL)
    assert release(d, 3) == [crit, urgent, high]


def test_overdue_low_beats_aged_high_but_never_critical(idle):
    d = idle
    high = d.submit(HIGH)
    d.at(400)  # High fully aged: 1800
    overdue = d.submit(LOW, deadline=300, duration_hint=sec(1))  # 10 + 5000 + 1000
    crit = d.submit(CRITICAL)
    assert d.core.score(d.task(overdue), d.now) == pytest.approx(6010)
    assert release(d, 3) == [crit, overdue, high]


def test_maximally_urgent_and_aged_normal_stays_below_fresh_critical(idle):
    d = idle
    normal = d.submit(NORMAL, deadline=1, duration_hint=sec(1))
    d.at(10_000)
    crit = d.submit(CRITICAL)
    assert d.core.score(d.task(normal), d.now) == pytest.approx(100 + 800 + 6000)
    assert release(d, 1) == [crit]


def test_more_urgent_deadline_task_goes_first_within_a_class(idle):
    d = idle
    relaxed = d.submit(NORMAL, deadline=4.5, duration_hint=sec(1))
    tight = d.submit(NORMAL, deadline=2, duration_hint=sec(1))
    plain = d.submit(NORMAL)
    assert release(d, 3) == [tight, relaxed, plain]


# ---------------------------------------------------------------------------- durations


def test_expected_duration_learned_ewma_per_pool_and_kind(make, mkpool):
    d = make([mkpool("default", cap=1), mkpool("b", cap=1, default_duration=2.0)])
    runs = [10, 20, 2]
    for r in runs:
        tid = d.submit(kind="k")
        assert d.tick() == [tid]
        d.advance(r)
        d.complete(tid)
    learned = d.core.durations.values[(0, "k")]
    # 10 -> 10 + 0.2*(20-10) = 12 -> 12 + 0.2*(2-12) = 10
    assert learned == pytest.approx(sec(10))
    base = d.now
    t_k = d.submit(kind="k", deadline=base / 1e9 + 100)
    t_other = d.submit(kind="other", deadline=base / 1e9 + 100)
    t_hint = d.submit(kind="k", deadline=base / 1e9 + 100, duration_hint=sec(3))
    t_pool_b = d.submit(kind="k", deadline=base / 1e9 + 100, pool="b")
    assert d.core.expected_duration(d.task(t_k)) == pytest.approx(sec(10))
    assert d.task(t_k).latest_start == pytest.approx(base + sec(90))
    assert d.core.expected_duration(d.task(t_other)) == sec(1)  # pool default_duration
    assert d.core.expected_duration(d.task(t_hint)) == sec(3)  # hint beats learned
    assert d.task(t_hint).latest_start == base + sec(97)
    assert d.core.expected_duration(d.task(t_pool_b)) == sec(2)  # learned per pool


def test_ewma_alpha_is_0_2(make, mkpool):
    d = make([mkpool(cap=1)])
    for r in (100, 0):
        tid = d.submit(kind="a")
        d.tick()
        d.advance(r)
        d.complete(tid)
    assert d.core.durations.values[(0, "a")] == pytest.approx(sec(80))


def test_failed_attempts_do_not_teach_durations(make, mkpool):
    d = make([mkpool(cap=1)])
    tid = d.submit(kind="k", retry=RetryPolicy(max_attempts=2, initial_backoff=0.0))
    d.tick()
    d.advance(50)
    d.fail(tid, "x")
    d.tick()
    d.advance(4)
    d.complete(tid)
    assert d.core.durations.values[(0, "k")] == pytest.approx(sec(4))


def test_learned_duration_moves_latest_start_and_urgency(make, mkpool):
    d = make([mkpool(cap=1)])
    tid = d.submit(kind="slow")
    d.tick()
    d.advance(30)
    d.complete(tid)
    # expected 30 s: latest start = deadline - 30, W = 30
    t = d.submit(kind="slow", deadline=d.now / 1e9 + 45)
    assert d.task(t).latest_start == d.now + sec(15)
    d.set_capacity(0)
    d.advance(0)
    assert urgency(d, t) == pytest.approx(5000 * (1 - 15 / 30))


# ---------------------------------------------------------------------------- adherence


def test_priority_adherence_is_one_without_data_and_for_in_order_dispatch(idle):
    d = idle
    assert d.snapshot().priority_adherence == 1.0
    d.submit(HIGH)
    d.submit(NORMAL)
    d.submit(LOW)
    release(d, 3)
    assert d.snapshot().priority_adherence == 1.0


def test_priority_adherence_counts_jumps_over_more_important_ready_work(idle):
    d = idle
    high = d.submit(HIGH)
    urgent = d.submit(NORMAL, deadline=2, duration_hint=sec(1))
    d.submit(NORMAL)
    d.submit(LOW)
    got = release(d, 4)
    assert got[:2] == [urgent, high]
    snap = d.snapshot()
    assert snap.dispatched == 4
    assert snap.priority_adherence == pytest.approx(1 - 1 / 4)


def test_aging_overtake_counts_as_a_jump(idle):
    d = idle
    low = d.submit(LOW)
    d.at(50)
    d.submit(NORMAL)
    d.at(60)
    assert release(d, 1) == [low]
    assert d.snapshot().priority_adherence == pytest.approx(0.0)
