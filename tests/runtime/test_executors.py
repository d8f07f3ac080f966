"""Executors and attempts: outcomes, retries, timeouts, leases, TaskContext
(docs/reference/behaviour.md#lifecycle, docs/reference/behaviour.md#reliability,
docs/reference/behaviour.md#pool-api, docs/reference/behaviour.md#types)."""

from __future__ import annotations

import asyncio
import contextvars
import datetime as dt
import math
import sys
import threading
import time
from typing import Any

import pytest

from cronoq import Permanent, Retryable, RetryPolicy, Scheduler, SchedulerError, TaskContext, TaskFailed
from cronoq.runtime.executors import ExecutorKind, kind_of

from .conftest import pool, wait

FAST_RETRY = RetryPolicy(max_attempts=3, initial_backoff=0, jitter=False)

# ----------------------------------------------------------------------------- context variables

_VAR: contextvars.ContextVar[object] = contextvars.ContextVar("cronoq_test_var", default=None)


@pytest.mark.parametrize("in_thread", [False, True], ids=["async", "thread"])
async def test_a_context_variable_an_attempt_sets_never_reaches_the_next(in_thread: bool) -> None:
    """Each attempt runs in a fresh copy of the context start() ran in: one slot, four
    attempts back to back, each setting a variable the next must not see (the driver is kicked
    from inside the previous attempt, and a pool thread is reused)."""
    _VAR.set("from start()")
    seen: list[tuple[object, object]] = []

    def run_sync(ctx: TaskContext, payload: Any) -> None:
        seen.append((payload, _VAR.get()))
        _VAR.set(payload)

    async def run_async(ctx: TaskContext, payload: Any) -> None:
        run_sync(ctx, payload)

    executor = run_sync if in_thread else run_async
    async with Scheduler([pool("default", executor, min=1, max=1)]) as s:
        _VAR.set("after start()")
        for i in range(4):
            await (await s.submit(i))
    assert seen == [(i, "from start()") for i in range(4)]


async def test_queued_attempts_each_get_their_own_task_and_a_fresh_context() -> None:
    """Attempts queued behind one slot are started from the end of the attempt before them (the
    slot is refilled in that turn): each still runs in its own asyncio task, in a fresh copy of
    start()'s context, and cancelling one of them leaves the next alone."""
    _VAR.set("from start()")
    seen: list[tuple[object, object]] = []
    tasks: list[asyncio.Task[Any] | None] = []
    blocked = asyncio.Event()

    async def run(ctx: TaskContext, payload: Any) -> Any:
        seen.append((payload, _VAR.get()))
        tasks.append(asyncio.current_task())
        _VAR.set(payload)
        if payload == 2:
            blocked.set()
            await asyncio.Event().wait()  # until cancelled below
        return payload

    async with Scheduler([pool("default", run, min=1, max=1)]) as s:
        handles = [await s.submit(i) for i in range(5)]  # all queued before the first starts
        await wait(blocked.wait())
        assert handles[2].cancel()
        assert [await wait(handles[i]) for i in (0, 1, 3, 4)] == [0, 1, 3, 4]
        with pytest.raises(TaskFailed):
            await wait(handles[2])
    assert seen == [(i, "from start()") for i in range(5)]
    assert None not in tasks and len({id(t) for t in tasks}) == 5
    assert tasks[2] is not None and tasks[2].cancelled()


async def test_a_high_submitted_as_a_low_ends_starts_before_the_next_low() -> None:
    """The next attempt of a slot is chosen in the turn after the one before it ended, so work
    submitted by whatever that ending woke is weighed: the High goes before the queued Lows."""
    order: list[str] = []
    ended = asyncio.Event()

    async def run(ctx: TaskContext, payload: str) -> None:
        order.append(payload)
        if payload == "L0":
            ended.set()

    async with Scheduler([pool("default", run, min=1, max=1)]) as s:
        lows = [await s.submit(f"L{i}", priority="low") for i in range(3)]
        await ended.wait()  # (directly: a wrapper would add turns; the test's timeout guards it)
        high = await s.submit("H", priority="high")
        for h in [high, *lows]:
            await wait(h)
    assert order == ["L0", "H", "L1", "L2"]


