"""docs/concepts/resources.md#keyed-resources: per-key semaphores and token buckets, their
``limits``, ``max_keys`` and ``idle_ttl``, the policies for the excess, and recovery, under
virtual time."""

from __future__ import annotations

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from cronoq.engine.actions import Abort, Dispatch, Persist
from cronoq.engine.config import CoreConfig, PoolConfig
from cronoq.engine.core import Core
from cronoq.engine.keyed import NEVER, Keyed, fill_time
from cronoq.engine.model import TaskOptions
from cronoq.engine.mutations import Recovered, RecoveredTask, RecoveredTerminal, Submitted
from cronoq.engine.resources import Resource
from cronoq.engine.time import NS
from cronoq.engine.units import TokenBucket
from cronoq.errors import SubmitError


def running(d) -> list[int]:
    return sorted(t.id for t in d.core.leases.values())


def per_customer(permits: int = 2, **kw) -> Resource:
    return Resource.semaphore("customer", permits, per_key=True, **kw)


# ------------------------------------------------------------------ queue (the default)


def test_each_key_has_its_own_permits(make, mkpool):
    d = make([mkpool(cap=10)], resources=[per_customer(2)])
    a = [d.submit(resources={"customer:a": 1}) for _ in range(4)]
    b = [d.submit(resources={"customer:b": 1}) for _ in range(3)]
    assert d.tick() == a[:2] + b[:2]
    d.complete(a[0])
    assert d.tick() == [a[2]]
    assert d.status(a[3]) == "ready" and d.status(b[2]) == "ready"


def test_a_busy_key_never_holds_back_other_keys(make, mkpool):
    d = make([mkpool(cap=3)], resources=[per_customer(1)])
    hot = [d.submit(resources={"customer:hot": 1}) for _ in range(50)]
    cold = d.submit(resources={"customer:cold": 1})
    plain = d.submit()
    assert d.tick() == [hot[0], cold, plain]
    d.complete(cold)
    d.complete(plain)
    late = d.submit(resources={"customer:late": 1})
    assert d.tick() == [late]


def test_keys_free_in_score_order(make, mkpool):
    d = make([mkpool(cap=1)], resources=[per_customer(1)])
    x1 = d.submit(resources={"customer:x": 1})
    x2 = d.submit(resources={"customer:x": 1})
    y1 = d.submit(resources={"customer:y": 1})
    assert d.tick() == [x1]
    d.complete(x1)
    assert d.tick() == [x2], "x2 was submitted first: equal scores go in submission order"
    d.complete(x2)
    assert d.tick() == [y1]


def test_limits_override_the_capacity_of_given_keys(make, mkpool):
    d = make([mkpool(cap=10)], resources=[per_customer(1, limits={"vip-7": 3})])
    vip = [d.submit(resources={"customer:vip-7": 1}) for _ in range(4)]
    other = [d.submit(resources={"customer:o": 1}) for _ in range(2)]
    assert d.tick() == vip[:3] + other[:1]
    with pytest.raises(SubmitError) as e:
        d.submit(resources={"customer:o": 2})
    assert e.value.code == "resource_exceeds_capacity"
    d.submit(resources={"customer:vip-7": 2})  # within its own limit


def test_keyed_and_unkeyed_resources_combine_all_or_nothing(make, mkpool):
    d = make([mkpool(cap=10)], resources=[per_customer(1), Resource.semaphore("db", 1)])
    a = d.submit(resources={"customer:a": 1, "db": 1})
    b = d.submit(resources={"customer:b": 1, "db": 1})
    c = d.submit(resources={"customer:b": 1})
    assert d.tick() == [a, c]
    assert d.core.res.unit("customer:b").available == 0
    d.complete(c)
    assert d.tick() == []
    assert d.core.res.unit("customer:b").available == 1, "b takes no key permit while db is held"
    d.complete(a)
    assert d.tick() == [b]


def test_per_key_token_buckets_refill_independently(make, mkpool):
    d = make([mkpool(cap=10)], resources=[Resource.token_bucket("api", 1.0, 1, per_key=True)])
    a = [d.submit(resources={"api:a": 1}) for _ in range(2)]
    b = d.submit(resources={"api:b": 1})
    assert d.tick() == [a[0], b]
    assert d.wakeup_in() == NS, "a wake-up is armed for key a's refill"
    d.advance(1.0)
    assert d.tick() == [a[1]]


