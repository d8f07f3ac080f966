"""Bulk request keys are durable and a bulk replay never replays a task twice (issue #35, 1).

A retry of ``replay_where(request_key=...)`` after a restart must answer the first call's
result, not replay every task again; a second bulk replay (another key, or none) must not
match tasks that already have a replay unless ``force`` is given.
"""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path
from typing import Any

from cronoq import BulkResult, Permanent, Scheduler, SqliteStore, TaskFailed

from .conftest import pool, wait

N = 40


async def failing(ctx: Any, payload: Any) -> Any:
    raise Permanent("upstream down")


async def _fail_all(s: Scheduler, n: int) -> None:
    hs = await asyncio.gather(*(s.submit({"i": i}, tags={"batch": "night"}) for i in range(n)))
    for h in hs:
        with contextlib.suppress(TaskFailed):
            await wait(h)


async def _replays(s: Scheduler) -> int:
    """How many replays exist (cancelled here: the pool is paused, so they are all ready)."""
    return (await s.cancel_where(statuses="ready")).acted


async def test_a_keyed_bulk_replay_retried_after_a_restart_answers_the_first_result(tmp_path: Path) -> None:
    db = tmp_path / "bulk.db"
    async with Scheduler([pool("default", failing, max=4)], store=SqliteStore(db)) as s:
        await _fail_all(s, N)
        await s.pause("default")  # the replays stay ready (countable, never failed again)
        first = await s.replay_where(statuses="failed", request_key="nightly")
        assert first == BulkResult(N, N)
    async with Scheduler([pool("default", failing, max=4)], store=SqliteStore(db)) as s:
        again = await s.replay_where(statuses="failed", request_key="nightly")
        assert again == first  # answered from the store: nothing replayed twice
        assert await _replays(s) == N


async def test_a_task_with_a_replay_is_not_matched_again_unless_forced(tmp_path: Path) -> None:
    db = tmp_path / "bulk.db"
    async with Scheduler([pool("default", failing, max=4)], store=SqliteStore(db)) as s:
        await _fail_all(s, N)
        await s.pause("default")
        assert await s.replay_where(statuses="failed") == BulkResult(N, N)
    async with Scheduler([pool("default", failing, max=4)], store=SqliteStore(db)) as s:
        # another key (or none), after a restart: the originals have replays, the replays are
        # not finished: nothing matches
        assert await s.replay_where(statuses="failed", request_key="other") == BulkResult(0, 0)
        assert await s.replay_where(tags={"batch": "night"}) == BulkResult(0, 0)
        forced = await s.replay_where(statuses="failed", force=True)
        assert forced == BulkResult(N, N)  # force: replayed ones too
        assert await _replays(s) == 2 * N


async def test_an_interrupted_keyed_call_is_finished_by_its_retry(tmp_path: Path) -> None:
    """The first call is cancelled after its first page committed (as a crash would cut it):
    the retry with the same key after a restart replays only the rest and says ``resumed``,
    with counts that include the first page."""
    from cronoq.engine.bulk import PAGE

    n = PAGE + 30
    db = tmp_path / "bulk.db"
    sched = Scheduler([pool("default", failing, max=16)], store=SqliteStore(db), emit_transitions=True)
    async with sched as s:
        await _fail_all(s, n)
        await s.pause("default")
        events = s.events()
        call = asyncio.ensure_future(s.replay_where(statuses="failed", request_key="k"))
        # the first page's replays are submitted in one engine step; the call then sleeps
        # before its next page: cancel it there, as a crash would cut it
        await wait(anext(aiter(events)))
        assert not call.done()
        call.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await call
    async with Scheduler([pool("default", failing, max=16)], store=SqliteStore(db)) as s:
        res = await s.replay_where(statuses="failed", request_key="k")
        assert res.resumed and (res.matched, res.acted) == (n, n)
        assert await _replays(s) == n
