"""docs/reference/behaviour.md#overload: max_pending and the overflow policies; batches."""

from __future__ import annotations

import pytest

from cronoq.engine.actions import Resolve, SpaceAvailable
from cronoq.engine.model import Priority, RetryPolicy, TaskOptions
from cronoq.engine.time import to_ns as sec
from cronoq.errors import SubmitError

CRITICAL, HIGH, NORMAL, LOW = (int(p) for p in Priority)


def bounded(make, mkpool, overflow, max_pending=3, cap=0, **kw):
    return make([mkpool(cap=cap, max_pending=max_pending, overflow=overflow)], **kw)


def submit_error(d, priority=NORMAL, **kw):
    before = d.core.next_seq
    with pytest.raises(SubmitError) as ei:
        d.submit(priority, **kw)
    assert d.core.next_seq == before, "a refused submission consumes no id"
    return ei.value


def item(opts, payload=None, key=None, deadline=None):
    """A submit_batch member: (opts, payload, key, deadline, start_at, deps)."""
    return (opts, payload, key, deadline, None, None)


def batch(d, n, priority=NORMAL, keys=None):
    items = [item(TaskOptions(priority=priority), i, keys[i] if keys else None) for i in range(n)]
    out = d.core.submit_batch(d.now, items)
    d.collect()
    return out


# ---------------------------------------------------------------------------- wait


def test_wait_signals_full_then_space_available(make, mkpool):
    d = bounded(make, mkpool, "wait", max_pending=2)
    d.submit()
    d.submit()
    err = submit_error(d)
    assert err.code == "full"
    assert d.totals()["submitted"] == 2
    assert d.snapshot().pending == 2
    assert d.space_available() == []
    d.set_capacity(1)
    d.tick()  # one task leaves the queue
    assert [a.pool for a in d.space_available()] == ["default"]
    assert d.submit() == 3
    # signalled once per "full"; further departures say nothing until the next refusal
    d.set_capacity(2)
    d.tick()
    assert len(d.space_available()) == 1


def test_wait_space_available_after_cancel(make, mkpool):
    d = bounded(make, mkpool, "wait", max_pending=1)
    a = d.submit()
    assert submit_error(d).code == "full"
    d.cancel(a)
    assert len(d.space_available()) == 1


def test_no_space_available_without_a_prior_full(make, mkpool):
    d = bounded(make, mkpool, "wait", max_pending=5)
    d.submit()
    d.set_capacity(1)
    d.tick()
    assert d.space_available() == []


def test_running_tasks_do_not_count_against_max_pending(make, mkpool):
    d = bounded(make, mkpool, "reject", max_pending=1, cap=2)
    for _ in range(2):
        d.submit()
        assert len(d.tick()) == 1
    assert d.snapshot().busy == 2
    d.submit()
    assert submit_error(d).code == "overloaded"


def test_retrying_tasks_count_against_max_pending(make, mkpool):
    d = bounded(make, mkpool, "reject", max_pending=1, cap=1)
    a = d.submit(retry=RetryPolicy(max_attempts=2, initial_backoff=5.0))
    d.tick()
    d.submit()  # queued behind the running task: pending 1
    d.tick()
    d.set_capacity(2)
    d.tick()  # second task runs too; pending 0
    d.fail(a, "x")  # a is retrying: pending 1 again
    assert d.snapshot().pending == 1
    assert submit_error(d).code == "overloaded"


# ---------------------------------------------------------------------------- reject


def test_reject_raises_overloaded_and_never_signals(make, mkpool):
    d = bounded(make, mkpool, "reject", max_pending=1)
    d.submit()
    err = submit_error(d, CRITICAL)
    assert err.code == "overloaded"
    d.set_capacity(1)
    d.tick()
    assert d.space_available() == []
    assert d.totals()["shed"] == 0


def test_duplicate_key_is_answered_even_when_full(make, mkpool):
    d = bounded(make, mkpool, "reject", max_pending=1)
    a = d.submit(key="k")
    assert d.submit2(key="k") == (a, True)


# ---------------------------------------------------------------------------- shed_lowest


