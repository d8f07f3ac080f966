"""engine/waiting.py: why a task that has not finished is not running, and each resource's
use, under virtual time (docs/getting-started/dashboard.md#why-a-task-waits)."""

from __future__ import annotations

from cronoq.engine.control import set_pool_paused
from cronoq.engine.model import ON_SUCCESS, TaskOptions
from cronoq.engine.resources import Resource
from cronoq.engine.waiting import waiting_reason


def why(d, tid: int) -> str:
    t = d.task(tid)
    return waiting_reason(t, d.core.pools[t.opts.pool_index], d.core.res, d.now)


def test_ready_work_says_which_limit_holds_it(make, mkpool):
    d = make([mkpool(cap=4)], resources=[Resource.semaphore("customer:42", 2)])
    held = [d.submit(resources={"customer:42": 1}) for _ in range(3)]
    free = d.submit()
    d.tick()
    assert [d.status(t) for t in held] == ["running", "running", "ready"]
    assert why(d, held[2]) == "resource 'customer:42' at its limit (2 of 2 in use)"
    assert why(d, held[0]) == "" and why(d, free) == ""
    # the snapshot says the same per resource
    (use,) = d.core.snapshot(d.now).resources
    assert (use.name, use.kind) == ("customer:42", "semaphore")
    assert (use.capacity, use.in_use, use.waiting) == (2, 2, 1)
    d.complete(held[0])
    d.tick()
    (use,) = d.core.snapshot(d.now).resources
    assert (use.in_use, use.waiting) == (2, 0)


def test_a_full_pool_says_it_waits_for_capacity(make, mkpool):
    d = make([mkpool(cap=1)])
    a, b = d.submit(), d.submit()
    d.tick()
    assert d.status(b) == "ready"
    assert why(d, b) == "waiting for capacity (1 of 1 slots busy)"
    d.complete(a)
    assert why(d, a) == ""


def test_a_paused_pool_comes_first(make, mkpool):
    d = make([mkpool(cap=2)], resources=[Resource.semaphore("db", 1)])
    set_pool_paused(d.core, d.now, "default", True)
    t = d.submit(resources={"db": 1})
    d.tick()
    assert why(d, t) == "pool 'default' is paused"


def test_blocked_and_labelled_work(make, mkpool):
    d = make([mkpool(cap=1)])
    parent = d.submit(key="p")
    child = d.core.submit(d.now, TaskOptions(), None, deps=[("p", ON_SUCCESS)])[0]
    gpu = d.submit(labels={"gpu": "a100"})
    d.tick()
    assert why(d, child) == "blocked: waiting for 1 dependency"
    assert why(d, gpu) == "no worker group with labels gpu=a100"
    d.complete(parent)
    d.tick()
    assert d.status(child) == "running" and why(d, child) == ""


def test_a_token_bucket_counts_spent_tokens(make, mkpool):
    d = make([mkpool(cap=4)], resources=[Resource.token_bucket("api", rate=1.0, burst=2)])
    ids = [d.submit(resources={"api": 1}) for _ in range(3)]
    d.tick()
    assert why(d, ids[2]).startswith("resource 'api' at its limit (2 of 2 in use)")
    (use,) = d.core.snapshot(d.now).resources
    assert (use.kind, use.in_use, use.waiting) == ("token_bucket", 2, 1)
    d.advance(1.0)
    d.tick()
    assert d.status(ids[2]) == "running"