RATES = st.one_of(
    st.sampled_from([1e-3, 0.3, 1.0, 1.7, 7.0, 33.3, 1e3, 1e9, 3e9]),
    st.floats(1e-3, 1e10, allow_nan=False, allow_infinity=False),
)


@settings(max_examples=300, deadline=None)
@given(rate=RATES, capacity=st.integers(1, 10_000))
@example(rate=0.0010823114855468973, capacity=9999)  # 9.2e15 ns: past 2**53
def test_fill_time_is_the_least_time_a_bucket_takes_to_fill_from_empty(rate, capacity):
    # KeyBucket.try_take's fast path: idle >= fill means full, exactly as the refill computes it
    fill = fill_time(rate, capacity)
    assert int(rate * fill) >= capacity * NS
    if fill < 2**53:  # past 2**53 ns floats step by more than 1 ns: a sufficient time only
        assert fill == 0 or int(rate * (fill - 1)) < capacity * NS, "the least such time"


@pytest.mark.parametrize(
    ("rate", "capacity"), [(1.0, 10**7), (7.0, 10**8), (0.37, 10**9), (1e-6, 10**9), (1e-300, 1)]
)
def test_fill_time_of_very_slow_buckets_is_sufficient_and_finite(rate, capacity):
    # past 2**53 ns floats step by more than 1 ns (a sufficient time, not the least); past
    # 2**62 ns, NEVER (the refill is always computed)
    fill = fill_time(rate, capacity)
    if capacity * NS / rate < 2**62:
        assert fill < NEVER
        assert all(int(rate * (fill + d)) >= capacity * NS for d in (0, 1, 2**20, 2**40))
    else:
        assert fill == NEVER


@settings(max_examples=200, deadline=None)
@given(
    rate=RATES,
    burst=st.integers(1, 50),
    big=st.integers(1, 50),
    ops=st.lists(
        st.tuples(
            st.sampled_from(["none", "near", "fill", "beyond", "any"]),
            st.integers(-3, 3),
            st.integers(1, 50),
            st.sampled_from(["none", "near", "fill", "any"]),
        ),
        max_size=40,
    ),
)
def test_key_buckets_take_exactly_as_a_plain_bucket(rate, burst, big, ops):
    """A key's bucket (with the skipped refill when idle past ``Keyed.fill``, at a take and when
    its last task ends) holds, issues and refuses exactly what a plain ``TokenBucket`` of its
    capacity does, at every idle time around the fill time (a key with a bigger ``limits``
    override sets the resource's fill time): so it never over-issues."""
    cfg = Resource.token_bucket("api", rate, burst, per_key=True, limits={"big": big})
    kr = Keyed(cfg, 0)
    for full in ("api:small", "api:big"):
        u = kr.ensure(full, 0)
        ref = TokenBucket(Resource.token_bucket("ref", rate, u.capacity), 0)
        own = fill_time(rate, u.capacity)
        gaps = {"none": 0, "near": own, "fill": kr.fill, "beyond": 3 * kr.fill + 1}
        now = 0
        for where, delta, k, then in ops:
            now += max(0, gaps.get(where, abs(delta) * 7919) + delta)
            k = min(k, u.capacity)
            u.live += k  # (admitted, as Core.admit counts it)
            kr.live += k
            taken = u.try_take(k, now)
            assert taken == ref.try_take(k, now)
            assert (u.nano, u.last) == (ref.nano, ref.last)
            if taken:  # it ran and succeeded: the key is idle again, refilled up to then
                now += max(0, gaps.get(then, 7919) + delta)
                u.finish(None, k, now)  # type: ignore[arg-type]  # (a queue key ignores the task)
                ref._refill(now)
            else:
                u.live -= k
                kr.live -= k
            assert (u.nano, u.last, u.live) == (ref.nano, ref.last, 0)
            assert 0 <= u.nano <= u.capacity * NS


# ------------------------------------------------------------------ max_keys and idle_ttl


