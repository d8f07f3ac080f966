"""docs/reference/behaviour.md#reliability: retries and backoff, timeouts, leases, stale reports."""

from __future__ import annotations

import pytest

from cronoq.engine.actions import Abort, Resolve
from cronoq.engine.model import RetryPolicy
from cronoq.engine.time import to_ns as sec


def delays_after_failures(d, tid, n):
    """Fail ``tid`` ``n`` times; return the backoff (ns) the engine chose after each."""
    out = []
    for _ in range(n):
        assert d.tick() == [tid]
        d.fail(tid, "retry me")
        assert d.status(tid) == "retrying"
        wait = d.wakeup_in()
        out.append(wait)
        # nothing happens one ns early; the task is dispatched again exactly on time
        d.at_ns(d.now + wait - 1)
        assert d.tick() == []
        assert d.status(tid) == "retrying"
        d.at_ns(d.now + 1)
    return out


# ---------------------------------------------------------------------------- policy


def test_retry_policy_defaults():
    p = RetryPolicy()
    assert (p.max_attempts, p.initial_backoff, p.multiplier, p.max_backoff, p.jitter) == (
        3,
        1.0,
        2.0,
        60.0,
        True,
    )
    assert RetryPolicy.none().max_attempts == 1


def test_base_delay_formula():
    p = RetryPolicy(max_attempts=10, initial_backoff=1.0, multiplier=2.0, max_backoff=10.0)
    assert [p.base_delay(n) for n in range(1, 8)] == [1, 2, 4, 8, 10, 10, 10]
    assert RetryPolicy(initial_backoff=0.5, multiplier=3.0).base_delay(3) == pytest.approx(4.5)
    assert RetryPolicy(max_backoff=60.0).base_delay(10_000) == 60.0


@pytest.mark.parametrize(
    "kwargs",
    [
        {"max_attempts": 0},
        {"max_attempts": 1.5},
        {"max_attempts": True},
        {"initial_backoff": -1},
        {"initial_backoff": float("nan")},
        {"max_backoff": float("inf")},
        {"multiplier": 0},
        {"multiplier": float("inf")},
    ],
)
def test_retry_policy_validation(kwargs):
    with pytest.raises(ValueError):
        RetryPolicy(**kwargs)


# ---------------------------------------------------------------------------- backoff


def test_backoff_sequence_without_jitter_is_exponential_and_capped(drv):
    policy = RetryPolicy(max_attempts=8, initial_backoff=1.0, multiplier=2.0, max_backoff=10.0, jitter=False)
    tid = drv.submit(retry=policy)
    got = delays_after_failures(drv, tid, 7)
    assert got == [sec(x) for x in (1, 2, 4, 8, 10, 10, 10)]
    assert drv.tick() == [tid]
    assert drv.task(tid).attempt == 8
    drv.fail(tid, "last")
    assert drv.status(tid) == "dead_lettered"
    assert drv.totals()["retries"] == 7


def test_pool_default_retry_policy_applies_when_task_has_none(make, mkpool):
    policy = RetryPolicy(max_attempts=2, initial_backoff=3.0, jitter=False)
    d = make([mkpool(retry=policy)])
    tid = d.submit()
    assert delays_after_failures(d, tid, 1) == [sec(3)]
    d.tick()
    d.fail(tid, "again")
    assert d.status(tid) == "dead_lettered"


def test_task_retry_policy_overrides_pool_default(make, mkpool):
    d = make([mkpool(retry=RetryPolicy(max_attempts=5, jitter=False))])
    tid = d.submit(retry=RetryPolicy.none())
    d.tick()
    d.fail(tid, "only once")
    assert d.status(tid) == "dead_lettered"


def test_jittered_backoff_is_within_half_to_full_delay(make):
    d = make(seed=1234)
    policy = RetryPolicy(max_attempts=8, initial_backoff=1.0, multiplier=2.0, max_backoff=16.0)
    tid = d.submit(retry=policy)
    got = delays_after_failures(d, tid, 7)
    for n, delay in enumerate(got, start=1):
        base = sec(policy.base_delay(n))
        assert base // 2 <= delay <= base, (n, delay, base)
    # really jittered: not all equal to the un-jittered delay
    assert got != [sec(policy.base_delay(n)) for n in range(1, 8)]


def jittered_delays(seed):
    from cronoq.engine.config import CoreConfig, PoolConfig
    from cronoq.engine.core import Core
    from cronoq.engine.model import TaskOptions

    core = Core(CoreConfig([PoolConfig("default", min=1, max=1, autoscale=False)], seed=seed))
    opts = TaskOptions(retry=RetryPolicy(max_attempts=6, initial_backoff=1.0))
    tid, _ = core.submit(0, opts, None)
    now = 0
    out = []
    for _ in range(5):
        core.tick(now)
        core.fail(now, core.tasks[tid].lease, "x")
        w = core.next_wakeup()
        out.append(w - now)
        now = w
    return out


