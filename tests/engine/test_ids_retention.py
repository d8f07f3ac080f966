"""docs/reference/behaviour.md#ids-keys-retention: ids, key dedup, retention by age and by count."""

from __future__ import annotations

import pytest

from cronoq.engine.ids import EPOCH_SHIFT
from cronoq.errors import SubmitError


def finish(d, tid, output=None):
    assert tid in d.tick() or d.status(tid) == "running"
    d.complete(tid, output)


def test_ids_start_at_one_and_increase(drv):
    assert [drv.submit() for _ in range(3)] == [1, 2, 3]


@pytest.mark.parametrize("epoch", [1, 7, 1000])
def test_ids_carry_the_epoch_in_the_high_bits(make, epoch):
    d = make(epoch=epoch)
    ids = [d.submit() for _ in range(3)]
    assert EPOCH_SHIFT == 48
    assert ids == [(epoch << 48) | s for s in (1, 2, 3)]
    assert all(i >> 48 == epoch for i in ids)
    assert d.task(ids[0]).id == ids[0]


def test_duplicate_key_returns_existing_and_consumes_no_id(drv):
    a = drv.submit(key="job")
    assert drv.submit2(key="job") == (a, True)
    assert drv.submit2(key="job", priority=0) == (a, True)
    assert drv.submit() == a + 1
    assert drv.totals()["submitted"] == 2
    assert drv.task(a).opts.priority == 2  # the duplicate changed nothing


def test_duplicate_of_a_finished_retained_task_returns_it(drv):
    a = drv.submit(key="once")
    finish(drv, a, "result")
    tid, dup = drv.submit2(key="once")
    assert (tid, dup) == (a, True)
    t = drv.core.lookup(drv.now, "once")
    assert t.id == a and t.status_name == "succeeded" and t.output == "result"


def test_unknown_pool_is_rejected(drv):
    with pytest.raises(SubmitError) as ei:
        drv.submit(pool="nope")
    assert ei.value.code == "unknown_pool"
    assert drv.submit() == 1


def test_lookup_by_id_and_key(drv):
    a = drv.submit(key="k")
    assert drv.core.lookup(drv.now, a) is drv.core.lookup(drv.now, "k")
    assert drv.core.lookup(drv.now, 999) is None
    assert drv.core.lookup(drv.now, "zz") is None


def test_retention_by_age(make):
    d = make(retention=10.0)
    a = d.submit(key="k")
    d.at(1)
    finish(d, a)
    d.at(10.999)
    assert d.core.lookup(d.now, a) is not None
    assert d.submit2(key="k") == (a, True)
    d.at(11)
    assert d.core.lookup(d.now, a) is None
    assert d.core.lookup(d.now, "k") is None
    # the key is free again: a new task, a new id
    tid, dup = d.submit2(key="k")
    assert not dup and tid != a
    assert d.core.lookup(d.now, "k").id == tid


def test_live_tasks_are_never_forgotten(make):
    d = make(retention=1.0, retention_max=0)
    a = d.submit(key="live")
    d.tick()
    d.at(1000)
    b = d.submit()
    assert d.core.lookup(d.now, a).status_name == "running"
    assert d.core.lookup(d.now, b).status_name in ("ready", "running")
    assert d.submit2(key="live") == (a, True)


def test_retention_by_count_drops_oldest_first(make, mkpool):
    d = make([mkpool(cap=5)], retention_max=2)
    ids = [d.submit(key=f"k{i}") for i in range(3)]
    d.tick()
    for i, tid in enumerate(ids):
        d.at(i + 1)
        d.complete(tid)
    assert d.core.lookup(d.now, ids[0]) is None
    assert d.core.lookup(d.now, "k0") is None
    assert [d.core.lookup(d.now, t).id for t in ids[1:]] == ids[1:]
    tid, dup = d.submit2(key="k0")
    assert not dup and tid == ids[-1] + 1
    assert d.submit2(key="k1") == (ids[1], True)


def test_retention_drops_in_finish_order_not_id_order(make, mkpool):
    d = make([mkpool(cap=3)], retention_max=1)
    a = d.submit()
    b = d.submit()
    d.tick()
    d.at(1)
    d.complete(b)
    d.at(2)
    d.complete(a)
    assert d.core.lookup(d.now, b) is None
    assert d.core.lookup(d.now, a) is not None


def test_cancelled_and_shed_tasks_are_retained_too(make, mkpool):
    d = make([mkpool(cap=0, max_pending=1, overflow="shed_oldest")], retention=5.0)
    low = d.submit(3, key="low")
    d.submit(2)
    assert d.status(low) == "shed"
    assert d.submit2(key="low") == (low, True)
    d.at(5)
    assert d.core.lookup(d.now, "low") is None
