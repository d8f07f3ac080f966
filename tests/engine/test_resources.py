"""docs/reference/behaviour.md#resources: shared resources (semaphores, token buckets), under virtual time.

Semaphores bound concurrent holders across every pool; token buckets start full, refill at
``rate`` up to ``burst`` and never hand out more than ``burst + rate × t`` over any interval;
the engine arms its own wake-up for the instant a bucket can serve its first waiter (no
polling); a task waiting for one resource never blocks tasks that need another one or none;
a task needing several resources takes all of them at once or none.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cronoq.engine.actions import Dispatch
from cronoq.engine.model import TaskOptions
from cronoq.engine.resources import Resource
from cronoq.engine.time import NS
from cronoq.engine.time import to_ns as sec
from cronoq.errors import SubmitError

HYP = settings(max_examples=150, suppress_health_check=[HealthCheck.function_scoped_fixture])


def sem(name: str = "db", permits: int = 2) -> Resource:
    return Resource.semaphore(name, permits)


def bucket(name: str = "api", rate: float = 1.0, burst: int = 1) -> Resource:
    return Resource.token_bucket(name, rate, burst)


def running(d) -> list[int]:
    return sorted(t.id for t in d.core.leases.values())


def drain_by_wakeups(d, tick, rounds: int) -> None:
    """Complete what runs and follow only the engine's own wake-ups until nothing is ready:
    a ready task waiting on a bucket must always have a wake-up armed (nothing armed is fine
    only while attempts run: their completions come next)."""
    for _ in range(rounds):
        for tid in running(d):
            d.complete(tid)
        tick()
        if not d.core.leases and d.snapshot().ready == 0:
            break
        w = d.core.next_wakeup()
        if w is None:
            assert d.core.leases, "ready tasks wait on a bucket but no wake-up is armed"
            continue
        d.at_ns(max(w, d.now))
        tick()
    assert d.snapshot().ready == 0


def held(d, name: str) -> int:
    """Units of ``name`` held by running attempts (from the tasks, not the resource's counter)."""
    return sum((t.opts.resources or {}).get(name, 0) for t in d.core.leases.values())


def drain(d, check, rounds: int = 100) -> None:
    """Complete running attempts one at a time (ticking after each) until nothing runs."""
    for _ in range(rounds):
        d.tick()
        r = running(d)
        if not r:
            return
        d.complete(r[0])
        d.tick()
        assert check()
    raise AssertionError("did not drain")


def fixed_start(d, start: float, **opts) -> int:
    """Submit a fixed-start task (start in absolute seconds)."""
    o = TaskOptions(**opts)
    tid = d.core.submit(d.now, o, None, None, None, sec(start), None)[0]
    d.collect()
    return tid


# ---------------------------------------------------------------------------- semaphores


def test_semaphore_never_exceeds_permits(make, mkpool):
    d = make([mkpool(cap=10)], resources=[sem("db", 3)])
    ids = [d.submit(resources={"db": 1}) for _ in range(8)]
    assert d.tick() == ids[:3]
    assert held(d, "db") == 3
    assert d.core.resources["db"].available == 0
    snap = d.snapshot()
    assert snap.busy == 3 and snap.ready == 5, "waiting tasks stay ready (and pending)"
    d.complete(ids[0])
    assert d.tick() == [ids[3]], "a released permit goes to the next waiter, in order"
    assert held(d, "db") == 3
    for tid in ids[1:]:
        if d.status(tid) == "running":
            d.complete(tid)
            d.tick()
            assert held(d, "db") <= 3
    drain(d, lambda: held(d, "db") <= 3)
    assert all(d.status(t) == "succeeded" for t in ids)
    assert d.core.resources["db"].available == 3


def test_semaphore_amounts_greater_than_one(make, mkpool):
    d = make([mkpool(cap=10)], resources=[sem("db", 4)])
    a = d.submit(resources={"db": 3})
    b = d.submit(resources={"db": 2})
    c = d.submit(resources={"db": 1})
    # b does not fit (1 left); c does, and is not held back by b (no head-of-line blocking)
    assert d.tick() == [a, c]
    assert held(d, "db") == 4
    d.complete(c)
    assert d.tick() == [], "1 permit free, b needs 2"
    d.complete(a)
    assert d.tick() == [b]


def test_semaphore_shared_across_two_pools(make, mkpool):
    d = make([mkpool("a", cap=5), mkpool("b", cap=5)], resources=[sem("db", 2)])
    ta = [d.submit(pool="a", resources={"db": 1}) for _ in range(3)]
    tb = [d.submit(pool="b", resources={"db": 1}) for _ in range(3)]
    first = d.tick()
    assert len(first) == 2 and held(d, "db") == 2
    assert first == ta[:2], "permits go to the earliest waiters, whatever the pool"
    d.complete(ta[0])
    nxt = d.tick()
    assert len(nxt) == 1 and held(d, "db") == 2
    drain(d, lambda: held(d, "db") <= 2)
    assert {d.status(t) for t in ta + tb} == {"succeeded"}
    assert d.core.resources["db"].available == 2


def test_released_on_failure_cancel_and_timeout(make, mkpool):
    from cronoq.engine.model import RetryPolicy

    d = make([mkpool(cap=5)], resources=[sem("db", 1)])
    a = d.submit(resources={"db": 1}, retry=RetryPolicy.none())
    b = d.submit(resources={"db": 1})
    c = d.submit(resources={"db": 1}, timeout=sec(1))
    assert d.tick() == [a]
    d.fail(a, "boom")
    assert d.status(a) == "dead_lettered"
    assert d.tick() == [b]
    assert d.cancel(b)
    assert d.tick() == [c]
    d.advance(1).tick()  # c times out; its permit comes back
    assert d.core.resources["db"].available == 1
    assert d.status(c) == "retrying"


def test_an_unparked_task_that_ends_hands_the_units_on(make, mkpool):
    """A released permit unparks the first waiter; if that one is cancelled before it takes
    the permit, the next waiter gets it (no lost wake-up: nothing else will release it)."""
    d = make([mkpool(cap=5)], resources=[sem("db", 1)])
    a = d.submit(resources={"db": 1})
    b = d.submit(resources={"db": 1})
    c = d.submit(resources={"db": 1})
    assert d.tick() == [a]  # b and c park on db
    d.complete(a)  # db is free: b goes back to its lane (it would run at the next tick)
    assert d.cancel(b)
    assert d.tick() == [c]
    assert d.core.resources["db"].available == 0


@HYP
@given(
    permits=st.integers(1, 4),
    ops=st.lists(
        st.one_of(
            st.tuples(st.just("submit"), st.sampled_from(["a", "b"]), st.integers(1, 4)),
            st.tuples(st.just("complete"), st.integers(0, 50), st.just(0)),
            st.tuples(st.just("cancel"), st.integers(0, 50), st.just(0)),
        ),
        max_size=60,
    ),
)
def test_semaphore_bound_property(make, mkpool, permits, ops):
    """Random submits/completions/cancels over two pools: held ≤ permits, and nothing starves."""
    d = make([mkpool("a", cap=3), mkpool("b", cap=3)], resources=[sem("db", permits)])
    ids: list[int] = []
    for op, x, k in ops:
        if op == "submit":
            ids.append(d.submit(pool=x, resources={"db": min(k, permits)}))
        elif op == "complete":
            r = running(d)
            if r:
                d.complete(r[x % len(r)])
        elif ids:
            d.cancel(ids[x % len(ids)])
        d.tick()
        assert held(d, "db") <= permits
        assert d.core.resources["db"].available == permits - held(d, "db")
    for _ in range(len(ids) + 1):
        for tid in running(d):
            d.complete(tid)
        d.tick()
        assert held(d, "db") <= permits
    assert all(d.status(t) in ("succeeded", "cancelled") for t in ids)
    assert d.core.resources["db"].available == permits


# ---------------------------------------------------------------------------- token buckets


def test_bucket_starts_full(make, mkpool):
    d = make([mkpool(cap=10)], resources=[bucket("api", rate=1.0, burst=3)])
    ids = [d.submit(resources={"api": 1}) for _ in range(5)]
    assert d.tick() == ids[:3], "burst tokens are available at once"
    assert d.core.resources["api"].tokens(d.now) == 0


def test_bucket_refills_at_rate_up_to_burst(make, mkpool):
    d = make([mkpool(cap=10)], resources=[bucket("api", rate=2.0, burst=3)])
    r = d.core.resources["api"]
    ids = [d.submit(resources={"api": 1}) for _ in range(3)]
    assert d.tick() == ids
    d.advance(0.25)
    assert r.tokens(d.now) == pytest.approx(0.5)
    d.advance(0.25)
    assert r.tokens(d.now) == pytest.approx(1.0)
    d.advance(100)  # a long idle period banks no more than burst
    assert r.tokens(d.now) == 3
    more = [d.submit(resources={"api": 1}) for _ in range(5)]
    assert d.tick() == more[:3]
    assert d.core.resources["api"].tokens(d.now) == 0


def test_tokens_are_consumed_not_returned(make, mkpool):
    d = make([mkpool(cap=10)], resources=[bucket("api", rate=1.0, burst=1)])
    a = d.submit(resources={"api": 1})
    b = d.submit(resources={"api": 1})
    assert d.tick() == [a]
    d.advance(0.1)
    d.complete(a)
    assert d.tick() == [], "completing an attempt gives no token back"
    assert d.status(b) == "ready"


def test_engine_arms_wakeup_for_the_refill_instant(make, mkpool):
    d = make([mkpool(cap=10)], resources=[bucket("api", rate=4.0, burst=1)])
    a = d.submit(resources={"api": 1})
    b = d.submit(resources={"api": 1})
    assert d.tick() == [a]
    # empty bucket at t=0, 1 token at 4/s -> exactly 0.25 s
    assert d.core.next_wakeup() == sec(0.25)
    d.at(0.25 - 1e-9)
    assert d.tick() == [], "not before the instant"
    d.at(0.25)
    assert d.tick() == [b]
    assert d.core.next_wakeup() is None, "nothing waits: no timer armed (no polling)"


def test_wakeup_for_multi_token_need(make, mkpool):
    d = make([mkpool(cap=10)], resources=[bucket("api", rate=2.0, burst=4)])
    a = d.submit(resources={"api": 4})
    b = d.submit(resources={"api": 3})
    assert d.tick() == [a]
    assert d.core.next_wakeup() == sec(1.5), "3 tokens at 2/s"
    d.at(1.0)
    assert d.tick() == []
    assert d.core.next_wakeup() == sec(1.5), "re-arming keeps the same instant"
    d.at(1.5)
    assert d.tick() == [b]


def test_wakeup_is_rearmed_for_the_next_waiter(make, mkpool):
    d = make([mkpool(cap=10)], resources=[bucket("api", rate=1.0, burst=1)])
    ids = [d.submit(resources={"api": 1}) for _ in range(4)]
    assert d.tick() == ids[:1]
    for i in range(1, 4):
        assert d.core.next_wakeup() == sec(i)
        d.at_ns(d.core.next_wakeup())
        assert d.tick() == [ids[i]]
    assert d.core.next_wakeup() is None


@HYP
@given(
    rate=st.sampled_from([0.3, 1.0, 1.7, 2.5, 7.0, 33.3]),
    burst=st.integers(1, 5),
    k=st.integers(1, 5),
)
def test_wakeup_instant_is_exact_for_any_rate(make, mkpool, rate, burst, k):
    """At the armed instant the waiter dispatches: no early wake-ups, no missed one."""
    k = min(k, burst)
    d = make([mkpool(cap=4)], resources=[bucket("api", rate=rate, burst=burst)])
    d.submit(resources={"api": burst})
    b = d.submit(resources={"api": k})
    d.tick()
    w = d.core.next_wakeup()
    assert w is not None
    assert w >= k / rate * NS - 1, "the wake-up is not earlier than the refill"
    assert w <= k / rate * NS + 2
    d.at_ns(w)
    assert d.tick() == [b]


@HYP
@given(
    rate=st.sampled_from([0.5, 1.0, 3.0, 10.0]),
    burst=st.integers(1, 4),
    ops=st.lists(
        st.one_of(
            st.tuples(st.just("submit"), st.integers(1, 4)),
            st.tuples(st.just("complete"), st.integers(0, 20)),
            st.tuples(st.just("step"), st.integers(0, 1500)),  # ms
            st.tuples(st.just("wake"), st.just(0)),  # jump to the engine's own wake-up
        ),
        max_size=80,
    ),
)
def test_bucket_never_issues_more_than_burst_plus_rate_t(make, mkpool, rate, burst, ops):
    d = make([mkpool(cap=6)], resources=[bucket("api", rate=rate, burst=burst)])
    issued: list[tuple[int, int]] = []  # (time ns, tokens)

    def tick():
        d.core.tick(d.now)
        for a in d.collect():
            if isinstance(a, Dispatch):
                issued.append((d.now, a.task.opts.resources["api"]))

    for op, x in ops:
        if op == "submit":
            d.submit(resources={"api": min(x, burst)})
        elif op == "complete":
            r = running(d)
            if r:
                d.complete(r[x % len(r)])
        elif op == "step":
            d.advance(x / 1000)
        else:
            w = d.core.next_wakeup()
            if w is not None and w > d.now:
                d.at_ns(w)
        tick()
    # liveness: following only the engine's own wake-ups, every task eventually runs
    drain_by_wakeups(d, tick, 500)
    # the bound, over every interval between two dispatch instants
    times = sorted({t for t, _ in issued})
    for i, t0 in enumerate(times):
        total = 0
        for t1 in times[i:]:
            total = sum(k for t, k in issued if t0 <= t <= t1)
            assert total <= burst + rate * (t1 - t0) / NS + 1e-9, (t0, t1, total)


# ---------------------------------------------------------------------------- no head-of-line blocking


def test_waiting_on_one_resource_does_not_block_others(make, mkpool):
    d = make([mkpool(cap=10)], resources=[sem("db", 1), bucket("api", rate=1.0, burst=1)])
    a = d.submit(resources={"db": 1})
    b = d.submit(resources={"db": 1})  # waits for db
    c = d.submit(resources={"api": 1})
    e = d.submit(resources={"api": 1})  # waits for api
    f = d.submit()  # needs nothing
    g = d.submit(resources={"db": 1})  # waits behind b
    assert d.tick() == [a, c, f]
    assert {d.status(x) for x in (b, e, g)} == {"ready"}
    d.complete(a)
    assert d.tick() == [b], "the released permit goes to the oldest waiter"
    d.at(1.0)
    assert d.tick() == [e]


def test_waiting_on_a_resource_does_not_block_higher_or_lower_classes(make, mkpool):
    d = make([mkpool(cap=10)], resources=[sem("db", 1)])
    a = d.submit(0, resources={"db": 1})  # critical, holds db
    b = d.submit(0, resources={"db": 1})  # critical, waits
    lows = [d.submit(3) for _ in range(3)]
    assert d.tick() == [a, *lows]
    assert d.status(b) == "ready"


def test_parked_task_keeps_its_priority_when_the_resource_frees(make, mkpool):
    d = make([mkpool(cap=1)], resources=[sem("db", 1)])
    a = d.submit(2, resources={"db": 1})
    assert d.tick() == [a]
    low = d.submit(3, resources={"db": 1})
    high = d.submit(1, resources={"db": 1})
    assert d.tick() == []
    d.complete(a)
    assert d.tick() == [high]
    assert d.status(low) == "ready"


# ---------------------------------------------------------------------------- atomic acquisition


def test_multi_resource_tasks_acquire_atomically(make, mkpool):
    d = make([mkpool(cap=10)], resources=[bucket("api", rate=1.0, burst=1), sem("db", 1)])
    holder = d.submit(resources={"db": 1})
    both = d.submit(resources={"api": 1, "db": 1})  # api available, db not
    api_only = d.submit(resources={"api": 1})
    # "both" must not take the api token while it cannot get db: api_only gets it
    assert d.tick() == [holder, api_only]
    assert d.core.resources["api"].tokens(d.now) == 0
    assert d.core.resources["db"].available == 0
    d.complete(holder)
    assert d.tick() == [], "db is free now, but the bucket is empty: take neither"
    assert d.core.resources["db"].available == 1, "no permit taken while waiting for tokens"
    w = d.core.next_wakeup()
    assert w == sec(1.0)
    d.at_ns(w)
    assert d.tick() == [both]
    assert d.core.resources["db"].available == 0
    assert d.core.resources["api"].tokens(d.now) == 0


def test_multi_resource_task_vs_single_resource_waiters(make, mkpool):
    d = make([mkpool(cap=10)], resources=[sem("x", 1), sem("y", 1)])
    hx = d.submit(resources={"x": 1})
    hy = d.submit(resources={"y": 1})
    xy = d.submit(resources={"x": 1, "y": 1})
    assert d.tick() == [hx, hy]
    d.complete(hx)
    assert d.tick() == []
    assert d.core.resources["x"].available == 1, "x not taken while y is missing"
    d.complete(hy)
    assert d.tick() == [xy]
    assert d.core.resources["x"].available == 0 and d.core.resources["y"].available == 0
    d.complete(xy)
    assert d.core.resources["x"].available == 1 and d.core.resources["y"].available == 1


# ---------------------------------------------------------------------------- fixed-start tasks


def test_due_fixed_start_task_waits_for_bucket_refill_without_polling(make, mkpool):
    """A fixed-start task whose bucket is empty at its start runs when tokens refill
    (the engine arms that instant itself), not only when its tolerance runs out."""
    d = make([mkpool(cap=4)], resources=[bucket("api", rate=2.0, burst=1)])
    a = d.submit(resources={"api": 1})
    assert d.tick() == [a]  # bucket empty at t=0, one token at t=0.5
    fs = fixed_start(d, 0.2, resources={"api": 1}, tolerance=sec(5))
    while True:
        w = d.core.next_wakeup()
        assert w is not None
        if w > sec(0.5):
            break
        d.at_ns(w)
        if d.tick():
            break
    assert d.status(fs) == "running", f"still {d.status(fs)} at {d.now / NS} s"
    assert d.now == sec(0.5)


def test_due_task_waiting_on_resource_does_not_block_other_due_tasks(make, mkpool):
    d = make([mkpool(cap=4)], resources=[sem("db", 1)])
    holder = d.submit(resources={"db": 1})
    assert d.tick() == [holder]
    first = fixed_start(d, 1.0, resources={"db": 1}, tolerance=sec(10))
    second = fixed_start(d, 1.0, tolerance=sec(10))
    d.at(1.0)
    assert d.tick() == [second], "the due task blocked by db must not hold back the other"
    assert d.status(first) == "ready"
    d.complete(holder)
    assert d.tick() == [first]


# ---------------------------------------------------------------------------- validation


def test_unknown_resource(make, mkpool):
    d = make([mkpool(cap=1)], resources=[sem("db", 1)])
    before = d.core.next_seq
    with pytest.raises(SubmitError) as ei:
        d.submit(resources={"nope": 1})
    assert ei.value.code == "unknown_resource"
    assert "nope" in ei.value.message
    assert d.core.next_seq == before


def test_unknown_resource_without_any_configured(make, mkpool):
    d = make([mkpool(cap=1)])
    with pytest.raises(SubmitError) as ei:
        d.submit(resources={"db": 1})
    assert ei.value.code == "unknown_resource"


@pytest.mark.parametrize(("res", "amount"), [(sem("db", 2), 3), (bucket("db", 1.0, 2), 3)])
def test_amount_greater_than_capacity(make, mkpool, res, amount):
    d = make([mkpool(cap=1)], resources=[res])
    with pytest.raises(SubmitError) as ei:
        d.submit(resources={"db": amount})
    assert ei.value.code == "resource_exceeds_capacity"
    d.submit(resources={"db": 2})  # == capacity is fine


@pytest.mark.parametrize("amount", [0, -1, 1.5, True, "1"])
def test_invalid_amount(make, mkpool, amount):
    d = make([mkpool(cap=1)], resources=[sem("db", 2)])
    with pytest.raises(SubmitError) as ei:
        d.submit(resources={"db": amount})
    assert ei.value.code == "invalid"


def test_batch_checks_resources_atomically(make, mkpool):
    d = make([mkpool(cap=1)], resources=[sem("db", 2)])
    items = [
        (TaskOptions(resources={"db": 1}), None, None, None, None, None),
        (TaskOptions(resources={"zz": 1}), None, None, None, None, None),
    ]
    with pytest.raises(SubmitError) as ei:
        d.core.submit_batch(d.now, items)
    assert ei.value.code == "unknown_resource"
    assert d.totals()["submitted"] == 0


@pytest.mark.parametrize("permits", [0, -1, 1.5, True, None, "2"])
def test_semaphore_validation(permits):
    with pytest.raises(ValueError):
        Resource.semaphore("db", permits)


@pytest.mark.parametrize(
    ("rate", "burst"),
    [
        (0, 1),
        (-1.0, 1),
        (float("inf"), 1),
        (float("nan"), 1),
        (True, 1),
        ("1", 1),
        (1.0, 0),
        (1.0, -2),
        (1.0, 1.5),
        (1.0, True),
    ],
)
def test_token_bucket_validation(rate, burst):
    with pytest.raises(ValueError):
        Resource.token_bucket("api", rate, burst)


def test_resource_name_validation_and_duplicates():
    from cronoq.engine.config import CoreConfig, PoolConfig

    with pytest.raises(ValueError):
        Resource.semaphore("", 1)
    with pytest.raises(ValueError, match="duplicate resource name 'db'"):
        CoreConfig([PoolConfig("p")], resources=[sem("db", 1), bucket("db", 1.0, 1)])


def test_resource_repr_and_capacity():
    s = Resource.semaphore("db", 3)
    b = Resource.token_bucket("api", 2, 5)
    assert s.capacity == 3 and b.capacity == 5
    assert b.rate == 2.0 and isinstance(b.rate, float)
    assert "semaphore" in repr(s) and "token_bucket" in repr(b)


@settings(max_examples=100)
@given(
    st.sampled_from(["semaphore", "bucket"]),
    st.lists(st.tuples(st.integers(1, 4), st.integers(0, NS // 2)), min_size=1, max_size=40),
)
def test_try_take_is_can_take_then_take(kind: str, steps: list[tuple[int, int]]) -> None:
    """The one-call dispatch path takes exactly when can_take says so, and takes the same."""
    from cronoq.engine.resources import Semaphore, TokenBucket

    def make() -> Semaphore | TokenBucket:
        if kind == "semaphore":
            return Semaphore(Resource.semaphore("r", 5))
        return TokenBucket(Resource.token_bucket("r", rate=3.0, burst=5), 0)

    a, b = make(), make()
    now = 0
    for k, dt in steps:
        now += dt
        ok = a.can_take(k, now)
        if ok:
            a.take(k, now)
        assert b.try_take(k, now) == ok
        assert a.in_use(now) == b.in_use(now)


def test_bucket_wakeup_survives_a_full_drain_regression(make, mkpool):
    """The property test above once failed here: the last task became ready, took the last free
    slot's turn behind running attempts, and no timer was armed - correctly, since the next
    completion frees its slot (the liveness loop now completes running attempts first)."""
    d = make([mkpool(cap=6)], resources=[bucket("api", rate=10.0, burst=3)])

    def tick():
        d.core.tick(d.now)
        d.collect()

    for _ in range(7):
        d.submit(resources={"api": 1})
        tick()
    w = d.core.next_wakeup()
    if w is not None and w > d.now:
        d.at_ns(w)
    tick()
    d.advance(0.3)
    tick()
    drain_by_wakeups(d, tick, 50)


def test_an_empty_resource_map_asks_for_nothing(make, mkpool):
    """``resources={}`` built straight into the engine's options (the runtime turns it into
    None) is a task asking no resource, not a crash at dispatch or completion."""
    d = make([mkpool(cap=2)], resources=[sem("db", 1)])
    tid = d.submit(resources={})
    assert d.tick() == [tid]
    d.complete(tid)
    d.tick()
    assert d.status(tid) == "succeeded"
    assert d.core.resources["db"].available == 1
