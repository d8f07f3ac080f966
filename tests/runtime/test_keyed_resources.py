"""docs/concepts/resources.md#keyed-resources in process: a per-customer limit, the policies
and idle keys on the real Scheduler under the test kit's virtual time, and named tasks."""

from __future__ import annotations

import asyncio

import pytest

import cronoq
import cronoq.testing
from cronoq import Pool, Resource, SubmitError, TaskFailed


async def test_at_most_two_running_tasks_per_customer() -> None:
    running: dict[str, int] = {}
    peak: dict[str, int] = {}

    async def work(ctx, customer: str) -> None:
        running[customer] = running.get(customer, 0) + 1
        peak[customer] = max(peak.get(customer, 0), running[customer])
        await ctx.sleep(1.0)
        running[customer] -= 1

    pools = [Pool("default", work, min=10, max=10, autoscale=False)]
    per_customer = Resource.semaphore("customer", 2, per_key=True)
    async with cronoq.testing.run(pools, resources=[per_customer]) as env:
        s = env.scheduler
        handles = [await s.submit(c, resources={f"customer:{c}": 1}) for c in "aaaaabc"]
        t0 = env.now
        await asyncio.gather(*handles)
        assert peak == {"a": 2, "b": 1, "c": 1}
        assert (env.now - t0).total_seconds() == pytest.approx(3.0)  # 5 of a, 2 at a time


async def test_cancel_newest_settles_the_handle_as_cancelled() -> None:
    async def work(ctx, payload) -> str:
        await ctx.sleep(5.0)
        return payload

    pools = [Pool("default", work, min=4, max=4, autoscale=False)]
    single = Resource.semaphore("job", 1, per_key=True, on_limit="cancel_newest")
    async with cronoq.testing.run(pools, resources=[single]) as env:
        first = await env.scheduler.submit("first", resources={"job:nightly": 1})
        second = await env.scheduler.submit("second", resources={"job:nightly": 1})
        with pytest.raises(TaskFailed) as e:
            await second
        assert e.value.status == "cancelled" and "job:nightly" in e.value.message
        assert "cancel_newest" in e.value.message
        assert await first == "first"
        cancelled = [ev for ev in env.events if ev.id == second.id and ev.status == "cancelled"]
        assert cancelled and "cancel_newest" in (cancelled[0].message or "")


async def test_an_idle_bucket_key_is_forgotten_after_idle_ttl() -> None:
    starts: list[float] = []
    env: cronoq.testing.Environment

    async def call(ctx, payload) -> None:
        starts.append(env.now.timestamp())

    pools = [Pool("default", call, min=4, max=4, autoscale=False)]
    bucket = Resource.token_bucket("api", 0.001, 1, per_key=True, idle_ttl=60.0)
    async with cronoq.testing.run(pools, resources=[bucket]) as env:
        await (await env.scheduler.submit(1, resources={"api:k": 1}))
        await env.advance(61.0)  # idle past idle_ttl: forgotten, so full again
        t0 = env.now.timestamp()
        await (await env.scheduler.submit(2, resources={"api:k": 1}))
        assert starts[-1] == pytest.approx(t0)


async def test_bad_asks_are_refused_at_submission() -> None:
    async def work(ctx, payload) -> None:
        return None

    pools = [Pool("default", work, min=1, max=1, autoscale=False)]
    res = [Resource.semaphore("customer", 1, per_key=True, max_keys=1), Resource.semaphore("db", 1)]
    async with cronoq.testing.run(pools, resources=res) as env:
        s = env.scheduler
        for ask in ("customer", "customer:", "db:x"):
            with pytest.raises(SubmitError) as e:
                await s.submit(None, resources={ask: 1})
            assert e.value.code == "invalid"
        await s.submit(None, resources={"customer:a": 1})
        with pytest.raises(SubmitError) as e:
            await s.submit(None, resources={"customer:b": 1})
        assert e.value.code == "overloaded" and "customer" in e.value.message


app = cronoq.App("keyed-tests")


@app.task(name="keyed.sync_customer")
async def sync_customer(customer: str) -> str:
    return f"synced {customer}"


async def test_named_tasks_take_a_key_per_call() -> None:
    per_customer = Resource.semaphore("customer", 1, per_key=True)
    async with cronoq.testing.run(app, resources=[per_customer]) as env:
        h = await sync_customer.options(resources={"customer:42": 1}).submit("42")
        assert await h == "synced 42"
        with pytest.raises(SubmitError, match="is keyed"):
            await sync_customer.options(resources={"customer": 1}).submit("42")
        assert env.events


async def test_resource_keys_lists_the_busiest_keys() -> None:
    async def work(ctx, payload) -> None:
        await ctx.sleep(10.0)

    pools = [Pool("default", work, min=8, max=8, autoscale=False)]
    per_customer = Resource.semaphore("customer", 1, per_key=True, limits={"big": 2})
    async with cronoq.testing.run(pools, resources=[per_customer], autojump=False) as env:
        s = env.scheduler
        for key, n in (("a", 4), ("big", 3), ("c", 1)):
            for _ in range(n):
                await s.enqueue(None, resources={f"customer:{key}": 1})
        await env.settle()
        keys = await s.resource_keys("customer", top=2)
        assert [tuple(k) for k in keys] == [("a", 1, 3, 1), ("big", 2, 1, 2)]
        snap = await s.snapshot()
        rows = [(r.name, r.keys, r.waiting, r.in_use) for r in snap.resources if r.per_key]
        assert rows == [("customer", 3, 4, 4)]
        with pytest.raises(ValueError, match="not a keyed resource"):
            await s.resource_keys("nope")


async def test_a_parked_task_holds_no_unit_of_its_key_and_takes_them_again_to_resume() -> None:
    """docs/concepts/resources.md#dispatch-time-limits: parking frees a task's units (issue
    #31: its slot, resources and lease), so while it sleeps durably another task of its key
    runs; each run after a park takes its units again (a new token from a bucket)."""
    starts: list[tuple[str, float, int]] = []

    async def work(ctx: cronoq.TaskContext, payload: str) -> str:
        starts.append((payload, (env.now - t0).total_seconds(), ctx.resumes))
        if payload.startswith("napper"):
            await ctx.sleep_for(1.0)
        else:
            await ctx.sleep(0.5)
        return payload

    pools = [Pool("default", work, min=4, max=4, autoscale=False)]
    per_key = [Resource.semaphore("c", 1, per_key=True), Resource.token_bucket("api", 0.1, 1, per_key=True)]
    async with cronoq.testing.run(pools, resources=per_key) as env:
        s = env.scheduler
        t0 = env.now
        napper = await s.submit("napper-c", resources={"c:k": 1})
        await env.advance(0.1)
        other = await s.submit("other-c", resources={"c:k": 1})
        assert await other == "other-c" and await napper == "napper-c"
        bucket = await s.submit("napper-api", resources={"api:k": 1})
        t1 = (env.now - t0).total_seconds()
        assert await bucket == "napper-api"
    assert starts[:3] == [("napper-c", 0.0, 0), ("other-c", 0.1, 0), ("napper-c", 1.0, 1)]
    runs = [(p, round(at - t1, 3), r) for p, at, r in starts[3:]]
    assert runs == [("napper-api", 0.0, 0), ("napper-api", 10.0, 1)]  # (its resume waited for a token)
