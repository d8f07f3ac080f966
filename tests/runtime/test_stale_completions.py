"""Late reports of aborted in-process attempts are ignored and counted
(docs/reference/behaviour.md#reliability).

A thread cannot be interrupted and a coroutine may swallow its cancellation: when such an
executor returns or raises after the engine aborted its attempt (timeout, lease loss), that
report is for a lease that is no longer current: ``stale_completions`` += 1 and the task's
outcome stands.  Not counted once the scheduler shut down (or restarted), nor for attempts that
shutdown itself aborted.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import pytest

from cronoq import RetryPolicy, Scheduler, TaskContext, TaskFailed

from .conftest import SAFETY, pool, wait


class RecordingExecutor(ThreadPoolExecutor):
    """The loop's default thread pool, keeping the futures of the attempts run on it.

    ``await done(f)`` (wrapped *before* the work finishes) resumes only after the scheduler's
    own done callback of that work ran: both are chained to ``f`` in registration order and
    the scheduler's callback is scheduled before this waiter is woken.
    """

    def __init__(self, workers: int = 4) -> None:
        super().__init__(max_workers=workers)
        self.futures: list[Future[Any]] = []

    def submit(self, fn: Any, /, *args: Any, **kwargs: Any) -> Future[Any]:
        f = super().submit(fn, *args, **kwargs)
        if any(isinstance(a, TaskContext) for a in args):  # (an attempt: its ctx is an argument)
            self.futures.append(f)
        return f


@pytest.fixture
def threads() -> Iterator[RecordingExecutor]:
    ex = RecordingExecutor()
    try:
        yield ex
    finally:
        ex.shutdown(wait=False)


def blocking(release: threading.Event, started: threading.Event, raise_: bool = False) -> Any:
    def run(ctx: Any, p: Any) -> Any:
        started.set()
        release.wait(SAFETY)
        if raise_:
            raise RuntimeError("late failure")
        return "late"

    return run


async def stale(s: Scheduler) -> int:
    return (await s.snapshot()).totals["stale_completions"]


@pytest.mark.parametrize("raise_", [False, True], ids=["returns", "raises"])
async def test_thread_finishing_after_lease_loss_is_a_stale_completion(threads, raise_):
    asyncio.get_running_loop().set_default_executor(threads)
    release, started = threading.Event(), threading.Event()
    p = pool(executor=blocking(release, started, raise_), lease_ttl=0.05, retry=RetryPolicy.none())
    async with Scheduler([p]) as s:
        h = await s.submit(1)
        with pytest.raises(TaskFailed) as ei:
            await wait(h)
        assert (ei.value.status, ei.value.message) == ("dead_lettered", "lease expired")
        assert await stale(s) == 0  # the thread is still running: no report yet
        done = asyncio.wrap_future(threads.futures[0])
        release.set()
        await wait(asyncio.wait([done]))
        assert (done.exception() is not None) is raise_
        assert await stale(s) == 1
        assert await s.status(h.id) == "dead_lettered"  # the late report changed nothing
        snap = await s.snapshot()
        assert snap.totals["lease_expiries"] == 1 and snap.running == 0


async def test_thread_finishing_after_timeout_is_a_stale_completion(threads):
    asyncio.get_running_loop().set_default_executor(threads)
    release, started = threading.Event(), threading.Event()
    async with Scheduler([pool(executor=blocking(release, started), retry=RetryPolicy.none())]) as s:
        h = await s.submit(1, timeout=0.05)
        with pytest.raises(TaskFailed) as ei:
            await wait(h)
        assert ei.value.message == "attempt timed out"
        done = asyncio.wrap_future(threads.futures[0])
        release.set()
        await wait(done)
        snap = await s.snapshot()
        assert snap.totals["stale_completions"] == 1 and snap.totals["timeouts"] == 1


async def test_thread_aborted_before_it_started_never_runs_and_reports_nothing(threads):
    one = RecordingExecutor(workers=1)
    asyncio.get_running_loop().set_default_executor(one)
    release, started = threading.Event(), threading.Event()
    ran: list[Any] = []

    def run(ctx: Any, p: Any) -> Any:
        ran.append(p)
        if p == "first":
            started.set()
            release.wait(SAFETY)
        return p

    try:
        async with Scheduler([pool(executor=run, min=2, max=2, retry=RetryPolicy.none())]) as s:
            first = await s.submit("first")
            queued = await s.submit("queued", timeout=0.05)  # waits for the only thread
            with pytest.raises(TaskFailed) as ei:
                await wait(queued)
            assert ei.value.message == "attempt timed out"
            done = asyncio.wrap_future(one.futures[1])
            release.set()
            assert await wait(first) == "first"
            await wait(done)
            assert ran == ["first"]
            assert await stale(s) == 0
    finally:
        one.shutdown(wait=False)


async def test_async_executor_swallowing_cancellation_is_a_stale_completion():
    release = asyncio.Event()
    returned = {"return": asyncio.Event(), "raise": asyncio.Event()}

    async def run(ctx: Any, p: str) -> Any:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            await release.wait()  # ignores the abort, then reports anyway
        returned[p].set()  # (the report is made in this same step, before any waiter runs)
        if p == "raise":
            raise RuntimeError("late failure")
        return "late"

    async with Scheduler([pool(executor=run, min=2, max=2, retry=RetryPolicy.none())]) as s:
        handles = [await s.submit(p, timeout=0.05) for p in ("return", "raise")]
        for h in handles:
            with pytest.raises(TaskFailed) as ei:
                await wait(h)
            assert ei.value.message == "attempt timed out"
        assert await stale(s) == 0
        release.set()
        for ev in returned.values():
            await wait(ev.wait())
        assert await stale(s) == 2
        assert [await s.status(h.id) for h in handles] == ["dead_lettered", "dead_lettered"]


async def test_not_counted_after_shutdown_nor_for_attempts_shutdown_aborted(threads):
    asyncio.get_running_loop().set_default_executor(threads)
    started = {"lost": threading.Event(), "cut": threading.Event()}
    release = threading.Event()

    def run(ctx: Any, p: str) -> Any:
        started[p].set()
        release.wait(SAFETY)
        return p

    s = Scheduler(
        [
            pool("leased", executor=run, lease_ttl=0.05, retry=RetryPolicy.none()),
            pool("plain", executor=run, retry=RetryPolicy.none()),
        ]
    )
    await s.start()
    lost = await s.submit("lost", pool="leased")
    with pytest.raises(TaskFailed) as ei:
        await wait(lost)
    assert ei.value.message == "lease expired"  # aborted by the engine; its thread runs on
    cut = await s.submit("cut", pool="plain")
    await wait(asyncio.to_thread(started["cut"].wait, SAFETY))
    await s.shutdown(0)  # aborts "cut"
    with pytest.raises(TaskFailed) as ei:
        await wait(cut)
    assert ei.value.status == "shutdown"
    await s.start()  # a new run: neither late report belongs to a current lease
    try:
        done = [asyncio.wrap_future(f) for f in threads.futures]
        assert len(done) == 2
        release.set()
        await wait(asyncio.gather(*done))
        assert await stale(s) == 0
    finally:
        await s.shutdown(0)