def test_jitter_is_identical_for_identical_seeds_and_differs_across_seeds():
    a = jittered_delays(7)
    assert a == jittered_delays(7)
    assert a != jittered_delays(8)


def test_retry_after_is_used_as_is_without_jitter_or_cap(drv):
    policy = RetryPolicy(max_attempts=3, initial_backoff=1.0, max_backoff=2.0, jitter=True)
    tid = drv.submit(retry=policy)
    drv.tick()
    drv.fail(tid, "rate limited", retry_after=sec(30))
    assert drv.wakeup_in() == sec(30)
    drv.advance(29.999)
    assert drv.tick() == []
    drv.advance(0.001)
    assert drv.tick() == [tid]


def test_retry_after_zero_requeues_at_once(drv):
    tid = drv.submit(retry=RetryPolicy(max_attempts=2, initial_backoff=5.0))
    drv.tick()
    drv.fail(tid, "now", retry_after=0)
    assert drv.status(tid) == "ready"
    assert drv.tick() == [tid]


def test_retry_after_does_not_grant_extra_attempts(drv):
    tid = drv.submit(retry=RetryPolicy.none())
    drv.tick()
    drv.fail(tid, "later please", retry_after=sec(1))
    t = drv.task(tid)
    assert (t.status_name, t.message) == ("dead_lettered", "later please")
    assert drv.wakeup_in() is None


def test_retry_policy_none_dead_letters_first_retryable_failure(make):
    d = make(publish=True)
    tid = d.submit(retry=RetryPolicy.none())
    d.tick()
    d.fail(tid, "ValueError: bad")
    t = d.task(tid)
    assert (t.status_name, t.attempt, t.message) == ("dead_lettered", 1, "ValueError: bad")
    tot = d.totals()
    assert tot["retries"] == 0 and tot["dead_lettered"] == 1
    assert d.statuses(tid) == ["dead_lettered"]


# ---------------------------------------------------------------------------- timeouts


def test_attempt_timeout_aborts_and_retries(make, mkpool):
    d = make([mkpool(cap=1)], publish=True, emit_transitions=True)
    tid = d.submit(timeout=sec(5), retry=RetryPolicy(max_attempts=2, initial_backoff=1.0, jitter=False))
    d.tick()
    lease = d.lease(tid)
    assert d.wakeup_in() == sec(5)
    d.at(4.999)
    d.tick()
    assert d.aborts() == [] and d.status(tid) == "running"
    d.at(5)
    d.tick()
    (abort,) = d.aborts()
    assert (abort.lease, abort.task_id, abort.reason) == (lease, tid, "attempt timed out")
    t = d.task(tid)
    assert t.status_name == "retrying" and t.message == "attempt timed out"
    ev = d.events(tid)[-1]
    assert (ev.status, ev.message) == ("retrying", "attempt timed out")
    tot = d.totals()
    assert tot["timeouts"] == 1 and tot["retries"] == 1
    assert d.snapshot().busy == 0
    # the timed-out attempt reporting afterwards is stale
    assert not d.complete_lease(lease, "too late")
    assert d.totals()["stale_completions"] == 1
    # second attempt times out too: dead-lettered with the timeout message
    d.at(6)
    assert d.tick() == [tid]
    d.at(11)
    d.tick()
    t = d.task(tid)
    assert (t.status_name, t.message, t.attempt) == ("dead_lettered", "attempt timed out", 2)
    assert d.totals()["timeouts"] == 2
    assert len(d.aborts()) == 2


def test_timeout_timer_is_per_attempt_and_void_after_completion(drv):
    tid = drv.submit(timeout=sec(5))
    drv.tick()
    drv.advance(4)
    drv.complete(tid)
    drv.advance(10)
    drv.tick()
    assert drv.aborts() == []
    assert drv.status(tid) == "succeeded"
    assert drv.totals()["timeouts"] == 0
    assert drv.wakeup_in() is None


def test_timeout_restarts_with_each_attempt(drv):
    tid = drv.submit(timeout=sec(5), retry=RetryPolicy(max_attempts=2, initial_backoff=0.0))
    drv.tick()
    drv.at(4)
    drv.fail(tid, "quick failure")
    assert drv.tick() == [tid]  # attempt 2 starts at 4 s: its timeout is at 9 s
    drv.at(8.999)
    drv.tick()
    assert drv.status(tid) == "running"
    drv.at(9)
    drv.tick()
    assert drv.status(tid) == "dead_lettered"
    assert drv.totals()["timeouts"] == 1