def test_max_keys_refuses_a_new_key_until_an_idle_one_expires(make, mkpool):
    d = make([mkpool(cap=10)], resources=[per_customer(1, max_keys=2, idle_ttl=10.0)])
    a = d.submit(resources={"customer:a": 1})
    b = d.submit(resources={"customer:b": 1})
    d.submit(resources={"customer:a": 1})  # an existing key needs no room
    with pytest.raises(SubmitError) as e:
        d.submit(resources={"customer:c": 1})
    assert e.value.code == "overloaded" and "'customer'" in e.value.message
    d.tick()
    d.complete(b)
    d.advance(9.0)
    with pytest.raises(SubmitError):
        d.submit(resources={"customer:c": 1})  # b was used 9 s ago: it still counts
    d.advance(1.0)
    c = d.submit(resources={"customer:c": 1})  # b is forgotten
    assert d.core.res.keyed["customer"].live_keys(d.now) == 2
    assert d.status(a) == "running" and d.status(c) == "ready"


def test_a_forgotten_key_starts_with_a_full_bucket(make, mkpool):
    bucket = Resource.token_bucket("api", 0.01, 2, per_key=True, idle_ttl=5.0)
    d = make([mkpool(cap=10)], resources=[bucket])
    ids = [d.submit(resources={"api:k": 1}) for _ in range(2)]
    assert d.tick() == ids
    for t in ids:
        d.complete(t)
    d.advance(4.0)
    x = d.submit(resources={"api:k": 1})
    assert d.tick() == [], "4 s after its last use the key keeps its empty bucket"
    d.cancel(x)
    d.advance(5.0)
    y = [d.submit(resources={"api:k": 1}) for _ in range(2)]
    assert d.tick() == y, "idle for idle_ttl: forgotten, the bucket starts full again"


@pytest.mark.parametrize("db", [False, True])
def test_shared_options_follow_a_forgotten_key_to_its_new_unit(make, mkpool, db):
    # Core.admit, _fill and complete take a one-resource task's unit from its options
    # (opts.single, no dict lookup); once the key is forgotten that unit is gone, and options
    # shared by later tasks (the runtime's cache shares them) must move to the key's new unit
    # (with an unkeyed resource too: Resources.admitted's loop over its one tracked entry)
    d = make([mkpool(cap=10)], resources=[per_customer(1, idle_ttl=5.0), Resource.semaphore("db", 9)])
    core, kr = d.core, d.core.res.keyed["customer"]
    opts = TaskOptions(resources={"customer:a": 1, "db": 1} if db else {"customer:a": 1})
    first = core.submit(d.now, opts, None)[0]
    assert d.tick() == [first] and opts.units is not None and opts.units[0][0] is kr.keys["customer:a"]
    d.complete(first)
    old = kr.keys["customer:a"]
    d.advance(6.0)
    b = d.submit(resources={"customer:b": 1})  # (a new key: expired ones are swept first)
    assert "customer:a" not in kr.keys and old.gone
    x1, x2 = (core.submit(d.now, opts, None)[0] for _ in range(2))
    new = kr.keys["customer:a"]
    assert new is not old and opts.units[0][0] is new and new.live == 2 and old.live == 0
    assert d.tick() == [b, x1] and new.available == 0 and old.available == 1
    d.complete(x1)
    assert new.available == 1 and d.tick() == [x2]
    d.complete(x2)
    assert new.live == 0 and new.available == 1 and kr.live == 1, "b alone counts"


