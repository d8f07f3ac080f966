"""docs/reference/behaviour.md#dependencies: dependency edges, skip messages and propagation, unknown targets,
cycles."""

from __future__ import annotations

import pytest

from cronoq.engine.actions import Resolve
from cronoq.engine.model import ON_COMPLETE, ON_FAILURE, ON_SUCCESS, RetryPolicy, TaskOptions
from cronoq.engine.time import to_ns as sec
from cronoq.errors import SubmitError

S, F, C = ON_SUCCESS, ON_FAILURE, ON_COMPLETE


def sub(d, *, key=None, deps=None, start=None, payload=None, **opts):
    """Submit through the full engine API (deps, fixed start); returns the id."""
    tid, _ = sub2(d, key=key, deps=deps, start=start, payload=payload, **opts)
    return tid


def sub2(d, *, key=None, deps=None, start=None, payload=None, **opts):
    o = TaskOptions(**opts)
    try:
        return d.core.submit(d.now, o, payload, key, None, None if start is None else sec(start), deps)
    finally:
        d.collect()


def run(d, tid):
    """Tick and assert ``tid`` was dispatched."""
    assert tid in d.tick()
    return tid


def end(d, tid, how):
    """Finish task ``tid`` as ``how``: succeeded, failed, dead_lettered or cancelled."""
    if how == "cancelled":
        assert d.cancel(tid)
        return
    if d.status(tid) != "running":
        run(d, tid)
    if how == "succeeded":
        assert d.complete(tid)
    elif how == "failed":
        assert d.fail(tid, "bad", permanent=True)
    elif how == "dead_lettered":
        assert d.fail(tid, "bad")
    assert d.status(tid) == how


def trace(d):
    """Everything a rejected submission could have touched."""
    c = d.core
    p = c.pools[0]
    return (
        c.next_seq,
        dict(c.keys),
        {k: list(v) for k, v in c.awaiting.items()},
        dict(p.res),
        p.pending,
        c.live,
        dict(c.totals),
        len(c.tasks),
        len(c.timers),
    )


@pytest.fixture
def one(make, mkpool):
    """One slot, single attempts (a retryable failure dead-letters)."""
    return make([mkpool(cap=1, retry=RetryPolicy.none())])


@pytest.fixture
def awaiting(make, mkpool):
    return make([mkpool(cap=1, unknown_dependency="await")])


@pytest.fixture
def awaiting_t(make, mkpool):
    return make([mkpool(cap=1, unknown_dependency="await", await_timeout=10.0)])


# ---------------------------------------------------------------------------- edge conditions

OUTCOMES = ("succeeded", "failed", "dead_lettered", "cancelled")


@pytest.mark.parametrize("how", OUTCOMES)
@pytest.mark.parametrize("cond", [S, F, C])
def test_each_condition_against_each_parent_outcome(one, cond, how):
    d = one
    p = sub(d, key="p")
    child = sub(d, deps=[(p, cond)])
    assert d.status(child) == "blocked"
    assert d.snapshot().pending == 2 and d.snapshot().ready == 1
    end(d, p, how)
    met = cond == C or (cond == S) == (how == "succeeded")
    t = d.task(child)
    if met:
        assert t.status_name == "ready"
        assert t.message is None
        assert run(d, child) == child
    else:
        assert t.status_name == "skipped"
        assert t.message == f"dependency {p} ended as {how}"
        assert d.totals()["skipped"] == 1
        assert [r.task.id for r in d.of(Resolve)][-1] == child


@pytest.mark.parametrize("cond", [S, F, C])
def test_edge_by_key_is_the_same_as_by_id(one, cond):
    d = one
    p = sub(d, key="parent")
    child = sub(d, deps=[("parent", cond)])
    assert d.task(p).edges() == [(d.task(child), cond)]
    end(d, p, "failed")
    assert d.status(child) == ("skipped" if cond == S else "ready")


def test_dependent_stays_blocked_while_parent_runs_and_retries(make, mkpool):
    d = make([mkpool(cap=1, retry=RetryPolicy(max_attempts=2, initial_backoff=1.0, jitter=False))])
    p = sub(d)
    child = sub(d, deps=[(p, C)])
    run(d, p)
    assert d.status(child) == "blocked"
    d.fail(p, "transient")
    assert d.status(p) == "retrying"
    assert d.status(child) == "blocked"  # retrying is not terminal: the edge waits
    d.advance(1)
    run(d, p)
    d.complete(p)
    assert d.status(child) == "ready"


