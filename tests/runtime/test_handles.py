"""TaskHandle semantics and shutdown (shutdown: docs/reference/behaviour.md#scheduler-api; TaskHandle:
docs/reference/behaviour.md#types)."""

from __future__ import annotations

import asyncio
import time

import pytest

from cronoq import Permanent, Scheduler, SchedulerError, TaskFailed, TaskHandle

from .conftest import Gate, pool, settle, wait


async def test_await_repeated_by_many_awaiters(gate: Gate):
    async with Scheduler([pool(executor=gate)]) as s:
        h = await s.submit("v")
        waiters = [asyncio.create_task(_await(h)) for _ in range(10)]
        await settle()
        assert not any(w.done() for w in waiters)
        gate.release("v")
        assert await wait(asyncio.gather(*waiters)) == ["v"] * 10
        # and again, any number of times, after completion
        assert await h == "v"
        assert await h == "v"
        assert await h.result() == "v"


async def _await(h: TaskHandle):
    return await h


async def test_failure_raised_to_every_awaiter():
    async def run(ctx, p):
        raise Permanent("no way")

    async with Scheduler([pool(executor=run)]) as s:
        h = await s.submit(1)
        results = await wait(asyncio.gather(*(_await(h) for _ in range(5)), return_exceptions=True))
        assert all(isinstance(r, TaskFailed) for r in results)
        assert {(r.status, r.message, r.task_id) for r in results} == {("failed", "no way", h.id)}
        with pytest.raises(TaskFailed):
            await h
        with pytest.raises(TaskFailed):
            await h.result()


async def test_result_and_done(gate: Gate):
    async with Scheduler([pool(executor=gate)]) as s:
        h = await s.submit("r")
        assert h.done() is False
        fut = h.result()
        await wait(gate.started("r").wait())
        assert h.done() is False
        gate.release("r")
        assert await wait(fut) == "r"
        assert h.done() is True
        assert await wait(h.result()) == "r"


async def test_handle_attributes():
    async with Scheduler([pool()]) as s:
        h = await s.submit(1, key="k")
        assert isinstance(h.id, int) and h.id == 1
        assert h.duplicate is False
        await wait(h)


async def test_handle_cancel_before_dispatch(gate: Gate):
    gate.release_all()
    async with Scheduler([pool(executor=gate)]) as s:
        h = await s.submit("never")
        # plain method, no await; takes effect before the next dispatch decision
        assert h.cancel() is True
        with pytest.raises(TaskFailed) as ei:
            await wait(h)
        assert (ei.value.status, ei.value.message, ei.value.task_id) == ("cancelled", "cancelled", h.id)
        after = await s.submit("after")
        assert await wait(after) == "after"
        assert gate.order == ["after"]
        assert await s.status(h.id) == "cancelled"


async def test_handle_cancel_queued_task_before_slot_frees(gate: Gate):
    async with Scheduler([pool(executor=gate)]) as s:
        a = await s.submit("a")
        await wait(gate.started("a").wait())
        b = await s.submit("b")
        gate.release("a")
        # the slot frees on the next loop turns; the cancel is already in effect
        assert b.cancel() is True
        assert await wait(a) == "a"
        with pytest.raises(TaskFailed, match="cancelled"):
            await wait(b)
        assert gate.order == ["a"]


async def test_handle_cancel_running_task(gate: Gate):
    async with Scheduler([pool(executor=gate)]) as s:
        h = await s.submit("a")
        await wait(gate.started("a").wait())
        assert h.cancel() is True
        assert gate.contexts["a"].is_cancelled()
        with pytest.raises(TaskFailed) as ei:
            await wait(h)
        assert ei.value.status == "cancelled"
        assert h.cancel() is False  # already terminal


async def test_handle_cancel_after_success_is_false():
    async with Scheduler([pool()]) as s:
        h = await s.submit(1)
        await wait(h)
        assert h.cancel() is False
        assert await h == 1


async def test_cancelling_an_awaiter_does_not_cancel_the_handle(gate: Gate):
    async with Scheduler([pool(executor=gate)]) as s:
        h = await s.submit("x")
        await wait(gate.started("x").wait())
        w1 = asyncio.create_task(_await(h))
        w2 = asyncio.create_task(_await(h))
        await settle()
        w1.cancel()
        with pytest.raises(asyncio.CancelledError):
            await w1
        assert not h.done()
        assert await s.status(h.id) == "running"
        assert not gate.contexts["x"].is_cancelled()
        gate.release("x")
        assert await wait(w2) == "x"
        assert await h == "x"