def test_shed_lowest_evicts_newest_of_least_important_class(make, mkpool):
    d = bounded(make, mkpool, "shed_lowest", publish=True)
    n = d.submit(NORMAL)
    low_old = d.submit(LOW)
    low_new = d.submit(LOW)
    h = d.submit(HIGH)
    t = d.task(low_new)
    assert (t.status_name, t.message) == ("shed", "shed under overload")
    assert d.status(low_old) == "ready" and d.status(n) == "ready" and d.status(h) == "ready"
    assert [r.task.id for r in d.of(Resolve)] == [low_new]
    (ev,) = d.events(low_new)
    assert (ev.status, ev.message) == ("shed", "shed under overload")
    snap = d.core.snapshot(d.now)
    assert snap.totals["shed"] == 1
    assert snap.pools[0].pending == 3
    assert snap.pools[0].pending_by_class == [0, 1, 1, 1]


def test_shed_lowest_prefers_least_important_class_over_newest_task(make, mkpool):
    d = bounded(make, mkpool, "shed_lowest")
    low = d.submit(LOW)
    d.submit(NORMAL)
    d.submit(NORMAL)
    d.submit(HIGH)
    assert d.status(low) == "shed"


def test_shed_lowest_evicts_normal_when_no_low_is_queued(make, mkpool):
    d = bounded(make, mkpool, "shed_lowest", max_pending=2)
    d.submit(HIGH)
    n = d.submit(NORMAL)
    d.submit(CRITICAL)
    assert d.status(n) == "shed"


@pytest.mark.parametrize(("queued", "new"), [((LOW, LOW), LOW), ((NORMAL, HIGH), NORMAL), ((HIGH,), HIGH)])
def test_shed_lowest_refuses_when_nothing_less_important_is_queued(make, mkpool, queued, new):
    d = bounded(make, mkpool, "shed_lowest", max_pending=len(queued))
    ids = [d.submit(p) for p in queued]
    err = submit_error(d, new)
    assert err.code == "overloaded"
    assert all(d.status(t) == "ready" for t in ids)
    assert d.totals()["shed"] == 0


def test_shed_lowest_never_evicts_running_tasks(make, mkpool):
    d = bounded(make, mkpool, "shed_lowest", max_pending=1, cap=1)
    running = d.submit(LOW)
    d.tick()
    d.submit(HIGH)
    assert submit_error(d, HIGH).code == "overloaded"
    assert d.status(running) == "running"


# ---------------------------------------------------------------------------- shed_oldest


def test_shed_oldest_evicts_oldest_queued_low(make, mkpool):
    d = bounded(make, mkpool, "shed_oldest")
    low1 = d.submit(LOW)
    n = d.submit(NORMAL)
    low2 = d.submit(LOW)
    new = d.submit(NORMAL)
    assert d.status(low1) == "shed"
    assert d.task(low1).message == "shed under overload"
    assert [d.status(t) for t in (n, low2, new)] == ["ready"] * 3
    newer = d.submit(CRITICAL)
    assert d.status(low2) == "shed"
    assert d.status(newer) == "ready"
    assert d.totals()["shed"] == 2


def test_shed_oldest_applies_to_a_new_low_task_too(make, mkpool):
    d = bounded(make, mkpool, "shed_oldest", max_pending=2)
    a = d.submit(LOW)
    b = d.submit(LOW)
    c = d.submit(LOW)
    assert [d.status(t) for t in (a, b, c)] == ["shed", "ready", "ready"]


def test_shed_oldest_without_queued_low_is_overloaded(make, mkpool):
    d = bounded(make, mkpool, "shed_oldest", max_pending=2)
    d.submit(NORMAL)
    d.submit(HIGH)
    assert submit_error(d, CRITICAL).code == "overloaded"


def test_shed_frees_space_for_ordering_unchanged(make, mkpool):
    d = bounded(make, mkpool, "shed_oldest", max_pending=2)
    d.submit(LOW)
    n = d.submit(NORMAL)
    h = d.submit(HIGH)
    d.set_capacity(5)
    assert d.tick() == [h, n]


# ---------------------------------------------------------------------------- batches