def test_all_edges_must_be_satisfied(one):
    d = one
    a = sub(d)
    b = sub(d)
    child = sub(d, deps=[(a, S), (b, F)])
    end(d, a, "succeeded")
    assert d.status(child) == "blocked"
    assert d.task(child).unmet == 1
    end(d, b, "failed")
    assert d.status(child) == "ready"


def test_one_broken_edge_skips_at_once_even_with_other_parents_live(one):
    d = one
    a = sub(d)
    b = sub(d)
    child = sub(d, deps=[(a, S), (b, S)])
    end(d, b, "cancelled")
    assert d.status(child) == "skipped"
    assert d.task(child).message == f"dependency {b} ended as cancelled"
    end(d, a, "succeeded")  # a later success does not revive it
    assert d.status(child) == "skipped"
    assert len(d.resolves(child)) == 1


def test_several_edges_to_one_parent_form_a_union(one):
    d = one
    p = sub(d)
    both = sub(d, deps=[(p, S), (p, C)])
    mixed = sub(d, deps=[(p, F), (p, C)])
    end(d, p, "succeeded")
    assert d.status(both) == "ready"
    assert d.status(mixed) == "skipped"
    assert d.task(mixed).message == f"dependency {p} ended as succeeded"


# ---------------------------------------------------------------------------- retained targets


@pytest.mark.parametrize("how", OUTCOMES)
@pytest.mark.parametrize("cond", [S, F, C])
def test_edge_to_a_retained_terminal_task_resolves_at_once(one, cond, how):
    d = one
    p = sub(d, key="p")
    end(d, p, how)
    before = d.totals()["skipped"]
    for ref in (p, "p"):
        child = sub(d, deps=[(ref, cond)])
        met = cond == C or (cond == S) == (how == "succeeded")
        if met:
            assert d.status(child) == "ready"
        else:
            assert d.status(child) == "skipped"
            assert d.task(child).message == "task already finished"
            assert len(d.resolves(child)) == 1
    assert d.totals()["skipped"] == before + (0 if met else 2)


def test_already_finished_mixed_with_live_parent(one):
    d = one
    done = sub(d)
    end(d, done, "failed")
    live = sub(d)
    child = sub(d, deps=[(live, S), (done, S)])
    assert d.status(child) == "skipped"
    assert d.task(child).message == "task already finished"
    assert d.task(live).edges() == [(d.task(child), S)]  # linked, but ignored when it ends
    end(d, live, "succeeded")
    assert d.status(child) == "skipped"


def test_met_retained_edge_plus_live_edge_waits_for_the_live_one(one):
    d = one
    done = sub(d)
    end(d, done, "succeeded")
    live = sub(d)
    child = sub(d, deps=[(done, S), (live, C)])
    assert d.status(child) == "blocked"
    end(d, live, "cancelled")
    assert d.status(child) == "ready"


def test_pruned_target_is_unknown_again(make, mkpool):
    d = make([mkpool(cap=1)], retention=10.0)
    p = sub(d, key="p")
    end(d, p, "succeeded")
    d.advance(11)
    with pytest.raises(SubmitError) as e:
        sub(d, deps=[("p", S)])
    assert e.value.code == "unknown_dependency"


# ---------------------------------------------------------------------------- propagation


def test_skip_propagates_along_a_success_chain(one):
    d = one
    a = sub(d)
    chain = [a]
    for _ in range(4):
        chain.append(sub(d, deps=[(chain[-1], S)]))
    end(d, a, "failed")
    msgs = [d.task(t).message for t in chain[1:]]
    assert [d.status(t) for t in chain[1:]] == ["skipped"] * 4
    assert msgs == [
        f"dependency {a} ended as failed",
        f"dependency {chain[1]} ended as skipped",
        f"dependency {chain[2]} ended as skipped",
        f"dependency {chain[3]} ended as skipped",
    ]
    assert d.totals()["skipped"] == 4
    assert d.snapshot().pending == 0
    assert d.core.live == 0


