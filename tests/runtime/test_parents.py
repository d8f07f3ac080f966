"""``ctx.parents`` (docs/concepts/dependencies.md#outputs-on-edges): one Outcome per edge, in
the order given, for any executor; parents' outputs stay pinned across retention and a restart."""

from __future__ import annotations

import asyncio
import pickle
from collections.abc import Callable
from typing import Any

from cronoq import Dep, Outcome, Permanent, Pool, RetryPolicy, Scheduler, Task

from .conftest import pool, wait
from .processes import tasks as proc_tasks


async def test_every_executor_sees_its_parents_in_edge_order() -> None:
    """The loop, a thread, a child process (``run_in="process"``)."""
    seen: dict[str, tuple[Outcome, ...]] = {}

    async def run(ctx: Any, payload: str) -> str:
        seen[ctx.key] = ctx.parents
        if payload == "bad":
            raise Permanent("bad input")
        return payload.upper()

    def run_sync(ctx: Any, payload: str) -> str:
        seen[ctx.key] = ctx.parents
        return payload

    in_child = Pool("process", proc_tasks.parents, run_in="process", autoscale=False)
    async with Scheduler([pool("default", run), Pool("sync", run_sync), in_child]) as s:
        await s.submit("ok", key="ok")
        await s.submit("bad", key="bad")
        a = await s.submit("a", key="a", after=["ok"], deps=[Dep("bad", on="failure")])
        b = await s.submit("b", key="b", pool="sync", deps=[Dep("bad", on="complete"), Dep("ok")])
        c = await s.submit(None, pool="process", after="ok", deps=[Dep("bad", on="complete")])
        await wait(a)
        await wait(b)
        in_the_child = [[1, "ok", "succeeded", "OK", None], [2, "bad", "failed", None, "bad input"]]
        assert await wait(c, 30) == in_the_child
    ok = Outcome(1, "ok", "succeeded", "OK", None)
    bad = Outcome(2, "bad", "failed", None, "bad input")
    assert seen["a"] == (ok, bad)
    assert seen["b"] == (bad, ok)
    assert seen["ok"] == ()


async def test_outputs_stay_pinned_across_retention_and_a_restart(make_store: Callable[[], Any]) -> None:
    """Key retention 0 forgets the parent at once, and a restart comes between the parent's end
    and the child's start: the child still receives the parent's output (SQLite, PostgreSQL)."""
    hold = asyncio.Event()
    seen: dict[str, tuple[Outcome, ...]] = {}

    async def run(ctx: Any, payload: Any) -> Any:
        seen[ctx.key] = ctx.parents
        if payload == "hold":
            await hold.wait()
        return payload

    fast = RetryPolicy(initial_backoff=0.0, jitter=False)
    opts: dict[str, Any] = {"store": make_store(), "key_retention": 0, "shutdown_grace": 0}
    async with Scheduler([pool("default", run, max=2)], **opts) as s:
        parent, _hold, child = await s.submit_batch(
            [
                Task({"rows": 3}, key="parent"),
                Task("hold", key="hold", retry=fast),
                Task("child", key="child", after=["parent", "hold"]),
            ]
        )
        assert await wait(parent) == {"rows": 3}
    assert "child" not in seen
    hold.set()
    opts["store"] = make_store()
    async with Scheduler([pool("default", run, max=2)], **opts) as s:
        handle = await s.handle(child.id)
        assert handle is not None
        assert await wait(handle) == "child"
        assert s.seam.lookup(parent.id) is None  # forgotten by the engine, yet its output was kept
    assert seen["child"][0] == Outcome(parent.id, "parent", "succeeded", {"rows": 3}, None)
    assert seen["child"][1].status == "succeeded"


def test_a_parent_output_that_does_not_pickle_reaches_a_child_process_as_none() -> None:
    from cronoq.runtime.processes.registry import _pickled_parents

    parents = (Outcome(1, "a", "succeeded", lambda: 1, None), Outcome(2, None, "succeeded", [2], None))
    rows = pickle.loads(_pickled_parents(parents))
    assert rows == [(1, "a", "succeeded", None, None), (2, None, "succeeded", [2], None)]