def test_shared_stacked_options_follow_forgotten_keys_to_their_new_units(make, mkpool):
    # as above for a task asking two keyed resources (Resources.admitted's hot path, then
    # take_all and finish on the units its options note)
    api = Resource.token_bucket("api", 1e-3, 1, per_key=True, idle_ttl=5.0)
    d = make([mkpool(cap=10)], resources=[per_customer(1, idle_ttl=5.0), api])
    core, cust, buckets = d.core, d.core.res.keyed["customer"], d.core.res.keyed["api"]
    opts = TaskOptions(resources={"customer:a": 1, "api:a": 1})
    core.resolve_pool(opts)
    assert opts.units is not None and [e[0] for e in opts.units] == [None, None], "no keys yet"
    first = core.submit(d.now, opts, None)[0]
    assert [e[0] for e in opts.units] == [cust.keys["customer:a"], buckets.keys["api:a"]], "bound"
    assert d.tick() == [first]
    d.complete(first)
    old = [e[0] for e in opts.units]
    d.advance(6.0)
    b = d.submit(resources={"customer:b": 1, "api:b": 1})  # (new keys: expired ones are swept first)
    assert "customer:a" not in cust.keys and "api:a" not in buckets.keys and all(u.gone for u in old)
    x1, x2 = (core.submit(d.now, opts, None)[0] for _ in range(2))
    new = [cust.keys["customer:a"], buckets.keys["api:a"]]
    assert [e[0] for e in opts.units] == new and opts.tracked is opts.units
    assert [u.live for u in new] == [2, 2] and [u.live for u in old] == [0, 0]
    assert d.tick() == [b, x1], "the new bucket is full again, the new semaphore has its permit"
    assert new[0].available == 0 and old[0].available == 1
    d.complete(x1)
    assert new[0].available == 1 and d.tick() == [], "x2 waits for api:a's next token"
    d.advance(1000.0)
    assert d.tick() == [x2]
    d.complete(x2)
    assert [u.live for u in new] == [0, 0] and new[0].available == 1


def test_stacked_options_follow_their_second_key_alone_to_its_new_unit(make, mkpool):
    # Core.admit's two-resource hot path checks each noted unit: here only the second key (a
    # bucket with a short idle_ttl) was forgotten, the first one is idle but still its key's
    api = Resource.token_bucket("api", 1e-3, 1, per_key=True, idle_ttl=5.0)
    d = make([mkpool(cap=10)], resources=[per_customer(1), api])
    core, cust, buckets = d.core, d.core.res.keyed["customer"], d.core.res.keyed["api"]
    opts = TaskOptions(resources={"customer:a": 1, "api:a": 1})
    core.resolve_pool(opts)
    first = core.submit(d.now, opts, None)[0]
    assert d.tick() == [first]
    d.complete(first)
    sem, old = (e[0] for e in opts.units)
    d.advance(6.0)
    b = d.submit(resources={"api:b": 1})  # (a new key: the expired one is swept first)
    assert old.gone and "api:a" not in buckets.keys and cust.keys["customer:a"] is sem and not sem.gone
    x = core.submit(d.now, opts, None)[0]
    new = buckets.keys["api:a"]
    assert [e[0] for e in opts.units] == [sem, new] and (sem.live, new.live, old.live) == (1, 1, 0)
    assert d.tick() == [b, x], "the new bucket is full again"
    d.complete(x)
    assert (sem.live, new.live, sem.available) == (0, 0, 1)


def test_options_per_key_share_one_stats_key(make, mkpool):
    # an options object per key: all of one (pool, kind) note the same stats_key tuple, and
    # what one key's tasks teach the duration model holds for the others
    d = make([mkpool(cap=10)], resources=[per_customer(1)])
    a, b = (TaskOptions(kind="k", resources={f"customer:{x}": 1}) for x in "ab")
    core = d.core
    ta = core.submit(d.now, a, None)[0]
    core.submit(d.now, b, None)
    assert a.stats_key is b.stats_key and a.stats_key == (core.default_pool, "k")
    d.tick()
    d.advance(2.0)
    d.complete(ta)
    assert core.durations.expected(b) == 2 * NS


def test_a_batch_past_max_keys_creates_nothing(make, mkpool):
    d = make([mkpool(cap=10)], resources=[per_customer(1, max_keys=2)])
    items = [(TaskOptions(resources={"customer:" + k: 1}), None, None, None, None, None) for k in "abc"]
    with pytest.raises(SubmitError) as e:
        d.core.submit_batch(d.now, items)
    assert e.value.code == "overloaded"
    assert not d.core.tasks and d.core.res.keyed["customer"].live_keys(d.now) == 0
    d.core.submit_batch(d.now, items[:2])


