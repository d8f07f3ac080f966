"""docs/how-to/progress.md: progress reports, their rate-limited events (virtual time), attempt
timelines and dependency links kept by the engine."""

from __future__ import annotations

import itertools
import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cronoq.engine.model import RetryPolicy, TaskOptions
from cronoq.engine.progress import MAX_PROGRESS_MESSAGE, PROGRESS_INTERVAL, PublishProgress, check_progress
from cronoq.engine.time import NS
from cronoq.engine.time import to_ns as sec


def progress_events(d, tid=None):
    return [a.event for a in d.log if isinstance(a, PublishProgress) and (tid is None or a.event.id == tid)]


def report(d, tid, done, total=None, message=None):
    ok = d.core.progress.report(d.now, d.lease(tid), done, total, message)
    d.collect()
    return ok


def running(d, **opts):
    tid = d.submit(**opts)
    assert tid in d.tick()
    return tid


def test_latest_value_is_kept_without_subscribers(drv):
    tid = running(drv)
    assert drv.core.progress.latest(drv.task(tid)) is None
    assert report(drv, tid, 1, 10, "one")
    assert report(drv, tid, 2, 10, "two")
    p = drv.core.progress.latest(drv.task(tid))
    assert (p.done, p.total, p.message, p.attempt) == (2.0, 10.0, "two", 1)
    assert progress_events(drv) == []  # nobody asked: no events, no timers
    assert drv.wakeup_in() is None


def test_rate_limit_newest_wins_with_trailing_update(drv):
    drv.core.progress.publish = True
    tid = running(drv)
    assert report(drv, tid, 1)  # first: at once
    assert [e.done for e in progress_events(drv)] == [1.0]
    for i in range(2, 6):  # inside the interval: held, newest wins
        drv.advance(0.01)
        assert report(drv, tid, i)
    assert len(progress_events(drv)) == 1
    assert drv.wakeup_in() == PROGRESS_INTERVAL - sec(0.04)  # one trailing flush armed
    drv.at_ns(PROGRESS_INTERVAL)
    drv.tick()
    evs = progress_events(drv)
    assert [e.done for e in evs] == [1.0, 5.0]
    assert evs[1].attempt == 1 and evs[1].pool == "default"
    # a report a full interval after the last event goes out at once
    drv.at_ns(2 * PROGRESS_INTERVAL)
    assert report(drv, tid, 6)
    assert [e.done for e in progress_events(drv)] == [1.0, 5.0, 6.0]


