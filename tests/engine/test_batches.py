"""docs/reference/behaviour.md#dependencies: submit_batch — atomic, forward references, duplicate keys, ids in
list order."""

from __future__ import annotations

import pytest

from cronoq.engine.model import ON_COMPLETE, ON_FAILURE, ON_SUCCESS, TaskOptions
from cronoq.engine.time import to_ns as sec
from cronoq.errors import SubmitError

S, F, C = ON_SUCCESS, ON_FAILURE, ON_COMPLETE


def item(key=None, deps=None, start=None, payload=None, **opts):
    return (TaskOptions(**opts), payload, key, None, None if start is None else sec(start), deps)


def batch(d, *items):
    try:
        return d.core.submit_batch(d.now, list(items))
    finally:
        d.collect()


def reject(d, *items):
    """The batch must be refused without a trace; returns the SubmitError."""
    c = d.core
    before = (c.next_seq, dict(c.keys), len(c.tasks), dict(c.totals), c.live, [dict(p.res) for p in c.pools])
    with pytest.raises(SubmitError) as e:
        batch(d, *items)
    after = (c.next_seq, dict(c.keys), len(c.tasks), dict(c.totals), c.live, [dict(p.res) for p in c.pools])
    assert after == before
    return e.value


def test_empty_batch_is_valid(drv):
    assert batch(drv) == []
    assert drv.core.next_seq == 1
    assert drv.totals()["submitted"] == 0


def test_ids_increase_in_list_order(drv):
    d = drv
    out = batch(d, item("c"), item("a"), item(), item("b"))
    assert out == [(1, False), (2, False), (3, False), (4, False)]
    assert [d.core.keys[k] for k in "cab"] == [1, 2, 4]
    assert d.totals()["submitted"] == 4
    assert d.tick() == [1, 2]  # ready members dispatch in list order


def test_ids_continue_after_single_submissions(drv):
    d = drv
    d.submit()
    assert [i for i, _ in batch(d, item(), item())] == [2, 3]
    assert d.submit() == 4


def test_payloads_and_options_are_per_member(drv):
    d = drv
    out = batch(d, item(payload="x", priority=0), item(payload="y", kind="k"))
    a, b = (d.task(i) for i, _ in out)
    assert (a.payload, a.opts.priority, b.payload, b.opts.kind) == ("x", 0, "y", "k")


def test_members_reference_each_other_forward_and_backward(drv):
    d = drv
    out = batch(
        d,
        item("late", deps=[("early", S)]),  # forward reference (early comes later in the list)
        item("early"),
        item("last", deps=[("late", C), ("early", F)]),
    )
    late, early, last = (i for i, _ in out)
    assert (late, early, last) == (1, 2, 3)
    assert d.status(late) == "blocked"
    assert d.status(early) == "ready"
    assert d.status(last) == "blocked"
    assert d.tick() == [early]
    d.complete(early)
    assert d.status(late) == "ready"
    assert d.status(last) == "skipped"
    assert d.task(last).message == f"dependency {early} ended as succeeded"


def test_member_depends_on_existing_task_by_id_and_key(drv):
    d = drv
    p = d.submit(key="p")
    q = d.submit(key="q")
    out = batch(d, item(deps=[(p, S)]), item(deps=[("q", S)]))
    a, b = (i for i, _ in out)
    assert d.status(a) == d.status(b) == "blocked"
    d.tick()
    d.complete(p)
    d.complete(q)
    assert d.status(a) == d.status(b) == "ready"


def test_one_bad_member_creates_nothing(drv):
    d = drv
    e = reject(d, item("a"), item("b", deps=[("nope", S)]), item("c"))
    assert (e.code, e.message) == ("unknown_dependency", "unknown dependency 'nope'")
    assert d.core.lookup(d.now, "a") is None
    assert batch(d, item("a")) == [(1, False)]


def test_unknown_pool_member_creates_nothing(drv):
    e = reject(drv, item("a"), item("b", pool="nope"))
    assert e.code == "unknown_pool"


def test_reservation_conflict_member_creates_nothing(make, mkpool):
    d = make([mkpool(cap=2)])  # limit max(1, floor(2 * 0.5)) = 1
    e = reject(d, item("a"), item("f1", start=10), item("f2", start=10.5))
    assert (e.code, e.message) == ("reservation_conflict", "fixed-start reservation conflict")
    assert d.snapshot().reservations == 0


def test_duplicate_key_in_batch(drv):
    e = reject(drv, item("k"), item("x"), item("k"))
    assert (e.code, e.message) == ("duplicate_key_in_batch", "duplicate key 'k' in batch")


def test_duplicate_key_in_batch_even_if_key_exists(drv):
    d = drv
    d.submit(key="k")
    e = reject(d, item("k"), item("k"))
    assert e.code == "duplicate_key_in_batch"


def test_existing_key_is_returned_as_duplicate_while_others_are_created(drv):
    d = drv
    old = d.submit(key="old")
    out = batch(d, item("new1"), item("old"), item("new2", deps=[("old", S)]))
    assert out == [(2, False), (old, True), (3, False)]
    assert d.totals()["submitted"] == 3  # the duplicate consumes no id and no count
    assert d.core.next_seq == 4
    assert d.task(old).edges() == [(d.task(3), S)]  # "old" resolves to the existing task


def test_duplicate_member_ignores_its_own_deps(drv):
    d = drv
    old = d.submit(key="old")
    out = batch(d, item("old", deps=[("nope", S)]))  # not validated: it is not created
    assert out == [(old, True)]