def test_attempts_use_a_loop_s_own_create_task() -> None:
    """On a loop whose create_task is not asyncio's own, every attempt's task (the slot's and a
    driver-made one) is still made by that method, in a fresh context each."""
    made: list[str] = []

    class Loop(asyncio.SelectorEventLoop):
        def create_task(self, coro: Any, *, name: Any = None, context: Any = None) -> Any:
            made.append(coro.__qualname__)
            return super().create_task(coro, name=name, context=context)

    seen: list[tuple[object, object]] = []

    async def run(ctx: TaskContext, payload: Any) -> Any:
        seen.append((payload, _VAR.get()))
        _VAR.set(payload)
        return payload

    async def main() -> list[Any]:
        _VAR.set("from start()")
        out = []
        for slots in (1, 2):
            async with Scheduler([pool("default", run, min=slots, max=slots)]) as s:
                handles = [await s.submit(i) for i in range(4)]
                out += [await wait(h) for h in handles]
        return out

    with asyncio.Runner(loop_factory=Loop) as runner:
        assert runner.run(main()) == [0, 1, 2, 3] * 2
    assert sorted(seen, key=repr) == sorted([(i, "from start()") for i in range(4)] * 2, key=repr)
    assert made.count("Started.attempt") >= 8  # (each attempt's task, and the slots')


async def test_queued_attempts_run_under_a_custom_task_factory() -> None:
    """With a task factory installed (it could be an eager one) the slot is refilled by the
    driver instead; queued attempts still run in order, each in a fresh context."""
    loop = asyncio.get_running_loop()
    made: list[object] = []

    def factory(loop: asyncio.AbstractEventLoop, coro: Any, **kw: Any) -> asyncio.Task[Any]:
        made.append(coro)
        return asyncio.Task(coro, loop=loop, **kw)

    _VAR.set("from start()")
    seen: list[tuple[object, object]] = []

    async def run(ctx: TaskContext, payload: Any) -> Any:
        seen.append((payload, _VAR.get()))
        _VAR.set(payload)
        return payload

    loop.set_task_factory(factory)
    try:
        async with Scheduler([pool("default", run, min=1, max=1)]) as s:
            handles = [await s.submit(i) for i in range(4)]
            assert [await wait(h) for h in handles] == [0, 1, 2, 3]
    finally:
        loop.set_task_factory(None)
    assert seen == [(i, "from start()") for i in range(4)]
    assert made  # (the factory was used)


# ----------------------------------------------------------------------------- kinds of executors


async def test_async_executor_runs_on_loop_thread():
    seen = {}

    async def run(ctx, payload):
        seen["thread"] = threading.get_ident()
        await asyncio.sleep(0.001)
        return payload * 2

    async with Scheduler([pool(executor=run)]) as s:
        assert await wait(await s.submit(21)) == 42
    assert seen["thread"] == threading.get_ident()


async def test_async_callable_object_executor():
    class Runner:
        async def __call__(self, ctx, payload):
            await asyncio.sleep(0)
            return ("obj", payload, threading.get_ident())

    async with Scheduler([pool(executor=Runner())]) as s:
        tag, p, tid = await wait(await s.submit(1))
    assert (tag, p, tid) == ("obj", 1, threading.get_ident())


async def test_plain_function_runs_in_thread_pool():
    seen = {}

    def run(ctx, payload):
        seen["thread"] = threading.get_ident()
        assert isinstance(ctx, TaskContext)
        time.sleep(0.01)  # blocking is fine: we are off the loop
        return payload + 1

    async with Scheduler([pool(executor=run)]) as s:
        assert await wait(await s.submit(1)) == 2
    assert seen["thread"] != threading.get_ident()


async def test_plain_function_does_not_block_the_loop():
    release = threading.Event()
    started = threading.Event()

    def run(ctx, payload):
        started.set()
        assert release.wait(10)
        return payload

    async with Scheduler([pool(executor=run)]) as s:
        h = await s.submit("x")
        # the loop stays responsive while the executor thread blocks
        await wait(asyncio.to_thread(started.wait, 10))
        assert await s.status(h.id) == "running"
        release.set()
        assert await wait(h) == "x"


async def test_plain_function_returning_awaitable_is_awaited():
    threads = {}

    async def later(v):
        threads["inner"] = threading.get_ident()
        await asyncio.sleep(0.001)
        return v * 10

    def run(ctx, payload):
        threads["outer"] = threading.get_ident()
        return later(payload)

    async with Scheduler([pool(executor=run)]) as s:
        assert await wait(await s.submit(4)) == 40
    assert threads["outer"] != threading.get_ident()
    assert threads["inner"] == threading.get_ident()


async def test_plain_function_returning_failing_awaitable():
    async def later():
        raise Permanent("inner says no")

    def run(ctx, payload):
        return later()

    async with Scheduler([pool(executor=run)]) as s:
        with pytest.raises(TaskFailed) as ei:
            await wait(await s.submit(1))
        assert (ei.value.status, ei.value.message) == ("failed", "inner says no")


@pytest.mark.parametrize(
    "value",
    [None, 0, "", [], object(), lambda: None, {1, 2}, b"\x00\xff", type("Odd", (), {})()],
)
async def test_returning_garbage_is_fine(value):
    async def run(ctx, payload):
        return value

    async with Scheduler([pool(executor=run)]) as s:
        h = await s.submit(None)
        assert await wait(h) is value
        assert await s.status(h.id) == "succeeded"


