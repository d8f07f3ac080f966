"""docs/reference/behaviour.md#metrics: snapshot counts, windowed quality metrics, worker-seconds, totals."""

from __future__ import annotations

import pytest

from cronoq.engine.config import AutoscaleConfig
from cronoq.engine.model import Priority, RetryPolicy
from cronoq.engine.time import to_ns as sec

CRITICAL, HIGH, NORMAL, LOW = (int(p) for p in Priority)

SPEC_TOTALS = {
    "submitted",
    "dispatched",
    "succeeded",
    "failed",
    "dead_lettered",
    "cancelled",
    "skipped",
    "missed",
    "shed",
    "retries",
    "timeouts",
    "lease_expiries",
    "stale_completions",
    "recurring_conflicts",
    "recurring_rejected",
    "recurring_invalid",
}


def test_totals_have_exactly_the_spec_keys_and_start_at_zero(drv):
    totals = drv.totals()
    assert set(totals) == SPEC_TOTALS
    assert all(v == 0 for v in totals.values())
    assert all(isinstance(v, int) for v in totals.values())


def test_empty_snapshot(drv):
    snap = drv.core.snapshot(0)
    assert (snap.live_tasks, snap.running, snap.pending) == (0, 0, 0)
    p = snap.pool("default")
    assert (p.name, p.capacity, p.busy, p.pending, p.ready) == ("default", 2, 0, 0, 0)
    assert p.pending_by_class == [0, 0, 0, 0]
    assert (p.dispatched, p.succeeded, p.failed, p.retried) == (0, 0, 0, 0)
    assert p.window == 60.0
    assert p.priority_adherence == 1.0 and p.fixed_start_hit_rate == 1.0
    assert p.utilization == 0.0 and p.wait_p50 == 0.0
    assert snap.pool("other") is None


def test_pools_are_listed_in_configuration_order(make, mkpool):
    d = make([mkpool("b"), mkpool("default"), mkpool("a")])
    snap = d.core.snapshot(0)
    assert [p.name for p in snap.pools] == ["b", "default", "a"]
    assert snap.pool("a") is snap.pools[2]


def test_counts_pending_ready_running_live(drv):
    ids = {p: drv.submit(p) for p in (CRITICAL, HIGH)}
    drv.submit(NORMAL)
    drv.submit(NORMAL)
    drv.submit(LOW)
    assert drv.tick() == [ids[CRITICAL], ids[HIGH]]
    snap = drv.core.snapshot(drv.now)
    p = snap.pool("default")
    assert (snap.live_tasks, snap.running, snap.pending) == (5, 2, 3)
    assert (p.busy, p.capacity, p.pending, p.ready) == (2, 2, 3, 3)
    assert p.pending_by_class == [0, 0, 2, 1]  # indexed by Priority.value
    # a retrying task is pending but not ready
    drv.fail(ids[HIGH], "x")
    snap = drv.core.snapshot(drv.now)
    p = snap.pool("default")
    assert (snap.live_tasks, snap.running, snap.pending) == (5, 1, 4)
    assert (p.busy, p.pending, p.ready) == (1, 4, 3)
    assert p.pending_by_class == [0, 1, 2, 1]
    # terminal tasks leave every count
    drv.cancel(ids[HIGH])
    drv.complete(ids[CRITICAL])
    snap = drv.core.snapshot(drv.now)
    assert (snap.live_tasks, snap.running, snap.pending) == (3, 0, 3)
    assert snap.pool("default").pending_by_class == [0, 0, 2, 1]


def test_snapshot_pending_sums_over_pools(make, mkpool):
    d = make([mkpool("default", cap=0), mkpool("b", cap=0)])
    d.submit()
    d.submit(pool="b", priority=LOW)
    d.submit(pool="b")
    snap = d.core.snapshot(0)
    assert snap.pending == 3
    assert snap.pool("b").pending_by_class == [0, 0, 1, 1]
    assert snap.pool("default").pending == 1


def test_windowed_attempt_counters_and_totals(make, mkpool):
    d = make([mkpool(cap=3)])
    a = d.submit(retry=RetryPolicy(max_attempts=3, initial_backoff=0.0))
    b = d.submit()
    c = d.submit(retry=RetryPolicy.none())
    d.tick()
    d.advance(1)
    d.fail(b, "perm", permanent=True)
    d.fail(c, "boom")
    for _ in range(2):
        d.fail(a, "again")
        assert d.tick() == [a]
        d.advance(1)
    d.complete(a)
    p = d.snapshot()
    assert (p.dispatched, p.succeeded, p.failed, p.retried) == (5, 1, 4, 2)
    tot = d.totals()
    assert tot["submitted"] == 3
    assert tot["dispatched"] == 5
    assert tot["succeeded"] == 1
    assert tot["failed"] == 1  # tasks that ended failed, not failed attempts
    assert tot["dead_lettered"] == 1
    assert tot["retries"] == 2