def test_skip_satisfies_failure_and_complete_edges_downstream(one):
    d = one
    a = sub(d)
    b = sub(d, deps=[(a, S)])
    on_fail = sub(d, deps=[(b, F)])
    on_done = sub(d, deps=[(b, C)])
    on_ok = sub(d, deps=[(b, S)])
    after_fail = sub(d, deps=[(on_fail, S)])
    end(d, a, "dead_lettered")
    assert d.status(b) == "skipped"
    assert d.status(on_fail) == "ready"
    assert d.status(on_done) == "ready"
    assert d.status(on_ok) == "skipped"
    assert d.task(on_ok).message == f"dependency {b} ended as skipped"
    assert d.status(after_fail) == "blocked"
    end(d, on_fail, "succeeded")
    assert d.status(after_fail) == "ready"


def test_diamond_skip_resolves_the_sink_exactly_once(one):
    d = one
    a = sub(d)
    b = sub(d, deps=[(a, S)])
    c = sub(d, deps=[(a, S)])
    sink = sub(d, deps=[(b, S), (c, S)])
    end(d, a, "failed")
    assert [d.status(t) for t in (b, c, sink)] == ["skipped"] * 3
    assert d.task(sink).message in (f"dependency {b} ended as skipped", f"dependency {c} ended as skipped")
    assert len(d.resolves(sink)) == 1
    assert d.totals()["skipped"] == 3


def test_diamond_success_releases_the_sink_after_both_branches(one):
    d = one
    a = sub(d)
    b = sub(d, deps=[(a, S)])
    c = sub(d, deps=[(a, S)])
    sink = sub(d, deps=[(b, S), (c, S)])
    end(d, a, "succeeded")
    assert d.status(b) == d.status(c) == "ready"
    end(d, b, "succeeded")
    assert d.status(sink) == "blocked"
    end(d, c, "succeeded")
    assert d.status(sink) == "ready"


def test_diamond_with_mixed_branches(one):
    d = one
    a = sub(d)
    b = sub(d, deps=[(a, S)])  # skipped
    c = sub(d, deps=[(a, F)])  # runs
    sink = sub(d, deps=[(b, C), (c, S)])
    end(d, a, "failed")
    assert d.status(b) == "skipped"
    assert d.status(sink) == "blocked"
    end(d, c, "succeeded")
    assert d.status(sink) == "ready"


def test_long_chain_propagates_without_recursion(one):
    d = one
    prev = sub(d)
    first = prev
    ids = []
    for _ in range(3000):
        prev = sub(d, deps=[(prev, S)])
        ids.append(prev)
    end(d, first, "cancelled")
    assert d.status(ids[-1]) == "skipped"
    assert d.totals()["skipped"] == 3000


# ---------------------------------------------------------------------------- unknown targets


@pytest.mark.parametrize("ref", ["nope", 999])
def test_unknown_target_is_rejected_by_default(one, ref):
    d = one
    before = trace(d)
    with pytest.raises(SubmitError) as e:
        sub(d, key="k", deps=[(ref, S)])
    assert e.value.code == "unknown_dependency"
    assert str(e.value) == e.value.message == f"unknown dependency '{ref}'"
    assert trace(d) == before
    assert d.core.lookup(d.now, "k") is None
    assert sub(d) == 1  # no id was consumed


def test_unknown_id_is_rejected_even_when_awaiting(awaiting):
    d = awaiting
    with pytest.raises(SubmitError) as e:
        sub(d, deps=[(42, S)])
    assert e.value.code == "unknown_dependency"
    assert e.value.message == "unknown dependency '42'"


def test_awaited_key_binds_when_submitted(awaiting):
    d = awaiting
    child = sub(d, key="child", deps=[("later", S)])
    assert d.status(child) == "blocked"
    assert d.core.awaiting == {"later": [(d.task(child), S)]}
    assert d.core.next_wakeup() is None  # no await_timeout: waits forever
    d.advance(100_000)
    d.tick()
    assert d.status(child) == "blocked"
    p = sub(d, key="later")  # the plain fast path must bind too
    assert d.core.awaiting == {}
    assert d.task(p).edges() == [(d.task(child), S)]
    assert d.task(child).awaiting == 0
    run(d, p)
    assert d.status(child) == "blocked"
    d.complete(p)
    assert d.status(child) == "ready"


@pytest.mark.parametrize("cond", [S, F, C])
def test_awaited_edge_keeps_its_condition(awaiting, cond):
    d = awaiting
    child = sub(d, deps=[("later", cond)])
    p = sub(d, key="later")
    end(d, p, "failed")
    assert d.status(child) == ("skipped" if cond == S else "ready")
    if cond == S:
        assert d.task(child).message == f"dependency {p} ended as failed"