async def test_payload_passed_as_is():
    payload = object()
    got = []

    async def run(ctx, p):
        got.append(p)

    async with Scheduler([pool(executor=run)]) as s:
        assert await wait(await s.submit(payload)) is None
    assert got == [payload] and got[0] is payload


# ----------------------------------------------------------------------------- outcomes


async def test_permanent_fails_without_retry():
    attempts = []

    async def run(ctx, p):
        attempts.append(ctx.attempt)
        raise Permanent("bad input")

    async with Scheduler([pool(executor=run, retry=FAST_RETRY)]) as s:
        h = await s.submit(1)
        with pytest.raises(TaskFailed) as ei:
            await wait(h)
        assert (ei.value.status, ei.value.message, ei.value.task_id) == ("failed", "bad input", h.id)
        assert attempts == [1]
        assert await s.status(h.id) == "failed"
        snap = await s.snapshot()
        assert snap.totals["failed"] == 1 and snap.totals["retries"] == 0


async def test_permanent_from_thread():
    def run(ctx, p):
        raise Permanent("thread says no")

    async with Scheduler([pool(executor=run)]) as s:
        with pytest.raises(TaskFailed) as ei:
            await wait(await s.submit(1))
        assert (ei.value.status, ei.value.message) == ("failed", "thread says no")


async def test_retryable_then_success():
    attempts = []

    async def run(ctx, p):
        attempts.append(ctx.attempt)
        if ctx.attempt < 3:
            raise Retryable("try again")
        return "done"

    async with Scheduler([pool(executor=run, retry=FAST_RETRY)]) as s:
        assert await wait(await s.submit(1)) == "done"
    assert attempts == [1, 2, 3]


async def test_retry_after_replaces_policy_delay():
    # the pool's policy would wait 100 s: retry_after must be used instead
    attempts = []

    async def run(ctx, p):
        attempts.append(ctx.attempt)
        if ctx.attempt == 1:
            raise Retryable("later", retry_after=0.01)
        return "ok"

    slow = RetryPolicy(max_attempts=2, initial_backoff=100.0, max_backoff=100.0)
    async with Scheduler([pool(executor=run, retry=slow)]) as s:
        assert await wait(await s.submit(1), 5) == "ok"
    assert attempts == [1, 2]


@pytest.mark.parametrize("bad", [-1, math.nan, math.inf, "soon"])
async def test_a_bad_retry_after_falls_back_to_the_policy_backoff(bad):
    attempts = []

    async def run(ctx, p):
        attempts.append(ctx.attempt)
        if ctx.attempt == 1:
            raise Retryable("later", retry_after=bad)
        return "ok"

    quick = RetryPolicy(max_attempts=2, initial_backoff=0.01, max_backoff=0.01)
    async with Scheduler([pool(executor=run, retry=quick)], emit_transitions=True) as s:
        events = s.events()
        assert await wait(await s.submit(1), 5) == "ok"
        retrying = [e async for e in _take(events, "succeeded") if e.status == "retrying"]
    assert attempts == [1, 2]
    assert [e.message for e in retrying] == ["later"], "the executor's message, not a ValueError"


async def _take(events, last):
    async for e in events:
        yield e
        if e.status == last:
            return


async def test_retry_after_is_not_capped_by_max_backoff():
    stamps = []

    async def run(ctx, p):
        stamps.append(time.monotonic())
        if ctx.attempt == 1:
            raise Retryable("later", retry_after=0.3)
        return "ok"

    nodelay = RetryPolicy(max_attempts=2, initial_backoff=0.0, max_backoff=0.0)
    async with Scheduler([pool(executor=run, retry=nodelay)]) as s:
        assert await wait(await s.submit(1)) == "ok"
    assert stamps[1] - stamps[0] >= 0.28


async def test_retry_policy_backoff_is_applied():
    stamps = []

    async def run(ctx, p):
        stamps.append(time.monotonic())
        if ctx.attempt == 1:
            raise Retryable("x")
        return "ok"

    policy = RetryPolicy(max_attempts=2, initial_backoff=0.25, jitter=False)
    async with Scheduler([pool(executor=run, retry=policy)]) as s:
        assert await wait(await s.submit(1)) == "ok"
    assert stamps[1] - stamps[0] >= 0.23


async def test_task_retry_overrides_pool_retry():
    attempts = []

    async def run(ctx, p):
        attempts.append(ctx.attempt)
        raise Retryable("no")

    async with Scheduler([pool(executor=run, retry=FAST_RETRY)]) as s:
        with pytest.raises(TaskFailed) as ei:
            await wait(await s.submit(1, retry=RetryPolicy.none()))
        assert ei.value.status == "dead_lettered"
    assert attempts == [1]


class CustomError(Exception):
    pass


