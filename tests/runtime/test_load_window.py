"""A start reads the engine's window of finished tasks, not the store's whole history
(docs/reference/behaviour.md#recovery): the old finished rows stay in the store and answer
from it, a live child's old parent is still read back with its output, and keys within
``key_retention`` still deduplicate after the restart (SQLite, PostgreSQL)."""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import time
from collections.abc import Callable, Sequence
from typing import Any

from cronoq import Outcome, RetryPolicy, Scheduler, SqliteStore
from cronoq.engine.time import NS
from cronoq.store import JsonCodec

from .conftest import pool, wait

DAY = 86400


async def age(store: Any, ids: Sequence[int], seconds: int) -> None:
    """Move the rows of ``ids`` ``seconds`` into the past, as if they had finished then."""
    marks = ", ".join(str(i) for i in ids)
    ns = seconds * NS
    sql = f"UPDATE {{t}} SET arrival = arrival - {ns}, finished = finished - {ns} WHERE id IN ({marks})"
    if isinstance(store, SqliteStore):
        with contextlib.closing(sqlite3.connect(store.path)) as conn:
            conn.execute(sql.format(t="cronoq_tasks"))
            conn.commit()
        return
    import asyncpg  # type: ignore[import-untyped]

    conn = await asyncpg.connect(store.dsn)
    try:
        await conn.execute(sql.format(t=f'"{store.schema}".cronoq_tasks'))
    finally:
        await conn.close()


async def test_a_start_reads_the_window_and_what_live_tasks_need(make_store: Callable[[], Any]) -> None:
    hold = asyncio.Event()
    seen: dict[str, tuple[Outcome, ...]] = {}

    async def run(ctx: Any, payload: Any) -> Any:
        seen[str(payload)] = ctx.parents
        if payload == "hold":
            await hold.wait()
        return payload

    def store() -> Any:
        s = make_store()
        s.retention = 7.0 * DAY  # (the server's store.keep_finished_s)
        return s

    fast = RetryPolicy(initial_backoff=0.0, jitter=False)
    opts: dict[str, Any] = {"store": store(), "key_retention": 3600, "shutdown_grace": 0}
    async with Scheduler([pool("default", run, min=2, max=2)], **opts) as s:
        old = [await s.submit(f"old{i}", key=f"old{i}") for i in range(3)]
        parent = await s.submit({"rows": 3})
        for h in (*old, parent):
            await wait(h)
        await s.submit("hold", key="hold", retry=fast)
        child = await s.submit("child", after=[parent.id, "hold"])  # (the parent by id)
        recent = await s.submit("recent", key="recent")
        await wait(recent)
    await age(opts["store"], [h.id for h in (*old, parent)], 2 * DAY)  # past key_retention
    hold.set()
    opts["store"] = store()
    async with Scheduler([pool("default", run, min=2, max=2)], **opts) as s:
        assert s._run is not None
        held = s._run.core.tasks
        assert not {h.id for h in old} & held.keys()  # not read into the engine
        assert parent.id in held  # (a live child needs it)
        dup = await s.submit("again", key="recent")  # within key_retention: deduplicated
        assert dup.duplicate and dup.id == recent.id
        handle = await s.handle(child.id)
        assert handle is not None
        assert await wait(handle) == "child"
        assert await s.status(old[0].id) == "succeeded"  # served from the store's history
        fresh = await s.submit("old0", key="old0")  # past key_retention: the key is free
        assert not fresh.duplicate
        await wait(fresh)
    assert seen["child"][0] == Outcome(parent.id, None, "succeeded", {"rows": 3}, None)
    assert seen["child"][1].status == "succeeded"


async def test_a_prune_keeps_the_old_parents_of_a_live_child(make_store: Callable[[], Any]) -> None:
    """The store's history prune (``store.keep_finished_s``) keeps a parent a live child still
    needs however old it is, so after the prune and a restart the child still reads its output;
    an expired row nothing refers to goes (docs/reference/behaviour.md#recovery-window)."""
    hold = asyncio.Event()
    seen: dict[str, tuple[Outcome, ...]] = {}

    async def run(ctx: Any, payload: Any) -> Any:
        seen[str(payload)] = ctx.parents
        if payload == "hold":
            await hold.wait()
        return payload

    def store() -> Any:
        s = make_store()
        s.retention = 7.0 * DAY
        return s

    fast = RetryPolicy(initial_backoff=0.0, jitter=False)
    opts: dict[str, Any] = {"store": store(), "key_retention": 3600, "shutdown_grace": 0}
    async with Scheduler([pool("default", run, min=2, max=2)], **opts) as s:
        by_id = await s.submit({"rows": 1})
        by_key = await s.submit({"rows": 2}, key="p")
        other = await s.submit("other")
        for h in (by_id, by_key, other):
            await wait(h)
        await s.submit("hold", key="hold", retry=fast)
        child = await s.submit("child", after=[by_id.id, "p", "hold"])
    await age(opts["store"], [by_id.id, by_key.id, other.id], 8 * DAY)  # past the store's retention
    pruning = store()  # (a prune is the leader's: a PostgresStore's is fenced otherwise)
    await pruning.open()
    await pruning.acquire()
    try:
        assert await pruning.prune(time.time_ns()) == 1  # the other one: nothing refers to it
        assert await pruning.load_finished(other.id, JsonCodec()) is None
    finally:
        await pruning.close()
    hold.set()
    opts["store"] = store()
    async with Scheduler([pool("default", run, min=2, max=2)], **opts) as s:
        handle = await s.handle(child.id)
        assert handle is not None
        assert await wait(handle) == "child"
    assert seen["child"][:2] == (
        Outcome(by_id.id, None, "succeeded", {"rows": 1}, None),
        Outcome(by_key.id, "p", "succeeded", {"rows": 2}, None),
    )
    assert seen["child"][2].status == "succeeded"
