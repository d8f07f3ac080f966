"""Named tasks with ``run_in``: loop, thread and process tasks in one app; the test kit runs
process tasks in a thread unless asked for real processes (docs/how-to/processes.md)."""

from __future__ import annotations

import asyncio
import os
import threading

from tests.tasks import proc_app

import cronoq
import cronoq.testing
from cronoq import Processes


async def test_mixed_loop_thread_process_in_one_app() -> None:
    app = proc_app.app
    assert [app.tasks[n].run_in for n in sorted(app.tasks)] == ["process", "loop", "process", "thread"]
    async with app.scheduler(processes=Processes(kill_grace=0.5)) as sched:
        loop_h = await proc_app.on_loop.submit(1)
        thread_h = await proc_app.on_thread.submit(2)
        proc_h = await proc_app.on_process.submit(3)
        async_h = await proc_app.async_in_process.submit(4)
        outs = await asyncio.wait_for(asyncio.gather(loop_h, thread_h, proc_h, async_h), 20)
        lp, th, pr, ap = outs
        assert lp == [1, os.getpid(), threading.get_ident()]
        assert th[:2] == [2, os.getpid()] and th[2] != threading.get_ident()
        assert pr["n"] == 6 and pr["pid"] != os.getpid()
        assert (pr["id"], pr["kind"], pr["attempt"]) == (proc_h.id, "tests.tasks.proc_app.on_process", 1)
        assert ap[0] == 4 and ap[1] != os.getpid()
        p = await sched.progress(proc_h.id)
        assert p is not None and (p.done, p.total) == (3, 4)


async def test_test_kit_runs_process_tasks_in_a_thread_by_default() -> None:
    async with cronoq.testing.run(proc_app.app) as env:
        h = await proc_app.on_process.submit(5)
        out = await h
        assert out["pid"] == os.getpid() and out["n"] == 10
        assert env.scheduler.started


async def test_test_kit_runs_real_processes_when_asked() -> None:
    async with cronoq.testing.run(
        proc_app.app, real_processes=True, processes=Processes(kill_grace=0.5)
    ) as env:
        h = await proc_app.on_process.submit(5)
        out = await asyncio.wait_for(asyncio.shield(asyncio.ensure_future(_await(h))), 20)
        assert out["pid"] != os.getpid()
        assert env.scheduler.started


async def _await(h: object) -> object:
    return await h  # type: ignore[misc]


async def test_eager_runs_process_tasks_in_a_thread() -> None:
    with cronoq.testing.eager(proc_app.app):
        out = await (await proc_app.on_process.submit(4))
    assert out["n"] == 8 and out["pid"] == os.getpid()