async def test_other_exception_message_and_dead_letter():
    attempts = []

    async def run(ctx, p):
        attempts.append(ctx.attempt)
        raise ValueError(f"boom {ctx.attempt}")

    async with Scheduler([pool(executor=run, retry=FAST_RETRY)]) as s:
        h = await s.submit(1)
        with pytest.raises(TaskFailed) as ei:
            await wait(h)
        # the message is the last attempt's
        assert (ei.value.status, ei.value.message) == ("dead_lettered", "ValueError: boom 3")
        assert str(ei.value) == f"task {h.id} ended as dead_lettered: ValueError: boom 3"
        assert attempts == [1, 2, 3]
        snap = await s.snapshot()
        assert snap.totals["dead_lettered"] == 1
        assert snap.totals["retries"] == 2
        assert snap.totals["failed"] == 0


async def test_custom_exception_type_in_message_from_thread():
    def run(ctx, p):
        raise CustomError("it broke")

    async with Scheduler([pool(executor=run, retry=RetryPolicy.none())]) as s:
        with pytest.raises(TaskFailed) as ei:
            await wait(await s.submit(1))
        assert (ei.value.status, ei.value.message) == ("dead_lettered", "CustomError: it broke")


class Stop(BaseException):
    """A user-defined BaseException (neither Exception nor one of Python's own)."""


def _exits(how: str) -> Any:
    if how == "SystemExit":
        sys.exit(3)
    if how == "Stop":
        raise Stop("halt")
    raise GeneratorExit("raised by the task")


_EXIT_MESSAGES = {
    "SystemExit": "SystemExit: 3",
    "Stop": "Stop: halt",
    "GeneratorExit": "GeneratorExit: raised by the task",
}


async def _exit_later(how: str) -> Any:
    await asyncio.sleep(0)
    return _exits(how)


@pytest.mark.parametrize("how", list(_EXIT_MESSAGES))
@pytest.mark.parametrize("where", ["async", "thread", "awaitable"])
async def test_a_base_exception_fails_the_attempt_and_the_scheduler_serves_on(where: str, how: str):
    """``sys.exit()`` (or another BaseException but KeyboardInterrupt) from a task is its
    attempt's failure, retryable like any exception: it neither stops the scheduler's loop nor
    leaves the attempt running (docs/reference/behaviour.md#reliability)."""
    attempts: list[int] = []

    async def run_async(ctx: TaskContext, p: Any) -> Any:
        attempts.append(ctx.attempt)
        await asyncio.sleep(0)
        return p if p != "exit" else _exits(how)

    def run_sync(ctx: TaskContext, p: Any) -> Any:
        attempts.append(ctx.attempt)
        return p if p != "exit" else _exits(how)

    def run_awaitable(ctx: TaskContext, p: Any) -> Any:
        attempts.append(ctx.attempt)
        return _exit_later(how) if p == "exit" else asyncio.sleep(0, p)

    run = {"async": run_async, "thread": run_sync, "awaitable": run_awaitable}[where]
    async with Scheduler([pool(executor=run, retry=FAST_RETRY)]) as s:
        with pytest.raises(TaskFailed) as ei:
            await wait(await s.submit("exit"))
        assert (ei.value.status, ei.value.message) == ("dead_lettered", _EXIT_MESSAGES[how])
        assert attempts == [1, 2, 3]
        assert await wait(await s.submit("next")) == "next"  # the same scheduler serves on


@pytest.mark.parametrize("where", ["async", "thread"])
def test_keyboard_interrupt_from_a_task_still_stops_the_loop(where: str) -> None:
    """KeyboardInterrupt is the operator's Ctrl-C, not a task's failure: it still propagates."""

    async def run_async(ctx: TaskContext, p: Any) -> None:
        raise KeyboardInterrupt

    def run_sync(ctx: TaskContext, p: Any) -> None:
        raise KeyboardInterrupt

    async def main() -> None:
        async with Scheduler([pool(executor=run_async if where == "async" else run_sync)]) as s:
            await wait(await s.submit(1))

    with pytest.raises(KeyboardInterrupt):
        asyncio.run(main())


async def test_retryable_message_used_as_is_when_dead_lettered():
    async def run(ctx, p):
        raise Retryable("service unavailable")

    async with Scheduler([pool(executor=run, retry=RetryPolicy(max_attempts=2, initial_backoff=0))]) as s:
        with pytest.raises(TaskFailed) as ei:
            await wait(await s.submit(1))
        assert (ei.value.status, ei.value.message) == ("dead_lettered", "service unavailable")


async def test_default_retry_policy_has_three_attempts():
    attempts = []

    async def run(ctx, p):
        attempts.append(ctx.attempt)
        # retry_after keeps the test fast while using the default max_attempts
        raise Retryable("x", retry_after=0)

    async with Scheduler([pool(executor=run)]) as s:
        with pytest.raises(TaskFailed) as ei:
            await wait(await s.submit(1))
        assert ei.value.status == "dead_lettered"
    assert attempts == [1, 2, 3]


