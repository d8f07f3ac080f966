"""cronoq.testing.eager: calls run inline, through the same binding and JSON round trip."""

from __future__ import annotations

import datetime as dt
import sys

import pytest

import cronoq
import cronoq.testing
from cronoq import App, Permanent, SchedulerError, SubmitError, TaskContext, TaskFailed, TaskHandle


def make_app() -> App:
    app = App("eager")

    @app.task(name="e.add", priority="high")
    async def add(x: int, y: int = 1) -> int:
        return x + y

    @app.task(name="e.when", kind="when-v1")
    def when(ctx: TaskContext, day: dt.date) -> dt.date:  # a plain def: in a thread
        assert ctx.attempt == 1 and not ctx.is_cancelled()
        return day + dt.timedelta(days=1)

    @app.task(name="e.fail")
    async def fail(ctx: TaskContext) -> None:
        await ctx.sleep(3600)  # no time passes
        raise Permanent("nope")

    return app


async def test_calls_run_inline_and_round_trip_through_json() -> None:
    app = make_app()
    add, when, fail = app.tasks["e.add"], app.tasks["e.when"], app.tasks["e.fail"]
    with cronoq.testing.eager(app):
        h = await add.options(key="ignored").submit(1, y=2)
        assert isinstance(h, TaskHandle) and h.done() and not h.cancel()
        assert await h == 3 and await h.result() == 3
        assert await (await when.submit(dt.date(2026, 1, 31))) == dt.date(2026, 2, 1)
        assert await when.enqueue(dt.date(2026, 1, 1)) > 0
        failed = await fail.submit()
        with pytest.raises(TaskFailed, match="nope") as ei:
            await failed
        assert ei.value.status == "failed"
        with pytest.raises(TaskFailed):
            await failed.result()
        with pytest.raises(SubmitError, match="argument 'x'"):
            await add.submit("one")
        h1, h2 = await app.submit_batch([add.spec(1), add.spec(5, 5)])
        assert (await h1, await h2) == (2, 10)
        assert "EagerHandle" in repr(h1)
    with pytest.raises(cronoq.SchedulerError):
        await add.submit(1)  # detached again


async def test_a_task_calling_sys_exit_fails_as_for_real() -> None:
    app = App("exits")

    @app.task(name="e.exit_async")
    async def exit_async() -> None:
        sys.exit(3)

    @app.task(name="e.exit_sync")
    def exit_sync() -> None:
        sys.exit(3)

    with cronoq.testing.eager(app):
        for t in (exit_async, exit_sync):
            h = await t.submit()
            with pytest.raises(TaskFailed) as ei:
                await h
            assert (ei.value.status, ei.value.message) == ("failed", "SystemExit: 3")
    with pytest.raises(ValueError, match=r"eager takes a cronoq\.App"), cronoq.testing.eager(object()):  # type: ignore[arg-type]
        pass


async def test_what_needs_a_scheduler_says_so_and_durable_sleeps_and_steps_run() -> None:
    # no scheduler: placeholders and the durable waits cannot be ignored as task fields are,
    # so they fail naming the test kit to use (not an AttributeError, not a type error on a
    # marker dict); sleeps take no time and steps call their function, as ctx.sleep does
    app = App("eager-durable")

    @app.task(name="d.one")
    async def one(n: int) -> int:
        return n + 1

    @app.task(name="d.spawner")
    async def spawner(ctx: TaskContext) -> list[int]:
        return await ctx.spawn([one.spec(1)])

    @app.task(name="d.sleeper")
    async def sleeper(ctx: TaskContext) -> str:
        await ctx.sleep_for(86_400)
        await ctx.sleep_until(dt.datetime(2030, 1, 1, tzinfo=dt.UTC))
        return str(await ctx.step("greet", lambda who: f"hi {who}", "ann")) + f" {ctx.resumes}"

    with cronoq.testing.eager(app):
        first = one.spec(1)
        with pytest.raises(SchedulerError, match=r"a placeholder argument of 'd\.one' needs a scheduler"):
            await app.submit_batch([first, one.spec(first.output)])
        h = await one.submit(1)
        with pytest.raises(SchedulerError, match=r"cronoq\.testing\.run"):
            await one.submit(cronoq.output_of(h))
        with pytest.raises(TaskFailed, match=r"ctx\.spawn\(\) needs a scheduler"):
            await (await spawner.submit())
        assert await (await sleeper.submit()) == "hi ann 0"


async def test_a_steps_result_reads_back_as_json_as_for_real() -> None:
    # ctx.step records its result as JSON and returns it as it reads back: a tuple is a list,
    # and a result that is not JSON fails the attempt. Eager returned the function's own value,
    # so a step that could never be recorded passed its unit test
    app = App("eager-steps")

    @app.task(name="s.pair")
    async def pair(ctx: TaskContext) -> str:
        return type(await ctx.step("pair", lambda: (1, 2))).__name__

    @app.task(name="s.when")
    async def when(ctx: TaskContext) -> str:
        return str(await ctx.step("when", lambda: dt.datetime(2030, 1, 1)))

    with cronoq.testing.eager(app):
        assert await (await pair.submit()) == "list"
        with pytest.raises(TaskFailed, match=r"the result of step 'when' is not JSON"):
            await (await when.submit())