@pytest.mark.parametrize("policy", ["queue", "cancel_newest"])
def test_a_task_refused_on_its_second_key_changes_nothing(make, mkpool, policy):
    # the cap is checked as the task is counted in its keys: what was counted is undone
    first = Resource.semaphore("api", 5, per_key=True, on_limit=policy)
    d = make([mkpool(cap=10)], resources=[first, per_customer(1, max_keys=1)])
    old = d.submit(resources={"api:old": 1, "customer:a": 1})
    api, cust = d.core.res.keyed["api"], d.core.res.keyed["customer"]
    before = (d.core.seq, d.core.live, api.live, cust.live, sorted(api.keys), api.keys["api:old"].used)
    d.advance(1.0)
    for res in ({"api:old": 1, "customer:b": 1}, {"api:new": 1, "customer:b": 1}):
        with pytest.raises(SubmitError) as e:
            d.submit(resources=res)
        assert e.value.code == "overloaded" and "'customer'" in e.value.message
        after = (d.core.seq, d.core.live, api.live, cust.live, sorted(api.keys), api.keys["api:old"].used)
        assert after == before, "nothing counted, no key created, no key's last use moved"
        assert list(d.core.tasks) == [old] and api.keys["api:old"].live == 1
    assert d.submit(resources={"api:new": 1, "customer:a": 1}) == old + 1, "the ids run on"


# ------------------------------------------------------------------ policies


def test_cancel_newest_is_a_singleton(make, mkpool):
    d = make([mkpool(cap=10)], resources=[per_customer(1, on_limit="cancel_newest")], publish=True)
    a = d.submit(resources={"customer:a": 1})
    a2 = d.submit(resources={"customer:a": 1})
    b = d.submit(resources={"customer:b": 1})
    assert d.status(a2) == "cancelled"
    msg = d.task(a2).message
    assert "customer:a" in msg and "cancel_newest" in msg
    assert d.events(a2)[-1].message == msg
    assert d.tick() == [a, b]
    d.complete(a)
    assert d.status(d.submit(resources={"customer:a": 1})) == "ready"


def test_cancel_newest_bucket_drops_over_rate(make, mkpool):
    bucket = Resource.token_bucket("api", 1.0, 2, per_key=True, on_limit="cancel_newest")
    d = make([mkpool(cap=10)], resources=[bucket])
    ids = [d.submit(resources={"api:k": 1}) for _ in range(3)]
    assert [d.status(t) for t in ids] == ["ready", "ready", "cancelled"]
    assert d.tick() == ids[:2]
    d.advance(1.0)
    again = [d.submit(resources={"api:k": 1}) for _ in range(2)]
    assert [d.status(t) for t in again] == ["ready", "cancelled"]


def test_cancel_oldest_replaces_the_oldest_waiting_then_running(make, mkpool):
    d = make([mkpool(cap=10)], resources=[per_customer(1, on_limit="cancel_oldest")])
    a = d.submit(resources={"customer:k": 1})
    assert d.tick() == [a]
    b = d.submit(resources={"customer:k": 1})  # a runs: a is the oldest, aborted
    assert d.status(a) == "cancelled" and "cancel_oldest" in d.task(a).message
    assert [x.task_id for x in d.of(Abort)] == [a]
    assert d.tick() == [b]
    c = d.submit(resources={"customer:k": 1})
    assert d.status(b) == "cancelled" and d.status(c) == "ready"
    e = d.submit(resources={"customer:k": 1})  # nothing runs: c, the oldest waiting one, goes
    assert d.status(c) == "cancelled" and d.tick() == [e]


def test_cancel_oldest_prefers_a_waiting_victim(make, mkpool):
    d = make([mkpool(cap=10)], resources=[per_customer(2, on_limit="cancel_oldest")])
    r1, r2 = (d.submit(resources={"customer:k": 1}) for _ in range(2))
    assert d.tick() == [r1, r2]
    d.complete(r1)
    w1 = d.submit(resources={"customer:k": 1})
    w2 = d.submit(resources={"customer:k": 1})  # r2 and w1 hold the 2 permits: w1 (waiting) goes
    assert d.status(w1) == "cancelled" and d.status(r2) == "running"
    assert d.tick() == [w2]
    w3 = d.submit(resources={"customer:k": 1})  # nothing waits: r2, the oldest running, goes
    assert d.status(r2) == "cancelled" and d.status(w2) == "running"
    assert d.tick() == [w3]