async def test_executor_cancelling_itself_is_retryable():
    attempts = []

    async def run(ctx, p):
        attempts.append(ctx.attempt)
        if ctx.attempt == 1:
            raise asyncio.CancelledError()
        return "second time"

    async with Scheduler([pool(executor=run, retry=FAST_RETRY)]) as s:
        h = await s.submit(1)
        assert await wait(h) == "second time"
        assert await s.status(h.id) == "succeeded"
        assert (await s.snapshot()).totals["retries"] == 1
    assert attempts == [1, 2]


async def test_executor_cancelling_itself_dead_letters_when_out_of_attempts():
    async def run(ctx, p):
        asyncio.current_task().cancel()
        await asyncio.sleep(1)

    async with Scheduler([pool(executor=run, retry=RetryPolicy.none())]) as s:
        with pytest.raises(TaskFailed) as ei:
            await wait(await s.submit(1))
        assert ei.value.status == "dead_lettered"


async def test_executor_that_cannot_start_fails_the_attempt():
    # an async executor with the wrong signature raises when called
    async def run(ctx):
        return "never"

    async with Scheduler([pool(executor=run, retry=RetryPolicy.none())]) as s:
        with pytest.raises(TaskFailed) as ei:
            await wait(await s.submit(1))
        assert ei.value.status == "dead_lettered"
        assert ei.value.message.startswith("TypeError: ")
        # the scheduler keeps working
        assert (await s.snapshot()).running == 0


# ----------------------------------------------------------------------------- timeouts


async def test_timeout_aborts_hanging_attempt():
    seen: dict[str, object] = {}

    async def run(ctx, p):
        seen["ctx"] = ctx
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            seen["cancelled"] = True
            raise

    async with Scheduler([pool(executor=run, retry=RetryPolicy.none())]) as s:
        h = await s.submit(1, timeout=0.05)
        with pytest.raises(TaskFailed) as ei:
            await wait(h)
        assert (ei.value.status, ei.value.message) == ("dead_lettered", "attempt timed out")
        assert seen["ctx"].is_cancelled()
        await asyncio.sleep(0)
        assert seen.get("cancelled") is True
        snap = await s.snapshot()
        assert snap.totals["timeouts"] == 1
        assert snap.running == 0


async def test_timeout_is_retryable():
    attempts = []

    async def run(ctx, p):
        attempts.append(ctx.attempt)
        if ctx.attempt == 1:
            await asyncio.sleep(30)
        return "fast enough"

    async with Scheduler([pool(executor=run, retry=FAST_RETRY)]) as s:
        assert await wait(await s.submit(1, timeout=0.05)) == "fast enough"
        assert (await s.snapshot()).totals["timeouts"] == 1
    assert attempts == [1, 2]


async def test_timeout_of_sync_executor_marks_cancelled():
    observed = threading.Event()

    def run(ctx, p):
        deadline = time.monotonic() + 5
        while not ctx.is_cancelled() and time.monotonic() < deadline:
            time.sleep(0.005)
        if ctx.is_cancelled():
            observed.set()
        return "too late"

    async with Scheduler([pool(executor=run, retry=RetryPolicy.none())]) as s:
        h = await s.submit(1, timeout=0.05)
        with pytest.raises(TaskFailed) as ei:
            await wait(h)
        assert (ei.value.status, ei.value.message) == ("dead_lettered", "attempt timed out")
        assert await wait(asyncio.to_thread(observed.wait, 5))
        # the late return does not overwrite the outcome
        assert await s.status(h.id) == "dead_lettered"


async def test_fast_attempt_within_timeout_succeeds():
    async def run(ctx, p):
        await asyncio.sleep(0.01)
        return "ok"

    async with Scheduler([pool(executor=run)]) as s:
        assert await wait(await s.submit(1, timeout=5)) == "ok"
        assert (await s.snapshot()).totals["timeouts"] == 0


# ----------------------------------------------------------------------------- TaskContext


async def test_task_context_fields():
    seen = {}

    async def run(ctx, p):
        seen.update(
            id=ctx.id,
            attempt=ctx.attempt,
            kind=ctx.kind,
            key=ctx.key,
            pool=ctx.pool,
            tags=ctx.tags,
            group=ctx.group,
            timeout=ctx.timeout,
            deadline=ctx.deadline,
            cancelled=ctx.is_cancelled(),
        )
        return p

    async with Scheduler([pool("other"), pool("work", executor=run)]) as s:
        before = time.time()
        h = await s.submit(
            "p",
            pool="work",
            kind="resize",
            key="img-1",
            tags={"traceparent": "00-abc", "n": 1, "f": 2.5, "none": None},
            timeout=2.5,
            deadline_in=30,
        )
        after = time.time()
        await wait(h)
    assert seen["id"] == h.id
    assert seen["attempt"] == 1
    assert seen["kind"] == "resize"
    assert seen["key"] == "img-1"
    assert seen["pool"] == "work"
    assert seen["tags"] == {"traceparent": "00-abc", "n": "1", "f": "2.5", "none": "None"}
    assert all(type(k) is str and type(v) is str for k, v in seen["tags"].items())
    assert seen["group"] == {}
    assert seen["timeout"] == 2.5
    assert before + 30 - 0.5 <= seen["deadline"] <= after + 30 + 0.5
    assert seen["cancelled"] is False