@pytest.mark.parametrize(("overflow", "code"), [("wait", "full"), ("reject", "overloaded")])
def test_batch_is_admitted_whole_or_not_at_all(make, mkpool, overflow, code):
    d = bounded(make, mkpool, overflow, max_pending=3)
    d.submit()
    with pytest.raises(SubmitError) as ei:
        batch(d, 3)
    assert ei.value.code == code
    assert d.totals()["submitted"] == 1
    assert d.snapshot().pending == 1
    assert d.core.next_seq == 2
    assert batch(d, 2) == [(2, False), (3, False)]


def test_waiting_batch_gets_space_available(make, mkpool):
    d = bounded(make, mkpool, "wait", max_pending=2)
    d.submit()
    with pytest.raises(SubmitError, match="full"):
        batch(d, 2)
    d.set_capacity(1)
    d.tick()
    assert len(d.space_available()) == 1
    assert [dup for _, dup in batch(d, 2)] == [False, False]


@pytest.mark.parametrize("overflow", ["wait", "reject", "shed_lowest", "shed_oldest"])
def test_batch_larger_than_bound_is_overloaded(make, mkpool, overflow):
    d = bounded(make, mkpool, overflow, max_pending=3)
    with pytest.raises(SubmitError) as ei:
        batch(d, 4, priority=CRITICAL)
    assert ei.value.code == "overloaded"
    assert d.totals()["submitted"] == 0


def test_batch_of_exactly_the_bound_is_admitted(make, mkpool):
    d = bounded(make, mkpool, "wait", max_pending=3)
    assert [tid for tid, _ in batch(d, 3)] == [1, 2, 3]


def test_duplicate_key_in_batch(make, mkpool):
    d = make([mkpool()])
    with pytest.raises(SubmitError) as ei:
        batch(d, 3, keys=["a", "b", "a"])
    assert ei.value.code == "duplicate_key_in_batch"
    assert d.totals()["submitted"] == 0
    assert d.core.lookup(d.now, "a") is None


def test_batch_with_existing_key_returns_it_and_needs_no_room(make, mkpool):
    d = bounded(make, mkpool, "reject", max_pending=2)
    a = d.submit(key="a")
    got = batch(d, 2, keys=["a", "b"])
    assert got == [(a, True), (2, False)]
    assert d.snapshot().pending == 2


def test_batch_with_unknown_pool_creates_nothing(make, mkpool):
    d = make([mkpool()])
    items = [item(TaskOptions(), 1), item(TaskOptions(pool="nope"), 2)]
    with pytest.raises(SubmitError) as ei:
        d.core.submit_batch(d.now, items)
    assert ei.value.code == "unknown_pool"
    assert d.totals()["submitted"] == 0


def test_batch_members_dispatch_like_single_submissions(make, mkpool):
    d = make([mkpool(cap=3)])
    items = [
        item(TaskOptions(priority=LOW), 0),
        item(TaskOptions(priority=CRITICAL), 1),
        item(TaskOptions(priority=NORMAL), 2, deadline=sec(100)),
    ]
    ids = [tid for tid, _ in d.core.submit_batch(d.now, items)]
    d.collect()
    assert d.tick() == [ids[1], ids[2], ids[0]]
    assert d.task(ids[2]).deadline == sec(100)
    assert not any(isinstance(a, SpaceAvailable) for a in d.log)


def test_shed_lowest_sees_deadline_tasks_when_choosing_the_newest(make, mkpool):
    d = bounded(make, mkpool, "shed_lowest", max_pending=2)
    plain = d.submit(LOW)
    with_deadline = d.submit(LOW, deadline=1000)
    d.submit(NORMAL)
    assert d.status(with_deadline) == "shed"
    assert d.status(plain) == "ready"


def test_shed_oldest_sees_deadline_tasks_when_choosing_the_oldest(make, mkpool):
    d = bounded(make, mkpool, "shed_oldest", max_pending=2)
    with_deadline = d.submit(LOW, deadline=1000)
    plain = d.submit(LOW)
    d.submit(HIGH)
    assert d.status(with_deadline) == "shed"
    assert d.status(plain) == "ready"


def test_shed_task_is_never_dispatched(make, mkpool):
    d = bounded(make, mkpool, "shed_lowest", max_pending=1)
    low = d.submit(LOW)
    high = d.submit(HIGH)
    d.set_capacity(4)
    assert d.tick() == [high]
    assert d.status(low) == "shed"
    assert d.snapshot().pending == 0