async def test_cancelling_a_result_awaitable_does_not_cancel_the_handle(gate: Gate):
    async with Scheduler([pool(executor=gate)]) as s:
        h = await s.submit("x")
        r = h.result()
        r.cancel()
        await settle()
        assert not h.done()
        gate.release_all()
        assert await wait(h) == "x"


async def test_wait_for_timeout_on_handle_does_not_cancel_task(gate: Gate):
    async with Scheduler([pool(executor=gate)]) as s:
        h = await s.submit("x")
        await wait(gate.started("x").wait())
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(_await(h), 0.01)
        assert await s.status(h.id) == "running"
        gate.release("x")
        assert await wait(h) == "x"


async def test_awaiters_given_up_on_are_let_go_and_the_rest_still_resolve(gate: Gate):
    """Each ``await handle`` of a running task waits on a future of its own; those of awaiters
    that gave up (a wait_for timeout in a loop) do not pile up, and the others still resolve."""
    async with Scheduler([pool(executor=gate)]) as s:
        h = await s.submit("x")
        await wait(gate.started("x").wait())
        keeper = asyncio.create_task(_await(h))
        for _ in range(50):
            with pytest.raises(TimeoutError):
                await asyncio.wait_for(_await(h), 0.001)
        assert len(s._run.awaiting[h.id]) <= 9  # type: ignore[union-attr]
        gate.release("x")
        assert await wait(keeper) == "x"
        assert await h == "x"
        assert h.id not in s._run.awaiting  # type: ignore[union-attr]


async def test_an_await_pending_at_shutdown_fails_as_shutdown(gate: Gate):
    s = Scheduler([pool(executor=gate)])
    await s.start()
    h = await s.submit("slow")
    await wait(gate.started("slow").wait())
    waiting = asyncio.create_task(_await(h))
    await settle()
    await s.shutdown(0)
    with pytest.raises(TaskFailed) as ei:
        await wait(waiting)
    assert (ei.value.status, ei.value.task_id) == ("shutdown", h.id)


# ----------------------------------------------------------------------------- shutdown


async def test_shutdown_waits_for_running_attempts_within_grace():
    started = asyncio.Event()

    async def run(ctx, p):
        started.set()
        await asyncio.sleep(0.05)
        return "finished"

    s = Scheduler([pool(executor=run)])
    await s.start()
    h = await s.submit(1)
    await wait(started.wait())
    t0 = time.monotonic()
    await s.shutdown(5.0)
    assert time.monotonic() - t0 < 4.0  # does not wait the whole grace
    assert h.done()
    assert await h == "finished"


async def test_shutdown_cancels_attempts_after_grace_and_fails_handles(gate: Gate):
    s = Scheduler([pool(executor=gate)])
    await s.start()
    running = await s.submit("slow")
    queued = await s.submit("queued")
    await wait(gate.started("slow").wait())
    t0 = time.monotonic()
    await s.shutdown(0.05)
    assert time.monotonic() - t0 < 3.0
    assert not s.started
    for h in (running, queued):
        assert h.done()
        with pytest.raises(TaskFailed) as ei:
            await h
        assert (ei.value.status, ei.value.message, ei.value.task_id) == (
            "shutdown",
            "scheduler shut down",
            h.id,
        )
        assert str(ei.value) == f"task {h.id} ended as shutdown: scheduler shut down"
    ctx = gate.contexts["slow"]
    assert ctx.is_cancelled()
    await settle()
    assert gate.cancelled == ["slow"]
    assert gate.order == ["slow"]  # nothing new is dispatched during shutdown


async def test_shutdown_fails_awaiting_handles(gate: Gate):
    s = Scheduler([pool(executor=gate)])
    await s.start()
    h = await s.submit("x")
    waiter = asyncio.create_task(_await(h))
    await wait(gate.started("x").wait())
    await s.shutdown(0)
    with pytest.raises(TaskFailed) as ei:
        await wait(waiter)
    assert ei.value.status == "shutdown"


async def test_shutdown_is_idempotent(gate: Gate):
    s = Scheduler([pool(executor=gate)])
    await s.shutdown()  # never started: harmless
    await s.start()
    h = await s.submit("x")
    await s.shutdown(0)
    await s.shutdown(0)
    await s.shutdown()
    assert not s.started
    with pytest.raises(TaskFailed, match="scheduler shut down"):
        await h


