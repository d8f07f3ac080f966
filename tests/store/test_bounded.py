"""``base.bounded``: a commit awaited at most ``commit_timeout`` seconds, past it the store
steps down (docs/reference/behaviour.md#stores), and no task in between: a future (the SQLite
store's executor future) resumes its caller in the loop turn after it completes, a coroutine
(the PostgreSQL store's commit) runs in the caller's task, starting at once and resuming it in
the turn after what it awaits completes (each task step is a loop turn more before the
statement goes out and before the acknowledgements do)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from cronoq.store.base import CommitDeadline, bounded


class Leased:
    def __init__(self, timeout: float | None) -> None:
        self._leading = True
        self.lease_ttl = 10.0
        self.lease_until = 0.0
        self.commit_timeout = timeout
        self.lost = 0
        self.on_lost = self._lost

    def _lost(self) -> None:
        self.lost += 1

    async def prune(self, now_unix_ns: int, limit: int | None = None) -> int:
        return 0


@pytest.mark.parametrize("timeout", [None, 15.0])
async def test_a_commit_future_resumes_its_caller_one_turn_after_it_completes(timeout: float | None) -> None:
    store = Leased(timeout)
    fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    t = asyncio.ensure_future(bounded(store, fut, "test store"))
    await asyncio.sleep(0)  # t awaits fut
    fut.set_result(None)
    await asyncio.sleep(0)
    assert t.done() and t.result() is None
    assert store._leading and store.lost == 0


async def test_past_the_timeout_the_store_steps_down_and_the_commit_is_cancelled() -> None:
    store = Leased(0.05)
    fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    with pytest.raises(CommitDeadline, match=r"within 0\.05 s"):
        await asyncio.wait_for(bounded(store, fut, "test store"), 5)
    assert fut.cancelled() and not store._leading and store.lost == 1


async def test_a_cancelled_caller_is_cancelled_not_past_its_deadline() -> None:
    store = Leased(15.0)
    fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    t = asyncio.ensure_future(bounded(store, fut, "test store"))
    await asyncio.sleep(0)
    t.cancel()
    with pytest.raises(asyncio.CancelledError):
        await t
    assert fut.cancelled() and store._leading and store.lost == 0


async def test_a_failed_commit_raises_its_error() -> None:
    store: Any = Leased(15.0)
    fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    fut.set_exception(OSError("disk"))
    with pytest.raises(OSError, match="disk"):
        await bounded(store, fut, "test store")
    assert store._leading


async def test_a_commit_coroutine_starts_at_once_in_its_callers_task() -> None:
    # a task of its own would start the commit a loop turn later (its statement sent a turn
    # after the committer took the batch) and resume the committer a turn late
    store = Leased(15.0)
    ran: list[asyncio.Task[Any] | None] = []
    fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    async def commit() -> None:
        ran.append(asyncio.current_task())
        await fut

    t = asyncio.ensure_future(bounded(store, commit(), "test store"))
    await asyncio.sleep(0)  # t's first step
    assert ran == [t]
    fut.set_result(None)
    await asyncio.sleep(0)
    assert t.done() and t.result() is None
    assert store._leading and store.lost == 0


async def test_a_commit_coroutine_past_the_timeout_is_cancelled_and_the_store_steps_down() -> None:
    store = Leased(0.05)
    ended: list[str] = []

    async def commit() -> None:
        try:
            await asyncio.get_running_loop().create_future()
        except asyncio.CancelledError:
            ended.append("cancelled")
            raise

    with pytest.raises(CommitDeadline, match=r"within 0\.05 s"):
        await asyncio.wait_for(bounded(store, commit(), "test store"), 5)
    assert ended == ["cancelled"] and not store._leading and store.lost == 1
    assert asyncio.current_task().cancelling() == 0  # type: ignore[union-attr]


async def test_a_commit_coroutines_own_timeout_is_not_the_deadline() -> None:
    store = Leased(15.0)

    async def commit() -> None:
        raise TimeoutError("the driver's command timeout")

    with pytest.raises(TimeoutError, match="command timeout"):
        await bounded(store, commit(), "test store")
    assert store._leading and store.lost == 0


async def test_a_cancelled_caller_of_a_commit_coroutine_is_cancelled_not_past_its_deadline() -> None:
    store = Leased(15.0)
    ended: list[str] = []

    async def commit() -> None:
        try:
            await asyncio.get_running_loop().create_future()
        except asyncio.CancelledError:
            ended.append("cancelled")
            raise

    t = asyncio.ensure_future(bounded(store, commit(), "test store"))
    await asyncio.sleep(0)
    t.cancel()
    with pytest.raises(asyncio.CancelledError):
        await t
    assert ended == ["cancelled"] and store._leading and store.lost == 0
