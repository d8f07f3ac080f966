"""engine/parking.py: a running attempt parks (running --park--> blocked, or on to scheduled
for a sleep) without a slot and without counting as an attempt; it wakes when the tasks it
waits for have ended, its sleep is over or its signal exists; journals live beside the task
records and go when the task ends; signals are write-once while retained."""

from __future__ import annotations

import pytest

from cronoq.engine.actions import Persist
from cronoq.engine.admission import BatchItem
from cronoq.engine.model import BLOCKED, EV_PARK, RUNNING, TRANSITIONS, RetryPolicy, TaskOptions
from cronoq.engine.parking import Journal, JournalDrop, JournalPut, SignalPut, StaleLease, check_signal_name


def items(n: int) -> list[BatchItem]:
    return [BatchItem(TaskOptions(), i, None, None, None, None) for i in range(n)]


def running(d, **opts):
    tid = d.submit(**opts)
    assert tid in d.tick()
    return tid


def test_park_is_in_the_transition_table():
    assert TRANSITIONS[(RUNNING, EV_PARK)] == BLOCKED


def test_a_parent_waiting_for_its_children_frees_its_only_slot(make, mkpool):
    d = make([mkpool(cap=1)])
    p = running(d)
    lease = d.lease(p)
    kids = d.core.parking.spawn(d.now, lease, items(3), "fp", False)
    assert len(kids) == 3
    assert d.core.parking.wait_tasks(d.now, lease, kids) is True
    d.collect()
    assert d.status(p) == "blocked" and d.core.running == 0
    assert d.task(p).attempt == 0  # parking is not an attempt
    assert d.core.parking.describe(d.task(p)) == "children 0 of 3 done"
    for k in kids:
        assert d.tick() == [k]
        d.complete(k, k * 2)
    assert d.status(p) == "ready"
    assert d.tick() == [p]
    t = d.task(p)
    assert t.attempt == 1 and d.core.parking.journal(p).resumes == 1
    assert [o[2] for o in d.core.parking.outcomes(kids)] == ["succeeded"] * 3
    assert d.core.parking.wait_tasks(d.now, d.lease(p), kids) is False  # all ended: no park
    d.complete(p, "sum")
    assert d.core.parking.journal(p) is None  # dropped at the end
    assert d.core.attempts.children(t) == kids


def test_children_that_fail_still_wake_the_parent(make, mkpool):
    d = make([mkpool(cap=2)])
    p = running(d)
    (k,) = d.core.parking.spawn(d.now, d.lease(p), items(1), "fp", False)
    d.core.parking.wait_tasks(d.now, d.lease(p), [k])
    assert d.tick() == [k]
    d.fail(k, "no", permanent=True)
    assert d.status(p) == "ready"


def test_sleep_goes_to_scheduled_and_wakes_at_the_instant(drv):
    p = running(drv)
    lease = drv.lease(p)
    assert drv.core.parking.sleep(drv.now, lease, drv.now - 1) is False
    assert drv.core.parking.sleep(drv.now, lease, drv.now + 3600 * 10**9) is True
    drv.collect()
    assert drv.status(p) == "scheduled" and drv.core.running == 0
    assert drv.core.parking.describe(drv.task(p)).startswith("sleeping until ")
    drv.advance(3599)
    assert drv.tick() == []
    drv.advance(1)
    assert drv.tick() == [p]
    assert drv.task(p).attempt == 1


def test_timeout_bounds_each_run_not_the_park(make, mkpool):
    d = make([mkpool(cap=1)])
    p = running(d, timeout=10**9)
    d.core.parking.sleep(d.now, d.lease(p), d.now + 5 * 10**9)
    d.collect()
    d.advance(5)
    assert d.tick() == [p]  # the old attempt's timeout (at 1 s) was not live
    assert d.status(p) == "running" and d.aborts() == []


def signal_wait(d, p, name, until=None):
    lease = d.lease(p)
    pk = d.core.parking
    idx = pk.record(
        lease, ["signal", name, [None if until is None else d.core.config.time_base + until, 0, None]]
    )
    return pk.wait_signal(d.now, lease, name, idx, until), idx


def test_signal_before_and_after_the_wait(drv):
    pk = drv.core.parking
    assert pk.send(drv.now, "early", {"ok": 1}) is False
    assert pk.send(drv.now, "early", {"ok": 2}) is True  # duplicate: nothing changes
    a = running(drv)
    parked, idx = signal_wait(drv, a, "early")
    assert parked is False and pk.journal(a).records[idx][2] == [None, 1, {"ok": 1}]
    b = running(drv)
    parked, idx = signal_wait(drv, b, "late")
    assert parked is True and drv.status(b) == "blocked"
    assert pk.describe(drv.task(b)) == "signal 'late'"
    assert pk.send(drv.now, "late", 7) is False
    assert drv.status(b) == "ready" and pk.journal(b).records[idx][2] == [None, 1, 7]


def test_signal_timeout(drv):
    pk = drv.core.parking
    a = running(drv)
    parked, idx = signal_wait(drv, a, "never", until=drv.now + 10**9)
    assert parked
    drv.advance(1)
    assert drv.tick() == [a]
    assert pk.journal(a).records[idx][2][1] == 2  # timed out
    assert "never" not in pk.signal_waiters