async def test_task_context_defaults():
    seen = {}

    def run(ctx, p):  # also from a sync executor
        seen.update(
            kind=ctx.kind,
            key=ctx.key,
            pool=ctx.pool,
            tags=ctx.tags,
            timeout=ctx.timeout,
            deadline=ctx.deadline,
            group=ctx.group,
        )

    async with Scheduler([pool("main", executor=run)]) as s:
        await wait(await s.submit("p"))
    assert seen == {
        "kind": "default",
        "key": None,
        "pool": "main",
        "tags": {},
        "timeout": None,
        "deadline": None,
        "group": {},
    }
    assert type(seen["tags"]) is dict


async def test_task_context_deadline_at_unix_and_datetime():
    seen = []

    async def run(ctx, p):
        seen.append(ctx.deadline)

    target = time.time() + 120.25
    when = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=60)
    async with Scheduler([pool(executor=run)]) as s:
        await wait(await s.submit(1, deadline_at=target))
        await wait(await s.submit(2, deadline_at=when))
    assert seen[0] == pytest.approx(target, abs=1e-3)
    assert seen[1] == pytest.approx(when.timestamp(), abs=1e-3)


async def test_task_context_attempt_increments():
    seen = []

    async def run(ctx, p):
        seen.append((ctx.id, ctx.attempt))
        if ctx.attempt < 2:
            raise Retryable("again")

    async with Scheduler([pool(executor=run, retry=FAST_RETRY)]) as s:
        h = await s.submit(1)
        await wait(h)
    assert seen == [(h.id, 1), (h.id, 2)]


async def test_heartbeat_is_noop_without_lease_ttl():
    async def run(ctx, p):
        ctx.heartbeat()
        await asyncio.sleep(0)
        ctx.heartbeat()
        return "ok"

    async with Scheduler([pool(executor=run)]) as s:
        assert await wait(await s.submit(1)) == "ok"


async def test_heartbeat_after_attempt_ended_is_noop():
    saved = []

    async def run(ctx, p):
        saved.append(ctx)
        return "ok"

    async with Scheduler([pool(executor=run, lease_ttl=0.5)]) as s:
        assert await wait(await s.submit(1)) == "ok"
        saved[0].heartbeat()  # must not raise or disturb anything
        assert await wait(await s.submit(2)) == "ok"
        assert (await s.snapshot()).totals["stale_completions"] == 0


# ----------------------------------------------------------------------------- leases


# The heartbeat tests run an attempt for 1.25 s, longer than its lease ttl (1 s), heartbeating
# every 20 ms: a lease that was not renewed expires before the attempt ends, and a renewed one
# survives any stall of the loop (or the executor thread) shorter than 0.98 s. (With a 0.15 s
# ttl a 130 ms stall, e.g. a GC pause on a loaded machine, would expire it and fail them.)
HEARTBEAT_TTL = 1.0
HEARTBEAT_RUN = 1.25


async def test_heartbeat_keeps_lease_alive():
    async def run(ctx, p):
        end = time.monotonic() + HEARTBEAT_RUN
        while time.monotonic() < end:
            ctx.heartbeat()
            await asyncio.sleep(0.02)
        return "kept"

    async with Scheduler([pool(executor=run, lease_ttl=HEARTBEAT_TTL, retry=RetryPolicy.none())]) as s:
        assert await wait(await s.submit(1)) == "kept"
        assert (await s.snapshot()).totals["lease_expiries"] == 0


async def test_missing_heartbeat_loses_lease():
    seen = {}

    async def run(ctx, p):
        seen["ctx"] = ctx
        await asyncio.sleep(30)

    async with Scheduler([pool(executor=run, lease_ttl=0.05, retry=RetryPolicy.none())]) as s:
        h = await s.submit(1)
        with pytest.raises(TaskFailed) as ei:
            await wait(h)
        assert ei.value.status == "dead_lettered"
        assert seen["ctx"].is_cancelled()
        snap = await s.snapshot()
        assert snap.totals["lease_expiries"] == 1
        assert snap.running == 0


