"""Durable calls across restarts with real stores (docs/how-to/durable.md#durability): a parked
task resumes after a restart without counting an attempt, a durable sleep keeps its end, a
spawn is never done twice, a step is not redone, signals survive."""

from __future__ import annotations

import asyncio
import datetime as dt
import os
import pathlib
import uuid
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

import cronoq.testing
from cronoq import Pool, SqliteStore, Task, TaskContext

START = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
DSN = os.environ.get("CRONOQ_TEST_PG_DSN", "postgresql://postgres@127.0.0.1:5432/test")


@pytest.fixture(params=["sqlite", "postgres"])
async def new_store(request: Any, tmp_path: pathlib.Path) -> AsyncIterator[Callable[[], Any]]:
    if request.param == "sqlite":
        yield lambda: SqliteStore(tmp_path / "d.db")
        return
    asyncpg = pytest.importorskip("asyncpg")
    from services import missing_service

    try:
        conn = await asyncpg.connect(DSN, timeout=3)
        await conn.close()
    except Exception as e:
        missing_service("PostgreSQL", f"unreachable at {DSN}: {e}")
    from cronoq import PostgresStore

    schema = f"cronoq_d_{uuid.uuid4().hex[:10]}"
    yield lambda: PostgresStore(DSN, schema=schema)
    conn = await asyncpg.connect(DSN)
    try:
        await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    finally:
        await conn.close()


async def parked(stream: Any, tid: int) -> None:
    """Until task ``tid`` parks (its event ``blocked`` after it ran)."""
    ran = False
    async for ev in stream:
        if ev.id == tid:
            ran = ran or ev.status == "running"
            if ran and ev.status == "blocked":
                return


def one_slot(executor: Any) -> Pool:
    return Pool("default", executor, min=1, max=1, autoscale=False)


async def test_a_durable_sleep_and_a_step_survive_a_restart(new_store: Callable[[], Any]) -> None:
    calls: list[str] = []
    runs: list[tuple[int, int]] = []

    async def run(ctx: TaskContext, payload: Any) -> Any:
        runs.append((ctx.attempt, ctx.resumes))
        sent = await ctx.step("welcome", lambda: calls.append("welcome") or "sent")
        await ctx.sleep_for(2 * 86_400)
        return [sent, ctx.attempt]

    async with cronoq.testing.run([one_slot(run)], start=START, store=new_store()) as env:
        h = await env.scheduler.submit("x")
        await env.advance(3600)
        assert await env.scheduler.status(h.id) == "scheduled"
        tid = h.id
    # restarted a day later: the task is back, parked; it resumes and sleeps to its recorded end
    async with cronoq.testing.run(
        [one_slot(run)], start=START + dt.timedelta(days=1), store=new_store()
    ) as env:
        handle = await env.scheduler.handle(tid)
        assert handle is not None
        assert await asyncio.wait_for(handle, 10) == ["sent", 1]
        assert env.now >= START + dt.timedelta(days=2)
    assert calls == ["welcome"]
    assert all(a == 1 for a, _ in runs)  # parked, restarted: never counted as an attempt
    # every run after the first is a resume: the replay at the restart (which parks again for
    # the rest of the sleep), then the run at the sleep's end
    assert [r for _, r in runs] == [0, 1, 2]


async def test_a_spawn_is_never_done_twice_across_a_restart(new_store: Callable[[], Any]) -> None:
    gate = asyncio.Event()

    async def run(ctx: TaskContext, payload: Any) -> Any:
        if payload == "child":
            await gate.wait()
            return 1
        ids = await ctx.spawn([Task("child") for _ in range(3)])
        return sum(o.output for o in await ctx.wait_for(ids))

    async with cronoq.testing.run(
        [Pool("default", run, min=2, max=2, autoscale=False)], start=START, store=new_store()
    ) as env:
        stream = env.scheduler.events()
        h = await env.scheduler.submit("parent")
        await asyncio.wait_for(parked(stream, h.id), 10)
        assert await env.scheduler.status(h.id) == "blocked"
        tid = h.id
        n_before = len(env.scheduler._run.core.tasks)  # type: ignore[union-attr]
    gate.set()
    async with cronoq.testing.run(
        [Pool("default", run, min=2, max=2, autoscale=False)], start=START, store=new_store()
    ) as env:
        handle = await env.scheduler.handle(tid)
        assert handle is not None
        assert await asyncio.wait_for(handle, 10) == 3
        assert len(env.scheduler._run.core.tasks) == n_before == 4  # no child was spawned again


async def test_signals_are_durable(new_store: Callable[[], Any]) -> None:
    async def run(ctx: TaskContext, payload: Any) -> Any:
        return await ctx.wait_signal("go")

    # (the store keeps signals for the retention counted on its real clock: start now)
    async with cronoq.testing.run([one_slot(run)], store=new_store()) as env:
        assert (await env.scheduler.signal("go", {"n": 1})).duplicate is False
    async with cronoq.testing.run([one_slot(run)], store=new_store()) as env:
        assert (await env.scheduler.signal("go", {"n": 2})).duplicate is True
        assert await asyncio.wait_for(await env.scheduler.submit(None), 10) == {"n": 1}


async def old_child(ctx: TaskContext, payload: Any) -> Any:
    """A parent that spawns a child, waits for it, parks two days (past ``key_retention``: the
    engine forgets the finished child), then reads the child's outcome again."""
    if payload == "child":
        return {"n": 1}
    (kid,) = await ctx.spawn([Task("child")])
    first = await ctx.wait_for([kid])  # (replayed after the sleep)
    await ctx.sleep_for(2 * 86_400)
    again = await ctx.wait_for([kid])  # (a new wait, after the sleep)
    return [o.output for o in (*first, *again)]


async def test_a_journal_holds_its_children_past_retention() -> None:
    async with cronoq.testing.run(
        [Pool("default", old_child, min=2, max=2, autoscale=False)], start=START
    ) as env:
        h = await env.scheduler.submit("parent")
        await env.advance(86_400)
        await env.scheduler.submit("child")  # (a submission prunes: the first child is forgotten)
        assert len(env.scheduler._run.core.tasks) == 2  # type: ignore[union-attr]
        await env.advance(2 * 86_400)
        assert await asyncio.wait_for(h, 10) == [{"n": 1}, {"n": 1}]


async def test_a_journal_holds_its_old_children_across_a_restart(new_store: Callable[[], Any]) -> None:
    async with cronoq.testing.run(
        [Pool("default", old_child, min=2, max=2, autoscale=False)], start=START, store=new_store()
    ) as env:
        h = await env.scheduler.submit("parent")
        await env.advance(3600)
        assert await env.scheduler.status(h.id) == "scheduled"
        tid = h.id
    # a day later (the child's row is past the load's window: read back as the journal's)
    async with cronoq.testing.run(
        [Pool("default", old_child, min=2, max=2, autoscale=False)],
        start=START + dt.timedelta(days=1),
        store=new_store(),
    ) as env:
        handle = await env.scheduler.handle(tid)
        assert handle is not None
        await env.advance(2 * 86_400)
        assert await asyncio.wait_for(handle, 10) == [{"n": 1}, {"n": 1}]