async def test_shutdown_keeps_outcomes_of_finished_tasks():
    s = Scheduler([pool()])
    await s.start()
    h = await s.submit("done")
    assert await wait(h) == "done"
    await s.shutdown(0)
    assert await h == "done"


async def test_async_with_uses_shutdown_grace(gate: Gate):
    t0 = time.monotonic()
    async with Scheduler([pool(executor=gate)], shutdown_grace=0.05) as s:
        h = await s.submit("x")
        await wait(gate.started("x").wait())
    assert time.monotonic() - t0 < 3.0
    with pytest.raises(TaskFailed) as ei:
        await h
    assert ei.value.status == "shutdown"


async def test_shutdown_default_grace_is_five_seconds_not_shutdown_grace(gate: Gate):
    """docs/reference/behaviour.md#scheduler-api ``shutdown(grace=5.0)``: only ``async with`` uses the
    scheduler's shutdown_grace."""
    s = Scheduler([pool(executor=gate)], shutdown_grace=0.0)
    await s.start()
    h = await s.submit("x")
    await wait(gate.started("x").wait())
    stopping = asyncio.create_task(s.shutdown())
    # until shutdown has stopped accepting and waits for the attempt
    while s._run is not None and s._run.accepting:
        await asyncio.sleep(0)
    gate.release("x")  # with a grace of 0 the attempt would already be cancelled
    await wait(stopping)
    assert await h == "x"


async def test_shutdown_sync_executor_marks_context_cancelled():
    import threading

    started = threading.Event()
    release = threading.Event()
    seen = {}

    def run(ctx, p):
        seen["ctx"] = ctx
        started.set()
        release.wait(5)
        return "late"

    s = Scheduler([pool(executor=run)])
    await s.start()
    h = await s.submit(1)
    await wait(asyncio.to_thread(started.wait, 5))
    await s.shutdown(0.02)
    assert seen["ctx"].is_cancelled()
    release.set()
    with pytest.raises(TaskFailed) as ei:
        await h
    assert ei.value.status == "shutdown"


async def test_submit_blocked_on_full_pool_is_released_by_shutdown(gate: Gate):
    s = Scheduler([pool(executor=gate, max_pending=1)])
    await s.start()
    await s.set_capacity("default", 0)
    await s.enqueue("a")
    blocked = asyncio.create_task(s.submit("b"))
    await settle()
    assert not blocked.done()
    await s.shutdown(0)
    with pytest.raises(SchedulerError):
        await wait(blocked)


async def test_shutdown_grace_covers_awaitable_returned_by_plain_function():
    import threading

    started = threading.Event()
    proceed = threading.Event()

    async def inner():
        await asyncio.sleep(0.1)
        return "inner done"

    def run(ctx, p):
        started.set()
        assert proceed.wait(5)  # still in the thread when shutdown begins (not a fixed sleep)
        return inner()

    s = Scheduler([pool(executor=run)])
    await s.start()
    h = await s.submit(1)
    await wait(asyncio.to_thread(started.wait, 5))
    stopping = asyncio.create_task(s.shutdown(5.0))
    await settle()  # the shutdown has begun: it waits for the running attempt
    assert not stopping.done()
    proceed.set()
    await wait(stopping)
    assert await h == "inner done"


@pytest.mark.parametrize(
    "other",
    [
        {"pool": "nope"},
        {"resources": {"zz": 1}},
        {"resources": {"gpu": 9}},
        {"after": "missing"},
        {"after": "k"},
        {"start_in": 5},
    ],
)
async def test_a_live_key_is_a_duplicate_whatever_its_other_fields(other):
    """docs/reference/behaviour.md#ids-keys-retention: a key that is live returns the existing task; the
    resubmission's other fields (pool, resources, edges, times) are not looked at - an idempotent retry of a
    submission never fails for them (as in the published implementation)."""
    from cronoq import Resource, Task

    gate = Gate()
    async with Scheduler([pool(executor=gate)], resources=[Resource.semaphore("gpu", 2)]) as s:
        first = await s.submit("a", key="k")
        await wait(gate.started("a").wait())
        again = await s.submit("b", key="k", **other)
        assert again.duplicate and again.id == first.id
        assert await s.enqueue("c", key="k", **other) == first.id
        (member, fresh) = await s.submit_batch([Task("d", key="k", **other), Task("e", key="new")])
        assert member.duplicate and member.id == first.id and not fresh.duplicate
        gate.release_all()
        assert await wait(first) == "a"