async def test_lost_lease_is_retried():
    attempts = []

    async def run(ctx, p):
        attempts.append(ctx.attempt)
        if ctx.attempt == 1:
            await asyncio.sleep(30)
        return "second"

    async with Scheduler([pool(executor=run, lease_ttl=0.05, retry=FAST_RETRY)]) as s:
        assert await wait(await s.submit(1)) == "second"
        assert (await s.snapshot()).totals["lease_expiries"] == 1
    assert attempts == [1, 2]


async def test_heartbeat_from_sync_executor_thread():
    def run(ctx, p):
        end = time.monotonic() + HEARTBEAT_RUN
        while time.monotonic() < end:
            ctx.heartbeat()
            time.sleep(0.02)
        return "kept"

    async with Scheduler([pool(executor=run, lease_ttl=HEARTBEAT_TTL, retry=RetryPolicy.none())]) as s:
        assert await wait(await s.submit(1)) == "kept"
        assert (await s.snapshot()).totals["lease_expiries"] == 0


async def test_sync_executor_without_heartbeat_loses_lease():
    observed = threading.Event()

    def run(ctx, p):
        end = time.monotonic() + 5
        while not ctx.is_cancelled() and time.monotonic() < end:
            time.sleep(0.005)
        if ctx.is_cancelled():
            observed.set()
        return "late"

    async with Scheduler([pool(executor=run, lease_ttl=0.05, retry=RetryPolicy.none())]) as s:
        h = await s.submit(1)
        with pytest.raises(TaskFailed) as ei:
            await wait(h)
        assert ei.value.status == "dead_lettered"
        assert await wait(asyncio.to_thread(observed.wait, 5))
        snap = await s.snapshot()
        assert snap.totals["lease_expiries"] == 1
        assert await s.status(h.id) == "dead_lettered"


# ----------------------------------------------------------------------------- starting executors


class Starter:
    """A *starting* executor (``start_attempt``, as the server's remote one): each attempt is a
    future the test resolves, with no task of its own."""

    def __init__(self) -> None:
        self.futures: list[asyncio.Future[object]] = []
        self.started = asyncio.Event()
        self.tasks_seen: list[int] = []

    async def __call__(self, ctx: TaskContext, payload: object) -> object:  # (a tracing span's path)
        return await self.start_attempt(ctx, payload)

    def start_attempt(self, ctx: TaskContext, payload: object) -> asyncio.Future[object]:
        self.tasks_seen.append(len(asyncio.all_tasks()))
        fut: asyncio.Future[object] = asyncio.get_running_loop().create_future()
        self.futures.append(fut)
        self.started.set()
        return fut

    async def next(self) -> asyncio.Future[object]:
        await wait(self.started.wait())
        self.started.clear()
        return self.futures[-1]


async def test_a_starting_executor_s_future_is_the_attempt():
    ex = Starter()
    async with Scheduler([pool(executor=ex, retry=FAST_RETRY)]) as s:
        h = await s.submit("p")
        (await ex.next()).set_result("out")
        assert await wait(h) == "out"
        # a retryable error retries; a permanent one fails at once
        h = await s.submit("q")
        (await ex.next()).set_exception(Retryable("busy"))
        (await ex.next()).set_exception(Permanent("bad input"))
        with pytest.raises(TaskFailed) as ei:
            await wait(h)
        assert (ei.value.status, ei.value.message, len(ex.futures)) == ("failed", "bad input", 3)
        assert (await s.snapshot()).running == 0
    assert len(set(ex.tasks_seen)) == 1  # no task per attempt: the loop's task count never grew


async def _timed_out(s: Scheduler, ex: Any) -> Any:
    """Submit a task whose only attempt on ``ex`` times out; what ``ex.next()`` gave for it."""
    h = await s.submit(1, timeout=0.05)
    started = await ex.next()
    with pytest.raises(TaskFailed) as ei:
        await wait(h)
    assert (ei.value.status, ei.value.message) == ("dead_lettered", "attempt timed out")
    return started


async def test_an_abort_cancels_a_starting_executor_s_future():
    ex = Starter()
    async with Scheduler([pool(executor=ex, retry=RetryPolicy.none())]) as s:
        fut = await _timed_out(s, ex)
        assert fut.cancelled()
        h = await s.submit(2)
        fut = await ex.next()
        assert await s.cancel(h.id)
        assert fut.cancelled()
        fut.cancel()  # (a late outcome of an aborted attempt changes nothing)
        assert (await s.snapshot()).totals["stale_completions"] == 0


async def test_a_starting_executor_that_raises_fails_the_attempt():
    calls = []

    class Broken(Starter):
        def start_attempt(self, ctx: TaskContext, payload: object) -> asyncio.Future[object]:
            calls.append(ctx.attempt)
            raise Retryable("cannot start")

    async with Scheduler(
        [pool(executor=Broken(), retry=RetryPolicy(max_attempts=2, initial_backoff=0))]
    ) as s:
        with pytest.raises(TaskFailed) as ei:
            await wait(await s.submit(1))
        assert (ei.value.status, ei.value.message, calls) == ("dead_lettered", "cannot start", [1, 2])
        assert (await s.snapshot()).running == 0


