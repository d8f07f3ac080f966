"""cronoq.testing.run: the real Scheduler on virtual time (autojump, advance, events)."""

from __future__ import annotations

import asyncio
import datetime as dt
import time
from typing import Any

import pytest

import cronoq.testing
from cronoq import App, Pool, Retryable, RetryPolicy, TaskContext, TaskFailed

UTC = dt.UTC
START = dt.datetime(2026, 1, 1, tzinfo=UTC)
DAY = 86_400


def nightly_app(log: list[tuple[int, dt.datetime]], clock: list[Any]) -> App:
    app = App("nightly")

    @app.recurring("0 3 * * *", args=["eu"])
    @app.task(
        name="report",
        retry=RetryPolicy(max_attempts=3, initial_backoff=600, max_backoff=3600, jitter=False),
    )
    async def report(ctx: TaskContext, region: str) -> str:
        log.append((ctx.attempt, clock[0].now))
        await ctx.sleep(120)  # two minutes of work
        if ctx.attempt == 1:
            raise Retryable("upstream not ready")
        return f"{region} done"

    return app


async def test_a_month_of_a_nightly_schedule_with_retries_runs_in_well_under_two_seconds() -> None:
    log: list[tuple[int, dt.datetime]] = []
    holder: list[Any] = []
    app = nightly_app(log, holder)
    t0 = time.perf_counter()
    async with cronoq.testing.run(app, start=START) as env:
        holder.append(env)
        await env.advance(31 * DAY)
        events = env.events
        assert env.now == START + dt.timedelta(days=31)
    wall = time.perf_counter() - t0
    # every occurrence: attempt 1 at 03:00:00, it works 2 min and fails, the 10-minute backoff,
    # attempt 2 at 03:12:00 succeeds
    expected = []
    for day in range(31):
        at = START + dt.timedelta(days=day, hours=3)
        expected += [(1, at), (2, at + dt.timedelta(minutes=12))]
    assert log == expected
    done = [e for e in events if e.status == "succeeded"]
    assert len(done) == 31
    assert [dt.datetime.fromtimestamp(e.at, UTC) for e in done] == [
        START + dt.timedelta(days=d, hours=3, minutes=14) for d in range(31)
    ]
    assert sum(1 for e in events if e.status == "retrying") == 31
    assert wall < 2.0, f"a virtual month took {wall:.2f} s of wall time"


async def test_autojump_a_backoff_and_a_fixed_start_tomorrow() -> None:
    app = App("a")
    attempts: list[dt.datetime] = []

    @app.task(
        name="flaky", retry=RetryPolicy(max_attempts=2, initial_backoff=600, max_backoff=600, jitter=False)
    )
    async def flaky() -> int:
        attempts.append(env.now)
        if len(attempts) == 1:
            raise Retryable("later")
        return len(attempts)

    async with cronoq.testing.run(app, start=START) as env:
        t0 = time.perf_counter()
        assert await (await flaky.submit()) == 2
        assert attempts == [START, START + dt.timedelta(minutes=10)]
        tomorrow = START + dt.timedelta(days=1, hours=9)
        h = await flaky.options(start_at=tomorrow).submit()
        assert await h == 3
        assert attempts[-1] == tomorrow
        assert time.perf_counter() - t0 < 5  # (milliseconds really; generous for a loaded machine)
        assert env.jumps >= 2


async def test_without_autojump_only_advance_moves_time() -> None:
    app = App("a")
    ran: list[dt.datetime] = []

    @app.task(name="later")
    async def later() -> None:
        ran.append(env.now)

    async with cronoq.testing.run(app, start=START, autojump=False) as env:
        h = await later.options(start_in=60).submit()
        await env.advance(59)
        assert not ran and not h.done()
        assert env.now == START + dt.timedelta(seconds=59)
        await env.advance(1)
        assert ran == [START + dt.timedelta(seconds=60)]
        assert h.done()
        statuses = [e.status for e in env.events if e.id == h.id]
        assert statuses == ["blocked", "scheduled", "ready", "running", "succeeded"]


async def test_timeouts_fire_on_virtual_time() -> None:
    app = App("a")

    @app.task(name="slow", timeout=30, retry=RetryPolicy(max_attempts=1))
    async def slow(ctx: TaskContext) -> None:
        await ctx.sleep(3600)

    async with cronoq.testing.run(app, start=START) as env:
        with pytest.raises(TaskFailed) as ei:
            await (await slow.submit())
        assert ei.value.status in ("failed", "dead_lettered")
        assert env.now == START + dt.timedelta(seconds=30)


async def test_an_attempt_busy_for_real_holds_time_still() -> None:
    app = App("a")
    seen: list[dt.datetime] = []

    @app.task(name="real_io")
    async def real_io() -> None:
        seen.append(env.now)
        await asyncio.sleep(0.05)  # real I/O: not the virtual clock
        seen.append(env.now)

    @app.task(name="threaded")
    def threaded() -> str:
        seen.append(env.now)
        time.sleep(0.05)  # busy in a thread
        seen.append(env.now)
        return "ok"

    @app.task(name="timer")
    async def timer() -> None: ...

    async with cronoq.testing.run(app, start=START) as env:
        later = await timer.options(start_in=5).submit()
        await (await real_io.submit())
        assert seen == [START, START]  # the pending 5 s timer did not jump during the real sleep
        assert not later.done()
        assert await (await threaded.submit()) == "ok"
        assert seen == [START] * 4
        await later
        assert env.now == START + dt.timedelta(seconds=5)


