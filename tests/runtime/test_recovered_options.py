"""Finished tasks keep their options across a restart (issue #35, defect 5), with SQLite and
PostgreSQL: after the restart a filter by tag still finds a failed task, and its replay has the
original's retry policy (three attempts), timeout, labels and tags, as it had before."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from cronoq import BulkResult, Pool, Retryable, RetryPolicy, Scheduler, TaskFailed

from .conftest import wait


async def test_a_finished_task_keeps_its_options_after_a_restart(make_store: Callable[[], Any]) -> None:
    calls: list[Any] = []

    async def flaky(ctx: Any, payload: Any) -> Any:
        calls.append(ctx.attempt)
        raise Retryable("upstream down")

    def pools() -> list[Pool]:
        return [Pool("default", flaky, max=2, autoscale=False, retry=RetryPolicy(max_attempts=1))]

    retry = RetryPolicy(max_attempts=3, initial_backoff=0.01, max_backoff=0.01, jitter=False)
    async with Scheduler(pools(), store=make_store()) as s:
        h = await s.submit(
            {"n": 1}, key="mail-1", retry=retry, timeout=30.0, tags={"team": "ops"}, kind="mail"
        )
        with pytest.raises(TaskFailed):
            await wait(h)
        assert len(calls) == 3
    calls.clear()
    async with Scheduler(pools(), store=make_store()) as s:
        res = await s.replay_where(tags={"team": "ops"}, kinds="mail")  # the tag is still there
        assert res == BulkResult(1, 1)
        replay = await s.handle("mail-1")  # (the key moved to the replay)
        assert replay is not None and replay.id != h.id
        with pytest.raises(TaskFailed, match="upstream down"):
            await wait(replay)
        assert len(calls) == 3  # the replay kept the task's retry policy (the pool's: 1)
        assert len(await s.attempts(replay.id)) == 3
