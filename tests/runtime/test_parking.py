"""runtime/parking.py: durable calls in process (docs/how-to/durable.md) - spawn and wait
without a slot, durable sleeps, signals, memoized steps, replay and its determinism rule."""

from __future__ import annotations

import asyncio
import datetime as dt
import time
from typing import Any

import pytest

import cronoq.testing
from cronoq import App, Pool, Scheduler, Task, TaskContext, TaskFailed
from cronoq.errors import SchedulerError

from .conftest import wait

START = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


def one_slot(executor: Any) -> Pool:
    return Pool("default", executor, min=1, max=1, initial=1, autoscale=False)


async def test_a_parent_waits_for_its_children_on_a_single_slot() -> None:
    runs: list[int] = []

    async def run(ctx: TaskContext, payload: Any) -> Any:
        if payload != "parent":
            return payload * 10
        runs.append(ctx.resumes)
        ids = await ctx.spawn([Task(i) for i in range(1, 4)])
        outcomes = await ctx.wait_for(ids)
        return [o.output for o in outcomes]

    async with Scheduler([one_slot(run)]) as sched:
        h = await sched.submit("parent")
        assert await wait(h) == [10, 20, 30]
        info = await sched.handle(h.id)
        assert info is not None
        assert runs == [0, 1]  # ran once, parked, resumed once (no deadlock on one slot)
        t = sched._run.core.tasks[h.id]  # type: ignore[union-attr]
        assert t.attempt == 1  # parking is not an attempt
        assert sched._run.core.parking.journals == {}  # type: ignore[union-attr]


async def test_a_step_runs_once_across_three_resumes() -> None:
    calls: list[int] = []

    async def charge(amount: int) -> dict[str, int]:
        calls.append(amount)
        return {"charged": amount}

    async def run(ctx: TaskContext, payload: Any) -> Any:
        got = await ctx.step("charge", charge, 5)
        for n in range(3):
            await ctx.sleep_for(10)
            await ctx.step(f"after-{n}", lambda n=n: n)
        return [got, ctx.resumes]

    async with cronoq.testing.run([one_slot(run)], start=START) as env:
        h = await env.scheduler.submit(None)
        assert await wait(h) == [{"charged": 5}, 3]
    assert calls == [5]


async def test_a_two_day_sleep_takes_milliseconds_on_virtual_time() -> None:
    async def run(ctx: TaskContext, payload: Any) -> Any:
        await ctx.sleep_for(2 * 86_400)
        return "awake"

    t0 = time.perf_counter()
    async with cronoq.testing.run([one_slot(run)], start=START) as env:
        h = await env.scheduler.submit(None)
        await env.advance(3600)
        extras = env.scheduler.task_extras(env.scheduler._run.core.tasks[h.id])  # type: ignore[union-attr]
        assert extras.waiting == "sleeping until 2026-01-03T00:00:00Z"
        assert await env.scheduler.status(h.id) == "scheduled"
        assert await wait(h) == "awake"
        assert env.now >= START + dt.timedelta(days=2)
    assert time.perf_counter() - t0 < 5


async def test_signals_before_and_after_the_wait_and_duplicates() -> None:
    async def run(ctx: TaskContext, payload: Any) -> Any:
        return await ctx.wait_signal(payload)

    async with Scheduler([Pool("default", run, min=2, max=2, initial=2, autoscale=False)]) as sched:
        first = await sched.signal("early", {"ok": True})
        assert first.duplicate is False
        assert (await sched.signal("early", "ignored")).duplicate is True
        assert await wait(await sched.submit("early")) == {"ok": True}
        h = await sched.submit("approve-42")
        for _ in range(50):
            await asyncio.sleep(0)
            if await sched.status(h.id) == "blocked":
                break
        assert await sched.status(h.id) == "blocked"
        assert sched.task_extras(sched._run.core.tasks[h.id]).waiting == "signal 'approve-42'"  # type: ignore[union-attr]
        assert (await sched.signal("approve-42", 42)).duplicate is False
        assert await wait(h) == 42
        # a waiter that comes later still gets it (write-once while retained)
        assert await wait(await sched.submit("approve-42")) == 42


async def test_a_signal_timeout_raises_in_the_task() -> None:
    async def run(ctx: TaskContext, payload: Any) -> Any:
        try:
            await ctx.wait_signal("never", timeout=60)
        except TimeoutError as e:
            return f"timed out: {e}"
        return "got it"

    async with cronoq.testing.run([one_slot(run)], start=START) as env:
        h = await env.scheduler.submit(None)
        assert await wait(h) == "timed out: signal 'never' did not come within the timeout"