async def test_plain_pools_and_env_sleep() -> None:
    async def executor(ctx: Any, payload: Any) -> Any:
        await ctx.sleep(payload)
        return payload

    async with cronoq.testing.run([Pool("p", executor, min=2, max=2, autoscale=False)], start=START) as env:
        h1 = await env.scheduler.submit(3600)
        h2 = await env.scheduler.submit(60)
        assert await h2 == 60 and env.now == START + dt.timedelta(seconds=60)
        assert await h1 == 3600 and env.now == START + dt.timedelta(hours=1)
        await env.sleep(30)
        assert env.now == START + dt.timedelta(hours=1, seconds=30)
        assert env.running == 0
        assert "Environment" in repr(env)


async def test_durable_store_under_virtual_time(tmp_path: Any) -> None:
    app = App("a")

    @app.task(name="later")
    async def later(n: int) -> int:
        return n * 2

    store = cronoq.SqliteStore(str(tmp_path / "q.db"))
    async with cronoq.testing.run(app, start=START, store=store) as env:
        assert await (await later.options(start_in=DAY).submit(21)) == 42
        assert env.now == START + dt.timedelta(days=1)


async def test_bad_options_are_refused() -> None:
    app = App("a")
    with pytest.raises(ValueError, match="brings its own clock"):
        async with cronoq.testing.run(app, clock=object()):
            pass
    with pytest.raises(ValueError, match="emit_transitions"):
        async with cronoq.testing.run(app, emit_transitions=False):
            pass
    with pytest.raises(ValueError, match="quiet_turns"):
        async with cronoq.testing.run(app, quiet_turns=0):
            pass
    with pytest.raises(ValueError, match="not both"):
        async with cronoq.testing.run([], pools=[]):
            pass
    with pytest.raises(ValueError, match="aware datetime"):
        async with cronoq.testing.run(app, start=dt.datetime(2026, 1, 1)):
            pass


async def test_advance_says_so_when_an_attempt_holds_time_still() -> None:
    app = App("a")
    gate = asyncio.Event()

    @app.task(name="blocked")
    async def blocked() -> None:
        await gate.wait()  # real waiting: time cannot move meanwhile

    async with cronoq.testing.run(app, start=START, hold_timeout=0.2) as env:
        h = await blocked.submit()
        with pytest.raises(TimeoutError, match=r"1 attempt\(s\) ran for 0.2 s of real time without waiting"):
            await env.advance(60)
        gate.set()
        await h
        assert env.now == START  # it never moved past the held instant


async def test_pools_given_by_name_are_fixed_size() -> None:
    app = App("a")

    @app.task(name="t", pool="io")
    async def t() -> int:
        return 1

    async with cronoq.testing.run(app, pools=["io"], start=START) as env:
        assert await (await t.submit()) == 1
        snap = await env.scheduler.snapshot()
        assert snap.pools[0].capacity == 10


async def test_each_occurrence_gets_its_own_arguments() -> None:
    # a recurring schedule's arguments are bound once; an occurrence that mutates them must not
    # change the next one's (as on a remote worker, which decodes fresh JSON every time)
    app = App("hourly")
    seen: list[list[str]] = []

    @app.recurring("0 * * * *", args=[["a"]])
    @app.task(name="hourly")
    async def hourly(items: list[str]) -> int:
        seen.append(list(items))
        items.append("x")
        return len(items)

    async with cronoq.testing.run(app, start=START) as env:
        await env.advance(3 * 3600)
    assert seen == [["a"], ["a"], ["a"]]


async def test_a_task_awaiting_another_lets_time_move_for_it() -> None:
    # the parent's attempt waits on the scheduler, not on real I/O: time must move for the
    # child's sleep and retry backoff (it did not: the parent held time still, for ever)
    app = App("nested")
    seen: list[tuple[str, dt.datetime]] = []

    @app.task(name="child", retry=RetryPolicy(max_attempts=2, initial_backoff=60, jitter=False))
    async def child(ctx: TaskContext) -> int:
        seen.append(("child", env.now))
        await ctx.sleep(10)
        if ctx.attempt == 1:
            raise Retryable("again")
        return ctx.attempt

    @app.task(name="busy")
    def busy() -> str:
        time.sleep(0.05)  # a thread busy for real: a parent waiting on it still holds time
        return "done"

    @app.task(name="parent")
    async def parent() -> list[object]:
        out: list[object] = [await (await child.submit())]
        seen.append(("parent", env.now))
        out.append(await (await busy.submit()))
        seen.append(("parent", env.now))
        return out

    @app.task(name="timer")
    async def timer() -> None: ...

    async with cronoq.testing.run(app, start=START) as env:
        later = await timer.options(start_in=85).submit()  # due just after busy() starts
        assert await asyncio.wait_for(await parent.submit(), 10) == [2, "done"]
        assert not later.done()
        await later
    at = START + dt.timedelta(seconds=80)  # 10 s of sleep, the 60 s backoff, 10 s of sleep
    assert seen == [
        ("child", START),
        ("child", START + dt.timedelta(seconds=70)),
        ("parent", at),
        ("parent", at),
    ]