def test_awaited_key_binds_every_waiter_and_a_provider_with_deps(awaiting):
    d = awaiting
    w1 = sub(d, deps=[("p", S)])
    w2 = sub(d, deps=[("p", C)])
    gate = sub(d)
    p = sub(d, key="p", deps=[(gate, S)])
    assert {c.id for c, _ in d.task(p).edges()} == {w1, w2}
    end(d, gate, "succeeded")
    end(d, p, "succeeded")
    assert d.status(w1) == d.status(w2) == "ready"


def test_awaited_key_provided_by_a_batch(awaiting):
    d = awaiting
    w = sub(d, deps=[("b", S)])
    o = TaskOptions()
    d.core.submit_batch(d.now, [(o, None, "a", None, None, None), (o, None, "b", None, None, [("a", S)])])
    d.collect()
    b = d.core.keys["b"]
    assert d.task(b).edges() == [(d.task(w), S)]


def test_await_timeout_skips(awaiting_t):
    d = awaiting_t
    child = sub(d, deps=[("later", S)])
    assert d.wakeup_in() == sec(10)
    d.advance(9.999)
    d.tick()
    assert d.status(child) == "blocked"
    d.advance(0.001)
    d.tick()
    t = d.task(child)
    assert t.status_name == "skipped"
    assert t.message == "timed out awaiting unknown dependency"
    assert d.totals()["skipped"] == 1
    # the key arriving later binds nothing (the waiter is terminal)
    p = sub(d, key="later")
    assert d.task(p).dependents is None
    assert d.core.awaiting == {}


def test_await_timeout_propagates_to_dependents(awaiting_t):
    d = awaiting_t
    child = sub(d, deps=[("later", S)])
    grand = sub(d, deps=[(child, S)])
    d.advance(10)
    d.tick()
    assert d.status(grand) == "skipped"
    assert d.task(grand).message == f"dependency {child} ended as skipped"


def test_bound_await_cancels_the_timeout(awaiting_t):
    d = awaiting_t
    child = sub(d, deps=[("later", S)])
    d.advance(5)
    p = sub(d, key="later")
    run(d, p)
    d.advance(100)  # well past the await timeout while the parent runs
    d.tick()
    assert d.status(child) == "blocked"
    d.complete(p)
    assert d.status(child) == "ready"


def test_timeout_with_one_of_two_awaited_keys_bound(awaiting_t):
    d = awaiting_t
    child = sub(d, deps=[("x", S), ("y", S)])
    sub(d, key="x")
    d.advance(10)
    d.tick()
    assert d.status(child) == "skipped"
    assert d.task(child).message == "timed out awaiting unknown dependency"


def test_awaiting_uses_the_dependents_pool_policy(make, mkpool):
    d = make([mkpool("default", 1), mkpool("lazy", 1, unknown_dependency="await")])
    w = sub(d, pool="lazy", deps=[("k", S)])
    assert d.status(w) == "blocked"
    with pytest.raises(SubmitError) as e:
        sub(d, deps=[("k", S)])
    assert e.value.code == "unknown_dependency"


def test_cancelled_waiter_is_not_bound(awaiting):
    d = awaiting
    w = sub(d, deps=[("k", S)])
    d.cancel(w)
    p = sub(d, key="k")
    assert d.task(p).dependents is None


# ---------------------------------------------------------------------------- cycles


def test_self_dependency_by_key_is_a_cycle(awaiting):
    d = awaiting
    before = trace(d)
    with pytest.raises(SubmitError) as e:
        sub(d, key="me", deps=[("me", S)])
    assert e.value.code == "cycle"
    assert trace(d) == before


def test_self_dependency_by_key_is_a_cycle_with_reject_policy(one):
    d = one
    with pytest.raises(SubmitError) as e:
        sub(d, key="me", deps=[("me", C)])
    assert e.value.code == "cycle"


@pytest.mark.parametrize(
    "graph",
    [
        {"a": ["b"], "b": ["a"]},
        {"a": ["b"], "b": ["c"], "c": ["a"]},
        {"a": [], "b": ["a", "d"], "c": ["b"], "d": ["c"]},
    ],
)
def test_intra_batch_cycle(one, graph):
    d = one
    o = TaskOptions()
    items = [(o, None, k, None, None, [(p, S) for p in ps]) for k, ps in graph.items()]
    before = trace(d)
    with pytest.raises(SubmitError) as e:
        d.core.submit_batch(d.now, items)
    assert e.value.code == "cycle"
    assert trace(d) == before


