"""An app's ``@app.lifespan`` and call hooks in process children (real Scheduler, real
children): entered once per child, ``ctx.state`` in the child, left when the child stops
normally (recycling, shutdown); a failing lifespan fails the attempt permanently."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest
from tests.runtime.processes import lifespan_app
from tests.runtime.processes.lifespan_app import exits

import cronoq.testing
from cronoq import Processes, RetryPolicy, TaskFailed


async def test_each_child_enters_the_lifespan_once_and_leaves_it(tmp_path: Path) -> None:
    log = tmp_path / "exits"
    recycle = Processes(max_tasks_per_child=3, kill_grace=0.5)
    async with lifespan_app.app.scheduler(processes=recycle):
        outs = []
        for _ in range(4):  # one by one: the first child serves 3 jobs, then a new one
            outs.append(await asyncio.wait_for(await lifespan_app.look.submit(str(log)), 20))
        first, second = outs[0]["pid"], outs[3]["pid"]
        assert {o["pid"] for o in outs[:3]} == {first} and second != first
        assert all(o["pid"] != os.getpid() for o in outs)
        for o in outs:  # ctx.state is the child's own lifespan's, entered once in that child
            assert (o["state_pid"], o["entries"]) == (o["pid"], 1)
        assert outs[0]["hooks"] == ["sync"]  # the app's call hook ran around it, in the child
        coro = await asyncio.wait_for(await lifespan_app.look_async.submit(), 20)
        assert (coro["pid"], coro["state_pid"], coro["entries"]) == (second, second, 1)
        assert coro["hooks"] == ["async"]
        assert exits(log) == [f"exit {first}"]  # the recycled child left its lifespan
    assert exits(log) == [f"exit {first}", f"exit {second}"]  # and so did the other at shutdown


async def test_a_failing_lifespan_fails_the_attempt_permanently_without_respawns() -> None:
    async with lifespan_app.broken.scheduler(processes=Processes(kill_grace=0.5)) as sched:
        for _ in range(2):
            h = await lifespan_app.never.options(retry=RetryPolicy(max_attempts=3)).submit()
            with pytest.raises(
                TaskFailed,
                match=r"the app's lifespan failed in the task's process \(pid \d+\): "
                r"RuntimeError: no database in a child",
            ) as info:
                await asyncio.wait_for(h, 20)
            assert info.value.status == "failed"
            assert len(await sched.attempts(h.id)) == 1  # permanent: not retried
        assert sched._procs.supervisor("default").started == 1


async def test_the_test_kit_runs_the_hooks_around_process_tasks_in_its_thread(tmp_path: Path) -> None:
    async with cronoq.testing.run(lifespan_app.app):  # process tasks in a thread (the default)
        out = await (await lifespan_app.look.submit(str(tmp_path / "exits")))
        coro = await (await lifespan_app.look_async.submit())
    assert (out["pid"], out["state_pid"], out["hooks"]) == (os.getpid(), os.getpid(), ["sync"])
    assert (coro["pid"], coro["hooks"]) == (os.getpid(), ["async"])
