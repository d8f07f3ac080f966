"""docs/reference/behaviour.md#fairness: weighted fair sharing between tenants within a priority class.

Each dispatch adds ``1/weight`` to its tenant's virtual time; the tenant with the lowest virtual
time and ready work goes next (ties FIFO); tasks without a tenant form one tenant; a tenant that
returns after idling starts at the current minimum virtual time (no banked credit).
"""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cronoq.engine.config import PoolConfig

HIGH, NORMAL, LOW = 1, 2, 3


def fair(make, mkpool, cap=1, weights=None, **kw):
    return make([mkpool(cap=cap, fair_share=True, tenant_weights=weights or {}, **kw)])


def step(d) -> list[int]:
    """Complete whatever runs, then tick: the ids dispatched by that tick."""
    for t in list(d.core.leases.values()):
        d.complete(t.id)
    return d.tick()


def tenant_of(d, tid):
    return d.task(tid).opts.tenant


def run_backlogged(d, tenants, n, priority=NORMAL, depth=5):
    """Dispatch ``n`` tasks with every tenant always backlogged (each dispatch is replaced)."""
    for t in tenants:
        for _ in range(depth):
            d.submit(priority, tenant=t)
    order = []
    while len(order) < n:
        got = step(d)
        assert got, "nothing dispatched although every tenant is backlogged"
        for tid in got:
            t = tenant_of(d, tid)
            order.append(t)
            d.submit(priority, tenant=t)
    return order[:n]


def test_weighted_shares_over_10000_dispatches(make, mkpool):
    d = fair(make, mkpool, weights={"a": 3, "b": 1, "c": 1})
    order = run_backlogged(d, ["a", "b", "c"], 10_000)
    shares = Counter(order)
    assert shares["a"] / 10_000 == pytest.approx(0.60, abs=0.02)
    assert shares["b"] / 10_000 == pytest.approx(0.20, abs=0.02)
    assert shares["c"] / 10_000 == pytest.approx(0.20, abs=0.02)
    # and not just on average: every window of 50 dispatches is close to 3:1:1 too
    for lo in range(0, 10_000, 50):
        w = Counter(order[lo : lo + 50])
        assert abs(w["a"] - 30) <= 2 and abs(w["b"] - 10) <= 2 and abs(w["c"] - 10) <= 2, (lo, w)


def test_weighted_shares_with_several_slots(make, mkpool):
    d = fair(make, mkpool, cap=4, weights={"a": 3, "b": 1, "c": 1})
    order = run_backlogged(d, ["a", "b", "c"], 10_000, depth=10)
    shares = Counter(order)
    for t, want in (("a", 0.6), ("b", 0.2), ("c", 0.2)):
        assert shares[t] / 10_000 == pytest.approx(want, abs=0.02)


def test_equal_weights_by_default(make, mkpool):
    d = fair(make, mkpool)
    order = run_backlogged(d, ["x", "y"], 1000)
    assert Counter(order) == {"x": 500, "y": 500}
    assert order[:6] == ["x", "y", "x", "y", "x", "y"], "ties go FIFO: x's head is older"


def test_without_fair_share_order_is_fifo(make, mkpool):
    d = make([mkpool(cap=1, tenant_weights={"a": 3})])
    a = [d.submit(tenant="a") for _ in range(5)]
    b = [d.submit(tenant="b") for _ in range(5)]
    order = []
    for _ in range(10):
        order.extend(step(d))
    assert order == a + b


def test_tasks_without_tenant_form_one_tenant(make, mkpool):
    d = fair(make, mkpool)
    for _ in range(30):
        d.submit()  # no tenant
    for _ in range(30):
        d.submit(tenant="a")
    order = []
    for _ in range(20):
        order.extend(step(d))
    counts = Counter(tenant_of(d, tid) for tid in order)
    assert counts == {None: 10, "a": 10}, "30 untenanted tasks share like one tenant"


def test_untenanted_shares_with_weighted_tenants(make, mkpool):
    d = fair(make, mkpool, weights={"a": 2})
    order = run_backlogged(d, [None, "a", "b"], 4000)
    c = Counter(order)
    assert c["a"] / 4000 == pytest.approx(0.5, abs=0.02)
    assert c[None] / 4000 == pytest.approx(0.25, abs=0.02)
    assert c["b"] / 4000 == pytest.approx(0.25, abs=0.02)


def test_returning_tenant_has_no_banked_credit(make, mkpool):
    d = fair(make, mkpool)
    b0 = d.submit(tenant="b")
    assert d.tick() == [b0]  # b ran once (vt 1) and then went idle
    for _ in range(60):
        d.submit(tenant="a")
    for _ in range(50):
        step(d)  # a alone: its virtual time grows to ~50
    for _ in range(20):
        d.submit(tenant="b")
    order = []
    for _ in range(20):
        order.extend(tenant_of(d, tid) for tid in step(d))
    c = Counter(order)
    # b returns at the minimum virtual time of the active tenants, not at its old (low) one:
    # it shares 50/50 instead of running 20 in a row
    assert abs(c["a"] - c["b"]) <= 1, order
    assert "aaa" not in "".join(order) and "bbb" not in "".join(order), order


