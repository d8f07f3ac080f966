"""docs/how-to/progress.md: ``ctx.progress``, ``sched.progress``, ``sched.attempts`` and
``events(progress=True)`` on the real Scheduler under virtual time (cronoq.testing)."""

from __future__ import annotations

import asyncio
import math

import pytest

import cronoq
import cronoq.testing
from cronoq import (
    EventStream,
    Pool,
    Progress,
    ProgressEvent,
    ProgressEventStream,
    Retryable,
    RetryPolicy,
    StatusEvent,
)


async def test_progress_readable_and_published_at_most_four_per_second():
    async def work(ctx, payload):
        for i in range(1, 101):  # one report every 10 ms for one second
            ctx.progress(i, 100, f"item {i}")
            await ctx.sleep(0.01)
        return "done"

    async with cronoq.testing.run(Pool("p", work, min=1, max=1, autoscale=False)) as env:
        s = env.scheduler
        plain = s.events()
        prog = s.events(progress=True)
        assert isinstance(plain, EventStream) and isinstance(prog, ProgressEventStream)
        h = await s.submit(None)
        await env.advance(0.5)
        p = await s.progress(h.id)
        assert isinstance(p, Progress) and p.total == 100 and p.attempt == 1 and 40 <= p.done <= 60
        assert await h == "done"
        plain_events = list(plain.take())
        events = list(prog.take())
    assert all(isinstance(e, StatusEvent) for e in plain_events)  # never a progress event
    pe = [e for e in events if isinstance(e, ProgressEvent)]
    assert 4 <= len(pe) <= 6  # one second of reports: at most 4 per second (+ the first)
    assert pe[0].done == 1 and pe[0].message == "item 1" and pe[0].id == h.id and pe[0].pool == "p"
    # each event carries the newest value when it went out (``at``: when it was reported)
    assert [e.done for e in pe] == [1, 25, 50, 75, 100]
    # the status events are the same on both streams
    assert [(e.id, e.status) for e in events if isinstance(e, StatusEvent)] == [
        (e.id, e.status) for e in plain_events
    ]


async def test_progress_resets_on_a_new_attempt_and_attempts_timeline():
    async def work(ctx, payload):
        ctx.progress(ctx.attempt * 10)
        await ctx.sleep(1)
        if ctx.attempt == 1:
            raise Retryable("try again")
        await ctx.sleep(1)
        return ctx.attempt

    retry = RetryPolicy(max_attempts=3, initial_backoff=5.0, jitter=False)
    async with cronoq.testing.run(Pool("p", work, min=1, max=1, autoscale=False, retry=retry)) as env:
        s = env.scheduler
        h = await s.submit(None)
        await env.advance(2)  # attempt 1 failed, backing off
        assert (await s.progress(h.id)).done == 10
        await env.advance(4.5)  # attempt 2 running, reported 20
        assert (await s.progress(h.id)) == Progress(20.0, None, None, (await s.progress(h.id)).at, 2)
        assert await h == 2
        tl = await s.attempts(h.id)
    assert [(a.number, a.outcome, a.message) for a in tl] == [
        (1, "failed", "try again"),
        (2, "succeeded", None),
    ]
    assert tl[0].ended_at - tl[0].started_at == pytest.approx(1.0)
    assert tl[1].started_at - tl[0].ended_at == pytest.approx(5.0)


async def test_bad_values_raise_and_unknown_tasks_answer_none():
    errors: list[str] = []

    async def work(ctx, payload):
        for args in [(math.nan,), (-1,), (2, 1), (1, 0), (1, None, "x" * 1025)]:
            try:
                ctx.progress(*args)
            except ValueError as e:
                errors.append(str(e))
        return None

    async with cronoq.testing.run(Pool("p", work, min=1, max=1, autoscale=False)) as env:
        s = env.scheduler
        h = await s.submit(None)
        await h
        assert await s.progress(h.id) is None
        assert await s.progress(12345) is None
        assert await s.attempts(12345) == []
        assert await s.progress("no-such-key") is None
    assert len(errors) == 5 and "must not exceed total" in errors[2]


async def test_progress_from_a_thread_and_after_the_attempt_ended():
    seen: list[object] = []

    def work(ctx, payload):  # a synchronous executor runs in a pool thread
        ctx.progress(3, 4, "from a thread")
        seen.append(ctx)
        return 1

    async with cronoq.Scheduler([Pool("p", work, min=1, max=1, autoscale=False)]) as s:
        h = await s.submit(None)
        await h
        for _ in range(10):
            await asyncio.sleep(0)
        p = await s.progress(h.id)
        assert p is not None and (p.done, p.total, p.message) == (3, 4, "from a thread")
        seen[0].progress(4, 4)  # the attempt ended: a no-op
        await asyncio.sleep(0)
        assert (await s.progress(h.id)).done == 3


def test_blocking_scheduler_progress_attempts_and_events():
    import threading

    gate = threading.Event()

    def work(ctx, payload):
        ctx.progress(1, 2, "half")
        gate.wait(10)
        return "ok"

    with cronoq.BlockingScheduler([Pool("p", work, min=1, max=1, autoscale=False)]) as bs:
        events = bs.events(progress=True)
        h = bs.submit(None)
        first = events.next(timeout=10)
        while not isinstance(first, ProgressEvent):
            first = events.next(timeout=10)
        assert (first.done, first.total, first.message) == (1, 2, "half")
        assert bs.progress(h.id).message == "half"
        assert [a.outcome for a in bs.attempts(h.id)] == ["running"]
        gate.set()
        assert h.result(10) == "ok"
        assert [a.outcome for a in bs.attempts(h.id)] == ["succeeded"]
        events.close()