def test_retained_key_is_a_duplicate(drv):
    d = drv
    old = d.submit(key="old")
    d.tick()
    d.complete(old)
    assert batch(d, item("old"), item()) == [(old, True), (2, False)]


def test_member_on_retained_failed_task_is_skipped_and_propagates(drv):
    d = drv
    p = d.submit(key="p")
    d.tick()
    d.fail(p, "x", permanent=True)
    out = batch(
        d, item("child", deps=[("skipme", S)]), item("skipme", deps=[("p", S)]), item("ok", deps=[("p", F)])
    )
    child, skipme, ok = (i for i, _ in out)
    assert d.task(skipme).message == "task already finished"
    assert d.status(child) == "skipped"
    assert d.task(child).message == f"dependency {skipme} ended as skipped"
    assert d.status(ok) == "ready"


def test_self_reference_in_batch_is_a_cycle(drv):
    e = reject(drv, item("a", deps=[("a", S)]))
    assert e.code == "cycle"


def test_batch_reservations_count_against_each_other(make, mkpool):
    d = make([mkpool(cap=4)])  # limit 2
    out = batch(d, item(start=10), item(start=10))
    assert [s for _, s in out] == [False, False]
    assert d.snapshot().reservations == 2
    assert reject(d, item(start=10)).code == "reservation_conflict"
    # windows that only touch: [10-1, 10+1+1] = [9, 12] and [12, 15] do not conflict
    assert batch(d, item(start=13), item(start=13))[0][1] is False


def test_batch_with_fixed_start_and_deps(drv):
    d = drv
    out = batch(d, item("a"), item("b", deps=[("a", S)], start=5))
    a, b = (i for i, _ in out)
    assert d.status(b) == "blocked"
    d.tick()
    d.complete(a)
    assert d.status(b) == "scheduled"
    d.at(5)
    assert d.tick() == [b]


def test_batch_respects_max_pending_as_a_whole(make, mkpool):
    d = make([mkpool(cap=1, max_pending=3, overflow="reject")])
    d.submit()
    e = reject(d, item(), item(), item())
    assert e.code == "overloaded"
    assert len(batch(d, item(), item())) == 2


def test_shuffled_batch_with_mixed_conditions_links_every_edge_in_member_order(drv):
    """A batch that leaves the all-ON_SUCCESS fast path keeps every edge and its condition."""
    d = drv
    out = batch(
        d,
        item("c", [("a", C), ("b", S)]),
        item("a"),
        item("d", [("a", S)]),
        item("b", [("a", F)]),
    )
    c, a, dd, b = (d.task(tid) for tid, _ in out)
    assert a.edges() == [(c, C), (dd, S), (b, F)]
    assert b.edges() == [(c, S)]
    assert (c.unmet, dd.unmet, b.unmet) == (2, 1, 1)


def test_all_success_batch_in_any_order_releases_by_layers(drv):
    d = drv
    out = batch(d, item("z", [("x", S), ("y", S)]), item("y", [("x", S)]), item("x"))
    z, y, x = (d.task(tid) for tid, _ in out)
    assert x.edges() == [(z, S), (y, S)] and y.edges() == [(z, S)]
    assert [d.status(t.id) for t in (z, y, x)] == ["blocked", "blocked", "ready"]


# ---------------------------------------------------------------- all-ON_SUCCESS batches
# (the planned fast path of _submit_items) with cancellations, failures and later edges


def test_cancelled_member_skips_the_chain_below_it(drv):
    d = drv
    out = batch(d, item("a"), item("b", [("a", S)]), item("c", [("b", S)]), item("e", [("c", S)]))
    a, b, c, e = (tid for tid, _ in out)
    assert d.cancel(b)
    assert [d.status(t) for t in (a, b, c, e)] == ["ready", "cancelled", "skipped", "skipped"]
    assert d.task(c).message == f"dependency {b} ended as cancelled"
    assert d.task(e).message == f"dependency {c} ended as skipped"
    assert d.totals()["skipped"] == 2
    assert d.tick() == [a]
    assert d.complete(a)  # its edge to the cancelled member is met without effect
    assert d.status(b) == "cancelled"


def test_failed_member_skips_members_and_meets_a_later_on_failure_edge(drv):
    d = drv
    (p, _), (k, _) = batch(d, item("p"), item("k", [("p", S)]))
    f, _ = d.core.submit(d.now, TaskOptions(), None, "f", None, deps=[("p", F)])
    d.collect()
    assert d.tick() == [p]
    d.fail(p, permanent=True)
    assert d.status(p) == "failed"
    assert d.status(k) == "skipped"
    assert d.status(f) == "ready"


def test_member_with_a_later_dependent_releases_both(drv):
    d = drv
    (a, _), (b, _) = batch(d, item("a"), item("b", [("a", S)]))
    later, _ = d.core.submit(d.now, TaskOptions(), None, "later", None, deps=[("a", S)])
    d.collect()
    assert {c.id for c, _ in d.task(a).edges()} == {b, later}
    assert d.tick() == [a]
    d.complete(a)
    assert d.status(b) == d.status(later) == "ready"


def test_awaited_key_provided_by_a_member_with_dependents(make, mkpool):
    d = make([mkpool(cap=1, unknown_dependency="await")])
    w, _ = d.core.submit(d.now, TaskOptions(), None, "w", None, deps=[("x", S)])
    d.collect()
    assert d.status(w) == "blocked"
    (y, _), (x, _) = batch(d, item("y", [("x", S)]), item("x"))
    assert d.tick() == [x]
    d.complete(x)
    assert d.status(w) == "ready" and d.status(y) == "ready"
