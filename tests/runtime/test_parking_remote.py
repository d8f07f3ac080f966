"""runtime/parking.py: what the server's remote executor uses for a remote worker's durable
calls (docs/reference/grpc.md#protocol-v7): the split step, the journal's steps for the lease,
and moving past the steps the worker replayed itself."""

from __future__ import annotations

from typing import Any

import pytest

from cronoq import Pool, Scheduler, TaskContext
from cronoq.runtime import parking

from .conftest import wait


async def test_the_journal_steps_and_skipping_the_replayed_ones() -> None:
    seen: list[Any] = []

    async def run(ctx: TaskContext, payload: Any) -> Any:
        if ctx.resumes == 0:
            assert parking.journal_steps(ctx) is None and parking.step_replay(ctx, "a") == (False, None)
            assert await parking.step_record(ctx, "a", (1, 2)) == [1, 2]  # as it reads back from JSON
            await ctx.sleep_for(0.01)
        seen.append(parking.journal_steps(ctx))
        with pytest.raises(ValueError, match="2 replayed step"):
            parking.skip_steps(ctx, 2)  # a step, then a sleep: not two steps
        parking.skip_steps(ctx, 1)
        assert parking.cursor(ctx) == 1
        await ctx.sleep_for(0.01)  # replayed from the journal: the recorded end has passed
        assert parking.cursor(ctx) == 2
        return "done"

    async with Scheduler([Pool("default", run, min=1, max=1, initial=1, autoscale=False)]) as sched:
        assert await wait(await sched.submit(None)) == "done"
    assert seen == [[["a", [1, 2]], None]]