def test_signals_expire_with_retention(make, mkpool):
    d = make([mkpool()], retention=10.0)
    pk = d.core.parking
    pk.send(d.now, "s", 1)
    d.advance(11)
    assert pk.signal("s", d.now) is None
    assert pk.send(d.now, "s", 2) is False


def test_cancel_of_a_parked_parent_cancels_its_attached_children(make, mkpool):
    d = make([mkpool(cap=1)])
    p = running(d)
    lease = d.lease(p)
    attached = d.core.parking.spawn(d.now, lease, items(2), "a", False)
    detached = d.core.parking.spawn(d.now, lease, items(1), "b", True)
    d.core.parking.wait_tasks(d.now, lease, attached + detached)
    d.collect()
    assert d.cancel(p)
    assert [d.status(k) for k in attached] == ["cancelled", "cancelled"]
    assert d.status(detached[0]) == "ready"
    assert not d.core.parking.watch and not d.core.parking.journals


def test_park_does_not_count_against_the_retry_policy(make, mkpool):
    d = make([mkpool(cap=1)])
    p = running(d, retry=RetryPolicy(max_attempts=1))
    for _ in range(3):
        d.core.parking.sleep(d.now, d.lease(p), d.now + 10**9)
        d.collect()
        d.advance(1)
        assert d.tick() == [p]
    assert d.task(p).attempt == 1 and d.core.parking.journal(p).resumes == 3
    d.fail(p, "x")
    assert d.status(p) == "dead_lettered"


def test_stale_lease_and_bad_signal_names(drv):
    with pytest.raises(StaleLease):
        drv.core.parking.record(999, ["step", "x", 1])
    with pytest.raises(ValueError, match="empty"):
        check_signal_name("")
    with pytest.raises(ValueError, match="at most 256"):
        check_signal_name("x" * 257)
    with pytest.raises(TypeError):
        check_signal_name(3)


def test_spawn_is_atomic_with_its_record(make, mkpool):
    d = make([mkpool(cap=1, max_pending=2)])
    p = running(d)
    from cronoq.errors import SubmitError

    with pytest.raises(SubmitError):
        d.core.parking.spawn(d.now, d.lease(p), items(5), "fp", False)
    assert d.core.parking.journal(p) is None
    assert len(d.core.tasks) == 1


def test_persisted_records(make, mkpool):
    d = make([mkpool(cap=1)], persist=True)
    p = running(d)
    pk = d.core.parking
    pk.record(d.lease(p), ["step", "a", 1])
    pk.send(d.now, "s", None)
    d.complete(p)
    muts = [a.mutation for a in d.log if isinstance(a, Persist)]
    assert JournalPut(p, 0, ["step", "a", 1], 0) in muts
    assert any(isinstance(m, SignalPut) and m.name == "s" for m in muts)
    assert JournalDrop(p) in muts


def test_a_parked_task_is_small():
    import sys

    j = Journal()
    j.records.append(["wait", "", [1, 2, 3]])
    size = sys.getsizeof(j) + sys.getsizeof(j.records) + sum(sys.getsizeof(r) for r in j.records)
    assert size < 1024


def test_signals_are_scoped_by_tenant(drv):
    pk = drv.core.parking
    assert pk.send(drv.now, "go", 1, "t1") is False
    assert pk.send(drv.now, "go", 2, "t2") is False  # another tenant's signal of that name
    assert pk.send(drv.now, "go", 3, "t1") is True
    a = running(drv, tenant="t2")
    parked, idx = signal_wait(drv, a, "go")
    assert parked is False and pk.journal(a).records[idx][2] == [None, 1, 2]
    b = running(drv, tenant="t3")
    parked, _ = signal_wait(drv, b, "go", until=drv.now + 10**9)
    assert parked is True
    assert pk.describe(drv.task(b)).startswith("signal 'go' (until ")


def test_a_journal_holds_what_it_spawned_past_retention(make, mkpool):
    d = make([mkpool(cap=2)], retention=10.0)
    pk = d.core.parking
    p = running(d)
    (k,) = pk.spawn(d.now, d.lease(p), items(1), "fp", False)
    assert pk.sleep(d.now, d.lease(p), d.now + 60 * 10**9) is True
    d.collect()
    other = d.submit()
    assert sorted(d.tick()) == sorted([k, other])
    d.complete(k, "out")
    d.complete(other, "x")
    d.advance(30)
    d.core.prune(d.now)
    assert k not in d.core.tasks and other not in d.core.tasks  # forgotten for lookups
    assert pk.outcomes([k])[0][2] == "unknown"
    assert pk.outcomes([k], p) == [(k, None, "succeeded", "out", None)]  # its journal holds it
    assert pk.find(p, other) is None  # (only what its records name)
    d.advance(30)
    assert d.tick() == [p]
    pk.record(d.lease(p), ["wait", "", [k]])
    assert pk.wait_tasks(d.now, d.lease(p), [k]) is False  # ended: no park
    d.complete(p)
    assert pk.journal(p) is None and pk.find(p, k) is None  # dropped with the journal