async def test_a_changed_replay_fails_the_task_permanently() -> None:
    async def run(ctx: TaskContext, payload: Any) -> Any:
        await ctx.step("a" if ctx.resumes == 0 else "b", lambda: 1)
        await ctx.sleep_for(1)
        return "done"

    async with cronoq.testing.run([one_slot(run)], start=START) as env:
        h = await env.scheduler.submit(None)
        with pytest.raises(TaskFailed) as ei:
            await wait(h)
        assert ei.value.status == "failed"
        assert str(ei.value.message).startswith("non-deterministic")
        assert "step 'a'" in ei.value.message and "step 'b'" in ei.value.message


async def test_cancelling_a_parked_parent_cancels_its_attached_children() -> None:
    gate = asyncio.Event()
    kids: list[int] = []

    async def run(ctx: TaskContext, payload: Any) -> Any:
        if payload == "parent":
            ids = await ctx.spawn([Task("child"), Task("child")])
            kids.extend(ids)
            kids.extend(await ctx.spawn(Task("loose"), detached=True))
            await ctx.wait_for(ids)
            return "never"
        await gate.wait()
        return payload

    async with Scheduler([Pool("default", run, min=1, max=1, initial=1, autoscale=False)]) as sched:
        h = await sched.submit("parent")
        for _ in range(100):
            await asyncio.sleep(0)
            if await sched.status(h.id) == "blocked":
                break
        assert await sched.status(h.id) == "blocked"
        info = sched.task_extras(sched._run.core.tasks[h.id])  # type: ignore[union-attr]
        assert info.waiting == "children 0 of 2 done" and info.children == kids
        assert await sched.cancel(h.id)
        statuses = [await sched.status(k) for k in kids]
        assert statuses[:2] == ["cancelled", "cancelled"] and statuses[2] != "cancelled"
        gate.set()


async def test_bad_input_is_refused_and_nothing_is_half_submitted() -> None:
    seen: dict[str, str] = {}

    async def run(ctx: TaskContext, payload: Any) -> Any:
        if payload != "probe":
            return None
        n = len(ctx._run.core.tasks)
        for name, call in [
            ("spec", lambda: ctx.spawn(["not a task"])),  # type: ignore[list-item]
            ("unknown", lambda: ctx.wait_for([999_999])),
            ("empty-signal", lambda: ctx.wait_signal("")),
            ("long-signal", lambda: ctx.wait_signal("x" * 300)),
            ("step-json", lambda: ctx.step("s", lambda: object())),
            ("negative", lambda: ctx.sleep_for(-1)),
            ("nan", lambda: ctx.sleep_for(float("nan"))),
        ]:
            try:
                await call()
            except Exception as e:
                seen[name] = f"{type(e).__name__}: {e}"
        assert len(ctx._run.core.tasks) == n
        return "ok"

    async with Scheduler([one_slot(run)]) as sched:
        assert await wait(await sched.submit("probe")) == "ok"
        with pytest.raises(ValueError):
            await sched.signal("")
        with pytest.raises(TypeError):
            await sched.signal("s", object())
    assert seen["unknown"] == "LookupError: ctx.wait_for(): no task 999999"
    assert "empty" in seen["empty-signal"] and "at most 256" in seen["long-signal"]
    assert "not JSON" in seen["step-json"] and "finite and >= 0" in seen["nan"]
    assert seen["spec"].startswith("ArgumentTypeError") and "negative" in seen


async def test_calls_after_the_attempt_are_refused() -> None:
    kept: list[TaskContext] = []

    async def run(ctx: TaskContext, payload: Any) -> Any:
        kept.append(ctx)

    async with Scheduler([one_slot(run)]) as sched:
        await wait(await sched.submit(None))
        with pytest.raises(SchedulerError, match="inside the running attempt"):
            await kept[0].spawn(Task(1))


async def test_named_tasks_fan_out_and_combine() -> None:
    app = App("fan")

    @app.task()
    async def square(n: int) -> int:
        return n * n

    @app.task()
    async def total(ctx: TaskContext, n: int) -> int:
        ids = await ctx.spawn([square.spec(i) for i in range(n)])
        return sum(o.output for o in await ctx.wait_for(ids))

    async with cronoq.testing.run(
        app, pools=[app.pool("default", min=1, max=1, autoscale=False)], start=START
    ):
        assert await wait(await total.submit(5)) == 30