# ----------------------------------------------------------------------------- executor kinds


def _plain(ctx: TaskContext, payload: object) -> object:
    return payload


async def _coro(ctx: TaskContext, payload: object) -> object:
    return payload


class Reporter:
    """An executor of kind REMOTE (as the server's): ``begin`` hands the attempt on, and the test
    reports its outcome as values on the context (``ctx.complete`` / ``fail`` / ``abort``)."""

    executor_kind = ExecutorKind.REMOTE

    def __init__(self) -> None:
        self.ctxs: list[TaskContext] = []
        self.aborted: list[int] = []
        self.started = asyncio.Event()

    async def __call__(self, ctx: TaskContext, payload: object) -> object:  # (in a tracing span)
        raise Permanent("not awaited in these tests")

    def begin(self, ctx: TaskContext, payload: object) -> None:
        ctx.on_abort = lambda: self.aborted.append(ctx.lease)
        self.ctxs.append(ctx)
        self.started.set()

    async def next(self) -> TaskContext:
        await wait(self.started.wait())
        self.started.clear()
        return self.ctxs[-1]


def test_each_executor_has_one_kind_declared_or_classified():
    from cronoq.runtime.processes.runin import ProcessExecutor
    from cronoq.server.workers import RemoteExecutor

    assert kind_of(_coro) is ExecutorKind.LOOP
    assert kind_of(_plain) is ExecutorKind.THREAD
    assert kind_of(Starter()) is ExecutorKind.STARTING  # the documented protocol, undeclared
    assert kind_of(ProcessExecutor(_plain)) is ExecutorKind.PROCESS  # declared by its class
    assert RemoteExecutor.executor_kind is ExecutorKind.REMOTE
    assert kind_of(Reporter()) is ExecutorKind.REMOTE
    assert [pool(executor=e).kind for e in (_coro, _plain, Starter())] == [
        ExecutorKind.LOOP,
        ExecutorKind.THREAD,
        ExecutorKind.STARTING,
    ]


async def test_a_remote_attempt_s_outcome_is_reported_as_values_on_its_context():
    ex = Reporter()
    async with Scheduler([pool(executor=ex, retry=FAST_RETRY)]) as s:
        h = await s.submit("p")
        ctx = await ex.next()
        assert ctx.complete("out") is True
        assert ctx.complete("again") is False  # (already ended: the report is stale)
        assert await wait(h) == "out"
        h = await s.submit("q")
        assert (await ex.next()).fail("busy", retry_after=0.0)
        assert (await ex.next()).abort()  # given up: retryable, as an executor's own cancel
        assert (await ex.next()).fail("bad input", permanent=True)
        with pytest.raises(TaskFailed) as ei:
            await wait(h)
        assert (ei.value.status, ei.value.message) == ("failed", "bad input")
        attempts = [a.message for a in await s.attempts(h.id)]
        assert attempts == ["busy", "CancelledError: ", "bad input"]
        assert (await s.snapshot()).running == 0


async def test_an_abort_reaches_a_remote_attempt_as_a_call():
    ex = Reporter()
    async with Scheduler([pool(executor=ex, retry=RetryPolicy.none())]) as s:
        ctx = await _timed_out(s, ex)
        assert (ex.aborted, ctx.abort_reason) == ([ctx.lease], "attempt timed out")
        assert ctx.complete("late") is False  # after the abort: nothing changes
        assert await s.status(ctx.id) == "dead_lettered"


async def test_shutdown_waits_for_a_remote_attempt_then_aborts_it():
    ex = Reporter()
    s = Scheduler([pool(executor=ex, min=2, max=2)])
    await s.start()
    h1 = await s.submit(1)
    first = await ex.next()
    h2 = await s.submit(2)
    second = await ex.next()
    stopping = asyncio.create_task(s.shutdown(0.2))
    await asyncio.sleep(0)
    assert first.complete("done")  # reported within the grace: it counts
    await wait(stopping)
    assert await wait(h1) == "done"
    assert ex.aborted == [second.lease]  # the other one was aborted at the end of the grace
    with pytest.raises(TaskFailed):
        await wait(h2)


async def test_only_a_remote_attempt_reports_on_its_context():
    seen: list[str] = []

    async def run(ctx: TaskContext, payload: object) -> object:
        try:
            ctx.complete("x")
        except SchedulerError as e:
            seen.append(str(e))
        return "returned"

    async with Scheduler([pool(executor=run)]) as s:
        assert await wait(await s.submit(1)) == "returned"
    assert seen == ["ctx.complete/fail/abort report a remote executor's attempt only"]