def test_at_most_four_per_second_under_a_flood(drv):
    drv.core.progress.publish = True
    tid = running(drv)
    for i in range(1000):  # a report every millisecond for one second
        drv.at_ns(i * NS // 1000)
        drv.tick()
        report(drv, tid, i)
    drv.at_ns(NS)
    drv.tick()
    evs = progress_events(drv)
    assert 4 <= len(evs) <= 5  # the first, then one per 250 ms (the last one trailing)
    assert evs[-1].done == 999.0  # the newest value is delivered
    gaps = [b.at - a.at for a, b in itertools.pairwise(evs)]
    assert all(g >= 0.249 for g in gaps)


def test_held_value_dropped_when_the_attempt_ends(drv):
    drv.core.progress.publish = True
    tid = running(drv)
    report(drv, tid, 1)
    drv.advance(0.1)
    report(drv, tid, 2)
    drv.complete(tid)
    drv.advance(1)
    drv.tick()
    assert [e.done for e in progress_events(drv)] == [1.0]  # never for a task not running
    # the last value stays readable while the task is retained
    assert drv.core.progress.latest(drv.task(tid)).done == 2.0


def test_stale_lease_is_ignored(drv):
    tid = running(drv)
    lease = drv.lease(tid)
    drv.complete(tid)
    assert drv.core.progress.report(drv.now, lease, 1, None, None) is False
    assert drv.core.progress.latest(drv.task(tid)) is None


def test_progress_resets_on_a_new_attempt(make, mkpool):
    d = make([mkpool(cap=1, retry=RetryPolicy(max_attempts=3, initial_backoff=1.0, jitter=False))])
    d.core.progress.publish = True
    tid = running(d)
    report(d, tid, 7, 10)
    d.advance(0.1)
    report(d, tid, 8, 10)  # held: its flush timer is for attempt 1
    d.fail(tid)
    assert d.core.progress.latest(d.task(tid)).done == 8.0  # retrying: attempt 1's value
    d.advance(1)
    assert tid in d.tick()
    assert d.task(tid).attempt == 2
    assert d.core.progress.latest(d.task(tid)) is None
    assert report(d, tid, 1, 10)  # a new attempt is not rate-limited by the old one
    evs = progress_events(d)
    assert [(e.attempt, e.done) for e in evs] == [(1, 7.0), (2, 1.0)]


def test_check_progress_values():
    assert check_progress(1, 2, "m") == (1.0, 2.0, "m")
    assert check_progress(0) == (0.0, None, None)
    assert check_progress(5.5, None, None) == (5.5, None, None)
    bad = [
        ((math.nan,), "finite"),
        ((math.inf,), "finite"),
        ((-1,), ">= 0"),
        ((1, 0), "> 0"),
        ((1, math.inf), "> 0"),
        ((3, 2), "must not exceed total"),
        (("1",), "must be a number"),
        ((True,), "must be a number"),
        ((1, None, 5), "must be a string"),
        ((1, None, "x" * (MAX_PROGRESS_MESSAGE + 1)), "too long"),
    ]
    for args, words in bad:
        with pytest.raises(ValueError, match=words):
            check_progress(*args)
    check_progress(1, None, "x" * MAX_PROGRESS_MESSAGE)


def test_attempt_timeline(make, mkpool):
    d = make([mkpool(cap=1, retry=RetryPolicy(max_attempts=3, initial_backoff=1.0, jitter=False))])
    tid = d.submit(timeout=sec(5))
    d.tick()
    assert d.core.attempts.set_worker(d.lease(tid), "w1")
    [a] = d.core.attempts.timeline(d.task(tid))
    assert (a.number, a.outcome, a.ended_at, a.worker) == (1, "running", None, "w1")
    d.advance(2)
    d.fail(tid, "boom")
    d.advance(1)
    d.tick()  # attempt 2
    d.advance(5)
    d.tick()  # times out
    d.advance(2)
    d.tick()  # attempt 3
    d.advance(1)
    d.complete(tid)
    tl = d.core.attempts.timeline(d.task(tid))
    assert [(a.number, a.outcome, a.message, a.worker) for a in tl] == [
        (1, "failed", "boom", "w1"),
        (2, "timed_out", "attempt timed out", ""),
        (3, "succeeded", None, ""),
    ]
    assert [(a.started_at, a.ended_at) for a in tl] == [(0.0, 2.0), (3.0, 8.0), (10.0, 11.0)]
    assert d.core.attempts.timeline(d.task(d.submit())) == []  # never dispatched


def test_attempt_timeline_is_bounded(make, mkpool):
    d = make([mkpool(cap=1, retry=RetryPolicy(max_attempts=50, initial_backoff=0.0, jitter=False))])
    tid = d.submit()
    for _ in range(30):
        d.tick()
        d.fail(tid)
    d.tick()
    tl = d.core.attempts.timeline(d.task(tid))
    assert len(tl) == 20 and tl[-1].number == 31 and tl[-1].outcome == "running"


def test_cancelled_while_running(drv):
    tid = running(drv)
    drv.cancel(tid)
    [a] = drv.core.attempts.timeline(drv.task(tid))
    assert (a.outcome, a.message) == ("cancelled", "cancelled")


def test_links_survive_the_parent_ending(drv):
    p = drv.submit(key="p")
    c1 = drv.core.submit(drv.now, TaskOptions(), None, None, None, None, [(p, 0)])[0]
    c2 = drv.core.submit(drv.now, TaskOptions(), None, None, None, None, [("p", 0)])[0]
    drv.collect()
    assert drv.tick() == [p]
    drv.complete(p)
    att = drv.core.attempts
    assert att.children(drv.task(p)) == [c1, c2]
    assert att.parents(drv.task(c1)) == [p] and att.parents(drv.task(c2)) == [p]
    assert att.parents(drv.task(p)) == []


def test_extras_forgotten_when_pruned(make, mkpool):
    d = make([mkpool(cap=1)], retention=1.0)
    tid = running(d)
    report(d, tid, 1)
    d.core.attempts.set_worker(d.lease(tid), "w")
    d.complete(tid)
    d.advance(2)
    assert d.core.lookup(d.now, tid) is None
    assert d.core.progress.by_task == {} and d.core.attempts.by_task == {}


# ------------------------------------------------------------------ property: random schedules

OPS = st.lists(
    st.tuples(
        st.sampled_from(["submit", "progress", "progress", "progress", "complete", "fail", "cancel", "wait"]),
        st.integers(0, 7),  # which task (or which lease, stale ones included)
        st.integers(0, 400),  # ms to advance first
    ),
    max_size=120,
)


@settings(max_examples=80, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=OPS)
def test_progress_events_only_for_running_attempts_rate_limited_newest_delivered(make, mkpool, ops):
    """Whatever happens: a progress event is only ever published for a task that is running
    that attempt; events of one attempt are at least 250 ms apart; an attempt that keeps running
    250 ms past its last report has published that report (the trailing update)."""
    d = make([mkpool(cap=3, retry=RetryPolicy(max_attempts=3, initial_backoff=0.1, jitter=False))])
    core = d.core
    core.progress.publish = True
    ids: list[int] = []
    leases: list[int] = []
    last_pub: dict[tuple[int, int], int] = {}
    latest: dict[tuple[int, int], tuple[float, int]] = {}  # (task, attempt) -> (done, reported at)
    n = 0

    def check(actions):
        for a in actions:
            if isinstance(a, PublishProgress):
                ev = a.event
                t = core.tasks[ev.id]
                assert t.status_name == "running" and t.attempt == ev.attempt, (ev, t)
                k = (ev.id, ev.attempt)
                assert k not in last_pub or d.now - last_pub[k] >= PROGRESS_INTERVAL
                last_pub[k] = d.now
                assert ev.done == latest[k][0]  # always the newest value

    for op, which, ms in ops:
        d.advance(ms / 1000)
        d.core.tick(d.now)
        check(d.collect())
        if op == "submit":
            ids.append(d.submit())
        elif op == "wait":
            pass
        elif not ids:
            continue
        else:
            t = core.tasks.get(ids[which % len(ids)])
            if op == "progress":
                lease = leases[which % len(leases)] if leases and which % 3 == 0 else (t.lease if t else 0)
                n += 1
                running = core.leases.get(lease)
                if core.progress.report(d.now, lease, n, None, None):
                    assert running is not None
                    latest[(running.id, running.attempt)] = (float(n), d.now)
                else:
                    assert running is None
            elif t is not None and t.status_name == "running":
                leases.append(t.lease)
                if op == "complete":
                    d.complete(t.id)
                elif op == "fail":
                    d.fail(t.id)
                else:
                    d.cancel(t.id)
        check(d.collect())
        d.core.tick(d.now)
        check(d.collect())
    # the trailing update: every attempt still running has published its newest value
    d.advance(1)
    d.core.tick(d.now)
    check(d.collect())
    for t in core.tasks.values():
        k = (t.id, t.attempt)
        if t.status_name == "running" and k in latest:
            assert k in last_pub and last_pub[k] >= latest[k][1]