def test_keep_latest_debounces(make, mkpool):
    d = make([mkpool(cap=10)], resources=[per_customer(1, on_limit="keep_latest")])
    o = TaskOptions(resources={"customer:k": 1})
    first = d.core.submit(d.now, o, None, None, None, d.now + 5 * NS)[0]
    d.advance(2.0)
    second = d.core.submit(d.now, o, None, None, None, d.now + 5 * NS)[0]
    d.collect()
    assert d.status(first) == "cancelled" and "keep_latest" in d.task(first).message
    assert d.status(second) == "scheduled"
    d.advance(5.0)
    assert d.tick() == [second]
    third = d.submit(resources={"customer:k": 1})
    assert d.status(second) == "running", "running tasks continue"
    d.complete(second)
    assert d.tick() == [third]


# ------------------------------------------------------------------ bad input


@pytest.mark.parametrize(
    ("make_resource", "needle"),
    [
        (lambda: Resource.semaphore("a:b", 1, per_key=True), "':'"),
        (lambda: Resource.semaphore("a", 1, on_limit="drop"), "on_limit"),
        (lambda: Resource.token_bucket("a", 1.0, 1, on_limit="cancel_oldest"), "semaphores only"),
        (lambda: Resource.token_bucket("a", 1.0, 1, on_limit="keep_latest"), "semaphores only"),
        (lambda: Resource.semaphore("a", 1, per_key=True, limits={"x": 0}), "positive int"),
        (lambda: Resource.semaphore("a", 1, per_key=True, limits={"x": True}), "positive int"),
        (lambda: Resource.semaphore("a", 1, per_key=True, limits={"x": 1.5}), "positive int"),
        (lambda: Resource.semaphore("a", 1, limits={"x": 2}), "per_key=True"),
        (lambda: Resource.semaphore("a", 1, per_key=True, max_keys=0), "max_keys"),
    ],
)
def test_bad_declarations_are_refused_at_construction(make_resource, needle):
    with pytest.raises(ValueError, match=needle):
        make_resource()


@pytest.mark.parametrize(
    ("ask", "needle"),
    [
        ("customer", "is keyed"),
        ("customer:", "non-empty key"),
        ("db:1", "is not keyed"),
    ],
)
def test_bad_asks_are_invalid_and_name_the_resource(make, mkpool, ask, needle):
    d = make([mkpool(cap=2)], resources=[per_customer(1), Resource.semaphore("db", 1)])
    with pytest.raises(SubmitError, match=needle) as e:
        d.submit(resources={ask: 1})
    assert e.value.code == "invalid" and ask.split(":")[0] in e.value.message
    assert not d.core.tasks


# ------------------------------------------------------------------ recovery


def test_recovery_rebuilds_key_state_from_the_tasks():
    cfg = CoreConfig(
        [PoolConfig("default", min=4, max=4, initial=4, autoscale=False)],
        resources=[per_customer(1, on_limit="cancel_newest")],
        persist=True,
    )
    core = Core(cfg)
    a = core.submit(0, TaskOptions(resources={"customer:a": 1}), None)[0]
    core.tick(0)
    subs = [x.mutation for x in core.drain_actions() if type(x) is Persist and type(x.mutation) is Submitted]
    fresh = Core(cfg, now=NS, epoch=1)
    fresh.recover(
        NS, Recovered([RecoveredTask(s.id, s.seq, s.arrival, s.spec, None, "running", 1) for s in subs], [])
    )
    assert fresh.tasks[a].status_name == "retrying"
    assert fresh.res.keyed["customer"].live_keys(NS) == 1
    dup = fresh.submit(NS, TaskOptions(resources={"customer:a": 1}), None)[0]
    assert fresh.tasks[dup].status_name == "cancelled", "the recovered task still holds key a"


def _bucket_core(now: int, epoch: int = 0) -> Core:
    cfg = CoreConfig(
        [PoolConfig("default", min=8, max=8, initial=8, autoscale=False)],
        resources=[
            Resource.token_bucket("api", 0.1, 1, per_key=True, idle_ttl=60.0),  # 1 per 10 s per key
            Resource.token_bucket("mail", 0.5, 2),  # unkeyed: 2 at once, then 1 per 2 s
        ],
        persist=True,
    )
    return Core(cfg, now=now, epoch=epoch)