# ---------------------------------------------------------------------------- leases


def test_lease_expires_without_heartbeat(make, mkpool):
    d = make([mkpool(lease_ttl=2.0)])
    tid = d.submit(retry=RetryPolicy(max_attempts=2, initial_backoff=1.0, jitter=False))
    d.tick()
    lease = d.lease(tid)
    d.at(1.999)
    d.tick()
    assert d.status(tid) == "running"
    d.at(2)
    d.tick()
    (abort,) = d.aborts()
    assert (abort.lease, abort.task_id) == (lease, tid)
    assert d.status(tid) == "retrying"
    tot = d.totals()
    assert tot["lease_expiries"] == 1 and tot["timeouts"] == 0 and tot["retries"] == 1
    assert not d.core.heartbeat(d.now, lease), "a lost lease cannot be renewed"
    assert not d.complete_lease(lease)
    assert d.totals()["stale_completions"] == 1


def test_heartbeats_renew_the_lease(make, mkpool):
    d = make([mkpool(lease_ttl=2.0)])
    tid = d.submit()
    d.tick()
    for t in (1.5, 3.0, 4.5):
        d.at(t)
        d.tick()
        assert d.heartbeat(tid)
        d.tick()
        assert d.status(tid) == "running"
    # last renewal at 4.5 s: the lease ends at 6.5 s
    d.at(6.499)
    d.tick()
    assert d.status(tid) == "running" and d.aborts() == []
    d.at(6.5)
    d.tick()
    assert len(d.aborts()) == 1
    assert d.status(tid) == "retrying"
    assert d.totals()["lease_expiries"] == 1


def test_heartbeat_keeps_a_long_attempt_alive_then_it_completes(make, mkpool):
    d = make([mkpool(lease_ttl=1.0)])
    tid = d.submit()
    d.tick()
    for _ in range(100):
        d.advance(0.5)
        d.tick()
        d.heartbeat(tid)
    d.complete(tid, "done")
    assert d.status(tid) == "succeeded"
    assert d.totals()["lease_expiries"] == 0
    assert d.aborts() == []


def test_lease_loss_on_last_attempt_dead_letters(make, mkpool):
    d = make([mkpool(lease_ttl=1.0)])
    tid = d.submit(retry=RetryPolicy.none())
    d.tick()
    d.at(1)
    d.tick()
    t = d.task(tid)
    assert t.status_name == "dead_lettered"
    assert t.message  # the lost-lease message (not fixed by the reference)
    assert len(d.resolves(tid)) == 1


def test_heartbeat_without_ttl_is_accepted_and_changes_nothing(drv):
    tid = drv.submit()
    drv.tick()
    assert drv.heartbeat(tid)
    assert drv.wakeup_in() is None
    drv.advance(1000)
    drv.tick()
    assert drv.status(tid) == "running"


# ---------------------------------------------------------------------------- stale reports


def test_stale_reports_are_ignored_and_counted(make, mkpool):
    d = make([mkpool(cap=1, lease_ttl=1.0)])
    tid = d.submit(retry=RetryPolicy(max_attempts=3, initial_backoff=0.0))
    d.tick()
    old = d.lease(tid)
    d.at(1)
    d.tick()  # lease lost -> retrying -> ready -> dispatched again in the same tick
    assert d.status(tid) == "running"
    new = d.lease(tid)
    assert new != old and d.task(tid).attempt == 2
    # the lost attempt can never overwrite the newer one
    assert not d.complete_lease(old, "old output")
    assert not d.fail_lease(old, "old failure", permanent=True)
    assert not d.fail_lease(old, "old retryable")
    assert not d.complete_lease(99_999)
    assert d.status(tid) == "running"
    assert d.totals()["stale_completions"] == 4
    assert d.complete_lease(new, "new output")
    t = d.task(tid)
    assert (t.status_name, t.output) == ("succeeded", "new output")
    assert [type(a) for a in d.log if isinstance(a, (Abort, Resolve))] == [Abort, Resolve]


def test_cancel_running_then_complete_is_stale(drv):
    tid = drv.submit()
    drv.tick()
    lease = drv.lease(tid)
    assert drv.cancel(tid)
    assert not drv.complete_lease(lease, "x")
    assert not drv.fail_lease(lease, "y")
    t = drv.task(tid)
    assert (t.status_name, t.message, t.output) == ("cancelled", "cancelled", None)
    assert drv.totals()["stale_completions"] == 2
    assert drv.totals()["succeeded"] == 0