def test_cycle_through_an_awaited_key(awaiting):
    d = awaiting
    x = sub(d, key="x", deps=[("y", S)])
    before = trace(d)
    with pytest.raises(SubmitError) as e:
        sub(d, key="y", deps=[("x", S)])
    assert e.value.code == "cycle"
    assert trace(d) == before
    assert d.core.awaiting == {"y": [(d.task(x), S)]}  # x still awaits y


def test_longer_cycle_through_an_awaited_key(awaiting):
    d = awaiting
    x = sub(d, key="x", deps=[("z", S)])
    y = sub(d, key="y", deps=[(x, C)])
    with pytest.raises(SubmitError) as e:
        sub(d, key="z", deps=[(y, F)])
    assert e.value.code == "cycle"
    # a provider without the back edge is fine
    z = sub(d, key="z")
    assert d.task(z).edges() == [(d.task(x), S)]


def test_cycle_through_an_awaited_key_via_batch_members(awaiting):
    d = awaiting
    sub(d, key="x", deps=[("z", S)])
    o = TaskOptions()
    before = trace(d)
    with pytest.raises(SubmitError) as e:
        d.core.submit_batch(
            d.now, [(o, None, "z", None, None, [("m", S)]), (o, None, "m", None, None, [("x", S)])]
        )
    assert e.value.code == "cycle"
    assert trace(d) == before


def test_awaited_key_chain_without_cycle(awaiting):
    d = awaiting
    a = sub(d, key="a", deps=[("b", S)])
    b = sub(d, key="b", deps=[("c", S)])
    c = sub(d, key="c")
    end(d, c, "succeeded")
    assert d.status(b) == "ready"
    end(d, b, "succeeded")
    assert d.status(a) == "ready"


# ---------------------------------------------------------------------------- no trace


def test_rejected_submission_leaves_no_trace(make, mkpool):
    d = make([mkpool(cap=2, unknown_dependency="await", await_timeout=5.0)])
    live = sub(d, key="live")
    sub(d, key="w", deps=[("later", S)])
    sub(d, start=50)  # one reservation (limit 1)
    before = trace(d)
    o = TaskOptions()
    bad_batches = [
        # an awaiting member + a fixed start + an unknown id
        [(o, None, "n1", None, None, [("never", S)]), (o, None, "n2", None, sec(80), [(999, S)])],
        # a member that would provide an awaited key + a reservation conflict
        [(o, None, "later", None, None, [(live, S)]), (o, None, "n3", None, sec(50), None)],
        # a cycle next to otherwise fine members
        [(o, None, "n4", None, sec(90), [("n5", S)]), (o, None, "n5", None, None, [("n4", S)])],
        # duplicate keys
        [(o, None, "n6", None, None, None), (o, None, "n6", None, None, None)],
    ]
    for items in bad_batches:
        with pytest.raises(SubmitError):
            d.core.submit_batch(d.now, items)
        d.collect()
        assert trace(d) == before
    assert d.core.lookup(d.now, "later") is None
    nxt = sub(d)
    assert nxt == before[0]


# ---------------------------------------------------------------- batch planning fast path


def test_plan_member_edges_groups_kids_by_parent_in_member_order():
    from cronoq.engine.deps import plan_member_edges

    members = {"a": 0, "b": 1, "c": 2}
    got = plan_member_edges([None, [("a", S)], [("a", S), ("b", S)]], members)
    assert got == ([[1, 2], [2], []], [0, 1, 2], False)
    # a forward reference (member 0 depends on member 2) is flagged for the cycle check
    assert plan_member_edges([[("c", S)], None, None], members) == ([[], [], [0]], [1, 0, 0], True)


@pytest.mark.parametrize(
    "deps",
    [
        [[("a", ON_FAILURE)], None],  # another condition
        [[("zz", S)], None],  # a key outside the batch
        [[(7, S)], None],  # an id
        [None, [("b", S)]],  # a self-reference
    ],
)
def test_plan_member_edges_leaves_other_edges_to_the_general_path(deps):
    from cronoq.engine.deps import plan_member_edges

    assert plan_member_edges(deps, {"a": 0, "b": 1}) is None