def _run_and_restart(asks: list[dict[str, int]], restart_at: int) -> Core:
    """Run one task per ask to success at 0 s, then the store's view of them (first start,
    finished, whole definition) recovered by a fresh core at ``restart_at``."""
    core = _bucket_core(0)
    ids = [core.submit(0, TaskOptions(resources=ask), None)[0] for ask in asks]
    core.tick(0)
    subs = {
        x.mutation.id: x.mutation
        for x in core.drain_actions()
        if type(x) is Persist and type(x.mutation) is Submitted
    }
    started = {t.id: t.started_at for t in core.tasks.values()}
    for lease in list(core.leases):
        core.complete(NS // 10, lease)
    rows = [
        RecoveredTerminal(
            tid,
            subs[tid].seq,
            "default",
            "",
            None,
            "succeeded",
            1,
            0,
            started[tid],
            NS // 10,
            None,
            spec=subs[tid].spec,
        )
        for tid in ids
        if started[tid] is not None
    ]
    fresh = _bucket_core(restart_at, epoch=1)
    fresh.recover(restart_at, Recovered([], rows))
    return fresh


def _dispatched(core: Core, now: int) -> int:
    core.tick(now)
    return sum(type(a) is Dispatch for a in core.drain_actions())


def test_a_restart_does_not_refill_the_token_buckets():
    """#30: key state is rebuilt from the tasks after a restart; for a token bucket that is
    the tokens its recorded starts took (a restart refilled every bucket before)."""
    asks = [{"api:k": 1}, {"api:k": 1}, {"mail": 1}, {"mail": 1}, {"mail": 1}]
    fresh = _run_and_restart(asks, NS)  # (api:k and two mails ran at 0 s)
    for ask in ({"api:k": 1}, {"api:other": 1}, {"mail": 1}):
        fresh.submit(NS, TaskOptions(resources=ask), None)
    assert _dispatched(fresh, NS) == 1, "only the unused key: api:k and mail were spent at 0 s"
    assert _dispatched(fresh, 2 * NS) == 1, "mail refilled one token 2 s after its takes"
    assert _dispatched(fresh, 9 * NS) == 0
    assert _dispatched(fresh, 10 * NS) == 1, "api:k's token is back 10 s after its take"


def test_a_recharged_key_idle_past_its_ttl_starts_full():
    fresh = _run_and_restart([{"api:k": 1}], 60 * NS)
    assert "api:k" not in fresh.res.keyed["api"].keys  # (forgotten, as it would have been)
    fresh.submit(60 * NS, TaskOptions(resources={"api:k": 1}), None)
    assert _dispatched(fresh, 60 * NS) == 1
    fresh = _run_and_restart([{"api:k": 1}], 5 * NS)
    kr = fresh.res.keyed["api"]
    assert kr.keys["api:k"].used == 0 and kr.next_expiry <= 60 * NS  # its last use, its expiry


def test_a_key_with_live_tasks_is_recharged_past_its_idle_ttl():
    """A key with live tasks was never forgotten, however old its last take: a task that was
    running at the crash (first started at 0 s, 1 token per 1,000 s) retries after a restart
    at 70 s (idle_ttl 60 s) only once its key has a token again."""
    cfg = CoreConfig(
        [PoolConfig("default", min=2, max=2, initial=2, autoscale=False)],
        resources=[Resource.token_bucket("api", 0.001, 1, per_key=True, idle_ttl=60.0)],
        persist=True,
    )
    core = Core(cfg)
    tid = core.submit(0, TaskOptions(resources={"api:k": 1}), None)[0]
    core.tick(0)
    sub = next(
        a.mutation for a in core.drain_actions() if type(a) is Persist and type(a.mutation) is Submitted
    )
    fresh = Core(cfg, now=70 * NS, epoch=1)
    fresh.recover(
        70 * NS, Recovered([RecoveredTask(tid, sub.seq, sub.arrival, sub.spec, None, "running", 1, 0)], [])
    )
    assert fresh.tasks[tid].status_name == "retrying"
    for at in (75, 200, 999):
        assert _dispatched(fresh, at * NS) == 0, at
    assert _dispatched(fresh, 1000 * NS) == 1


@settings(max_examples=150, deadline=None)
@given(
    starts=st.lists(st.tuples(st.integers(0, 40), st.sampled_from(["api:a", "api:b", "mail"])), max_size=12),
    restart=st.integers(0, 60),
    later=st.lists(st.tuples(st.integers(0, 30), st.sampled_from(["api:a", "api:b", "mail"])), max_size=12),
)
def test_recovered_buckets_never_over_issue_across_a_restart(starts, restart, later):
    """Takes recorded before a restart and dispatches after it, together, never exceed
    ``burst + rate * t`` over any window (each task has one attempt: its first start is its
    only take)."""
    rate = {"api": 0.1, "mail": 0.5}
    burst = {"api": 1, "mail": 2}
    core = _bucket_core(0)
    taken: dict[str, list[int]] = {}
    rows = []
    for at, name in sorted(starts):  # (a run before the restart, its takes as the bucket gave them)
        at = min(at, restart) * NS
        tid = core.submit(at, TaskOptions(resources={name: 1}), None)[0]
        core.tick(at)
        acts = core.drain_actions()
        sub = next(a.mutation for a in acts if type(a) is Persist and type(a.mutation) is Submitted)
        for lease in list(core.leases):
            core.complete(at, lease)
        t = core.tasks[tid]
        if t.started_at is None:
            core.cancel(at, tid)
            continue
        taken.setdefault(name, []).append(t.started_at)
        rows.append(
            RecoveredTerminal(
                tid, sub.seq, "default", "", None, "succeeded", 1, at, at, at, None, spec=sub.spec
            )
        )
    now = restart * NS
    fresh = _bucket_core(now, epoch=1)
    fresh.recover(now, Recovered([], rows))
    ids: dict[int, str] = {}
    for dt, name in sorted(later):
        at = now + dt * NS
        ids[fresh.submit(at, TaskOptions(resources={name: 1}), None)[0]] = name
        fresh.tick(at)
        for a in fresh.drain_actions():
            if type(a) is Dispatch:
                taken.setdefault(ids[fresh.leases[a.lease].id], []).append(at)
                fresh.complete(at, a.lease)
    for name, times in taken.items():
        base = name.partition(":")[0]
        times.sort()
        for i, t0 in enumerate(times):
            for j in range(i, len(times)):
                window = (times[j] - t0) / NS
                assert j - i + 1 <= burst[base] + rate[base] * window + 1e-9, (name, times)


# ------------------------------------------------------------------ observability


def test_snapshot_gauges_and_the_busiest_keys(make, mkpool):
    d = make([mkpool(cap=10)], resources=[per_customer(1, limits={"big": 3}), Resource.semaphore("db", 1)])
    for key, n in (("a", 4), ("b", 2), ("big", 5), ("c", 1)):
        for _ in range(n):
            d.submit(resources={f"customer:{key}": 1})
    d.tick()
    rows = {r.name: r for r in d.core.snapshot(d.now).resources}
    assert sorted(rows) == ["customer", "db"] and not rows["db"].per_key
    gauge = rows["customer"]
    assert (gauge.kind, gauge.per_key, gauge.capacity) == ("semaphore", True, 1)
    assert (gauge.keys, gauge.in_use, gauge.waiting) == (4, 6, 6)
    top = d.core.res.busiest("customer", 2, d.now)
    assert [tuple(k) for k in top] == [("a", 1, 3, 1), ("big", 3, 2, 3)]
    with pytest.raises(ValueError, match="not a keyed resource"):
        d.core.res.busiest("db", 2, d.now)
    with pytest.raises(ValueError, match="top"):
        d.core.res.busiest("customer", 0, d.now)


def test_a_policy_on_an_unkeyed_resource_treats_it_as_one_key(make, mkpool):
    d = make([mkpool(cap=4)], resources=[Resource.semaphore("deploy", 1, on_limit="cancel_newest")])
    a = d.submit(resources={"deploy": 1})
    b = d.submit(resources={"deploy": 1})
    assert d.status(b) == "cancelled" and "'deploy'" in d.task(b).message
    assert d.tick() == [a]
    d.complete(a)
    assert d.status(d.submit(resources={"deploy": 1})) == "ready"
    with pytest.raises(SubmitError, match="is not keyed"):
        d.submit(resources={"deploy:x": 1})