def test_new_tenant_starts_at_minimum_virtual_time(make, mkpool):
    d = fair(make, mkpool, weights={"a": 1, "b": 1})
    for _ in range(40):
        d.submit(tenant="a")
        d.submit(tenant="b")
    for _ in range(40):
        step(d)  # a and b at vt ~20 each
    for _ in range(20):
        d.submit(tenant="new")
    order = []
    for _ in range(30):
        order.extend(tenant_of(d, tid) for tid in step(d))
    c = Counter(order)
    assert c["new"] == 10 and c["a"] == 10 and c["b"] == 10, c


def test_idle_tenant_keeps_no_debt_below_others(make, mkpool):
    """A tenant that used more than its share earlier keeps its higher virtual time while the
    others catch up: the floor only ever raises a returning tenant's virtual time."""
    d = fair(make, mkpool)
    for _ in range(10):
        d.submit(tenant="a")
    for _ in range(10):
        step(d)  # a alone: vt_a = 10
    for _ in range(10):
        d.submit(tenant="a")
    for _ in range(20):
        d.submit(tenant="b")  # b new: starts at min active vt = 10
    order = []
    for _ in range(10):
        order.extend(tenant_of(d, tid) for tid in step(d))
    assert Counter(order) == {"a": 5, "b": 5}


def test_fairness_applies_within_a_priority_class_only(make, mkpool):
    d = fair(make, mkpool, weights={"a": 1, "b": 100})
    hi_a = [d.submit(HIGH, tenant="a") for _ in range(5)]
    lo_b = [d.submit(NORMAL, tenant="b") for _ in range(5)]
    order = []
    for _ in range(10):
        order.extend(step(d))
    assert order == hi_a + lo_b, "b's weight does not let Normal work pass a's High work"


def test_virtual_time_is_per_class(make, mkpool):
    d = fair(make, mkpool)
    for _ in range(10):
        d.submit(HIGH, tenant="a")
    for _ in range(10):
        step(d)  # a's High virtual time is 10
    na = [d.submit(NORMAL, tenant="a") for _ in range(3)]
    nb = [d.submit(NORMAL, tenant="b") for _ in range(3)]
    order = []
    for _ in range(6):
        order.extend(step(d))
    # in the Normal class a has no history: a and b alternate, a first (FIFO tie)
    assert order == [na[0], nb[0], na[1], nb[1], na[2], nb[2]]


def test_fair_share_with_cancelled_tasks(make, mkpool):
    d = fair(make, mkpool)
    a = [d.submit(tenant="a") for _ in range(6)]
    b = [d.submit(tenant="b") for _ in range(6)]
    for tid in a[:3]:
        assert d.cancel(tid)
    order = []
    for _ in range(9):
        order.extend(step(d))
    assert sorted(order) == sorted(a[3:] + b)
    assert [tenant_of(d, t) for t in order[:6]] == ["a", "b", "a", "b", "a", "b"]


def test_fair_share_keeps_priority_between_classes_with_several_tenants(make, mkpool):
    d = fair(make, mkpool, cap=2)
    lows = [d.submit(LOW, tenant=t) for t in ("x", "y") for _ in range(3)]
    highs = [d.submit(HIGH, tenant=t) for t in ("x", "y") for _ in range(2)]
    first = d.tick()
    assert set(first) <= set(highs)
    order = list(first)
    for _ in range(10):
        order.extend(step(d))
    assert set(order[:4]) == set(highs)
    assert set(order[4:]) == set(lows)


def test_tenant_weight_validation():
    for bad in (0, -1, float("inf"), float("nan"), True, "2"):
        with pytest.raises(ValueError, match="tenant weights must be finite and > 0"):
            PoolConfig("p", tenant_weights={"a": bad})
    PoolConfig("p", tenant_weights={"a": 0.5, "b": 10})


@settings(max_examples=60, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    weights=st.lists(st.sampled_from([0.5, 1, 2, 3, 5]), min_size=2, max_size=4),
    n=st.integers(50, 400),
)
def test_virtual_times_stay_within_one_step(make, mkpool, weights, n):
    """With every tenant backlogged, counts/weight never drift apart by more than one step."""
    names = [f"t{i}" for i in range(len(weights))]
    w = dict(zip(names, weights))
    d = fair(make, mkpool, weights=w)
    order = run_backlogged(d, names, n, depth=2)
    c = Counter(order)
    vts = [c[t] / w[t] for t in names]
    assert max(vts) - min(vts) <= max(1 / x for x in weights) + 1e-9, (c, w)


def test_no_credit_when_a_tenant_arrives_while_no_work_is_queued(make, mkpool):
    """A moment in which no ready work is queued (everything dispatched, still running) does not
    reset the virtual clock: a tenant arriving then starts at the current virtual time, not at
    its stale (or initial) one, so it cannot monopolize the pool afterwards."""
    d = fair(make, mkpool)
    for _ in range(50):
        d.submit(tenant="a")
    for _ in range(50):
        step(d)  # a alone: vt_a = 50; a's queue is now empty, its last task still runs
    assert d.snapshot().ready == 0
    b = [d.submit(tenant="b") for _ in range(20)]  # b arrives while nothing is queued
    a = [d.submit(tenant="a") for _ in range(20)]
    order = []
    for _ in range(20):
        order.extend(tenant_of(d, tid) for tid in step(d))
    c = Counter(order)
    assert abs(c["a"] - c["b"]) <= 2, ("".join(t or "-" for t in order), b, a)