def test_wait_quantiles_are_roughly_right(make, mkpool):
    d = make([mkpool(cap=1)])
    ids = [d.submit() for _ in range(10)]
    for i, tid in enumerate(ids):
        d.at(i)
        assert d.tick() == [tid]
        d.at(i + 1)
        d.complete(tid)
    p = d.snapshot()
    # waits are 0, 1, ..., 9 s; run times all 1 s
    assert p.wait_mean == pytest.approx(4.5)
    assert 4 * 0.93 <= p.wait_p50 <= 5 * 1.07
    assert 8 * 0.93 <= p.wait_p90 <= 9 * 1.07
    assert p.wait_p99 == pytest.approx(9, rel=0.07)
    assert p.run_p50 == pytest.approx(1, rel=0.07)
    assert p.run_p99 == pytest.approx(1, rel=0.07)


def test_utilization_counts_running_and_finished_attempts(drv):
    tid = drv.submit()
    drv.tick()
    drv.at(10)
    assert drv.snapshot().utilization == pytest.approx(0.5)  # 10 busy s of 20 slot-s, still running
    drv.complete(tid)
    p = drv.snapshot()
    assert p.utilization == pytest.approx(0.5)
    assert p.schedule_efficiency == pytest.approx(0.5)
    drv.at(20)
    assert drv.snapshot().utilization == pytest.approx(0.25)
    drv.at(100)  # the attempt ended outside the 60 s window
    assert drv.snapshot().utilization == pytest.approx(0.0)


def test_utilization_stays_within_unit_interval(make, mkpool):
    d = make([mkpool(cap=2)])
    ids = [d.submit() for _ in range(4)]
    d.tick()
    d.at(30)
    d.set_capacity(1)  # fewer slots than busy ones
    d.at(59)
    for u in (d.snapshot().utilization, d.snapshot().schedule_efficiency):
        assert 0.0 <= u <= 1.0
    for tid in ids[:2]:
        d.complete(tid)
    d.at(200)
    d.set_capacity(0)
    d.at(300)
    p = d.snapshot()
    assert 0.0 <= p.utilization <= 1.0


def test_worker_seconds_integrates_capacity(make, mkpool):
    d = make([mkpool(cap=2)])
    d.at(10)
    assert d.snapshot().worker_seconds == pytest.approx(20)
    d.set_capacity(5)
    d.at(20)
    assert d.snapshot().worker_seconds == pytest.approx(70)
    d.set_capacity(0)
    d.at(500)
    p = d.snapshot()
    assert p.worker_seconds == pytest.approx(70)
    assert p.capacity == 0
    assert p.cost == 0.0


def test_cost_is_worker_seconds_times_price(make, mkpool):
    d = make([mkpool(cap=3, autoscale=AutoscaleConfig(cost_per_worker_second=0.5))])
    d.at(4)
    p = d.snapshot()
    assert p.worker_seconds == pytest.approx(12)
    assert p.cost == pytest.approx(6)


def test_set_capacity_validation(drv):
    from cronoq.errors import SubmitError

    with pytest.raises(SubmitError) as ei:
        drv.core.set_capacity(0, "nope", 1)
    assert ei.value.code == "unknown_pool"
    with pytest.raises(ValueError):
        drv.core.set_capacity(0, "default", -1)
    drv.core.set_capacity(0, "default", 50)  # not clamped to max
    assert drv.snapshot().capacity == 50


def test_window_drops_samples_older_than_60s(make, mkpool):
    d = make([mkpool(cap=1)])
    d.at(1)
    tid = d.submit()
    d.tick()
    d.at(2)
    d.complete(tid)
    d.at(30)
    p = d.snapshot()
    assert (p.dispatched, p.succeeded) == (1, 1)
    assert p.run_p50 == pytest.approx(1, rel=0.07)
    d.at(60.5)  # the dispatch (at 1 s) is 59.5 s old
    assert (d.snapshot().dispatched, d.snapshot().succeeded) == (1, 1)
    d.at(61.5)  # dispatch 60.5 s old: dropped; the completion (2 s) is 59.5 s old: kept
    assert (d.snapshot().dispatched, d.snapshot().succeeded) == (0, 1)
    d.at(62.5)
    p = d.snapshot()
    assert (p.dispatched, p.succeeded, p.failed) == (0, 0, 0)
    assert p.run_p50 == 0.0 and p.wait_mean == 0.0
    assert p.priority_adherence == 1.0
    # totals and worker-seconds are since start
    assert d.totals()["succeeded"] == 1
    assert p.worker_seconds == pytest.approx(62.5)


def test_window_keeps_recent_samples_while_dropping_old_ones(make, mkpool):
    d = make([mkpool(cap=1)])
    for t in (0, 30, 59, 75):
        d.at(t)
        tid = d.submit()
        d.tick()
        d.complete(tid)
    d.at(80)
    assert d.snapshot().succeeded == 3  # the samples of 30, 59 and 75 s
    d.at(118.5)
    assert d.snapshot().succeeded == 2  # 59 and 75 s
    d.at(119.5)
    assert d.snapshot().succeeded == 1  # 75 s
    assert d.totals()["succeeded"] == 4


def test_wait_counts_from_ready_to_running_in_seconds(make, mkpool):
    d = make([mkpool(cap=0)])
    d.submit()
    d.at(sec(3) / 1e9)
    d.set_capacity(1)
    d.tick()
    p = d.snapshot()
    assert p.wait_mean == pytest.approx(3)
    assert p.wait_p50 == pytest.approx(3, rel=0.07)
