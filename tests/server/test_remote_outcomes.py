"""A remote attempt's outcome travels as values (cronoq.server.workers, issue 27): the worker's
``Complete`` / ``Fail`` / ``Cancelled`` reach the engine as calls on the attempt's context, and
the engine's abort reaches the worker as ``Abort``; the awaited form (inside a tracing span)
gives the same outcomes.  In process: a real ``Scheduler`` whose pool runs a
``RemoteExecutor``, one registered session, no transport."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import weakref
from collections.abc import AsyncIterator

import pytest

from cronoq import Pool, RetryPolicy, Scheduler, TaskFailed
from cronoq.runtime.executors import ExecutorKind
from cronoq.runtime.gcpause import gc_paused
from cronoq.server.worker_durable import WorkerDurable
from cronoq.server.workers import (
    AbortMsg,
    Blob,
    DurableCallMsg,
    LeaseMsg,
    RemoteExecutor,
    WorkerRegistry,
    WorkerSession,
)

NO_RETRY = RetryPolicy.none()


class _Env:
    def __init__(self, sched: Scheduler, registry: WorkerRegistry, session: WorkerSession) -> None:
        self.sched, self.registry, self.session = sched, registry, session
        self.outputs: list[tuple[int, Blob]] = []

    async def lease(self) -> LeaseMsg:
        while True:
            msg = await self.session.outbox.get()
            if isinstance(msg, LeaseMsg):
                return msg

    async def abort(self) -> AbortMsg:
        while True:
            msg = await self.session.outbox.get()
            if isinstance(msg, AbortMsg):
                return msg


@pytest.fixture(params=[False, True], ids=["calls", "traced"])
async def env(request: pytest.FixtureRequest) -> AsyncIterator[_Env]:
    registry = WorkerRegistry(None)  # type: ignore[arg-type]
    outputs: list[tuple[int, Blob]] = []
    ex = RemoteExecutor(registry, "p", lambda tid, blob: outputs.append((tid, blob)))
    sched = Scheduler([Pool("p", ex, min=0, max=4, autoscale=False, retry=NO_RETRY)])
    registry.sched = sched
    if request.param:  # every attempt in a span: the executor is awaited
        pytest.importorskip("opentelemetry")
        sched.seam.trace_all = True
    async with sched:
        session = registry.register("p", "w", {}, 2)
        e = _Env(sched, registry, session)
        e.outputs = outputs
        yield e


def test_the_remote_executor_declares_its_kind() -> None:
    ex = RemoteExecutor(WorkerRegistry(None), "p")  # type: ignore[arg-type]
    assert Pool("p", ex).kind is ExecutorKind.REMOTE


async def test_a_complete_report_is_the_output(env: _Env) -> None:
    h = await env.sched.submit(Blob(b"in", "text/plain"))
    lease = await env.lease()
    env.session.complete(lease.lease, b"out", "text/plain")
    assert await h == Blob(b"out", "text/plain")
    assert env.outputs == [(h.id, Blob(b"out", "text/plain"))]
    env.session.complete(lease.lease, b"again", "text/plain")  # (no longer held: stale)
    assert (await env.sched.snapshot()).totals["stale_completions"] == 1


@pytest.mark.parametrize(("permanent", "status"), [(True, "failed"), (False, "dead_lettered")])
async def test_a_fail_report_fails_the_attempt(env: _Env, permanent: bool, status: str) -> None:
    h = await env.sched.submit(Blob(b"in", "text/plain"))
    lease = await env.lease()
    env.session.fail(lease.lease, "no good", permanent, None)
    with pytest.raises(TaskFailed) as ei:
        await h
    assert (ei.value.status, ei.value.message) == (status, "no good")


async def test_a_disconnect_fails_the_attempt_retryably(env: _Env) -> None:
    h = await env.sched.submit(Blob(b"in", "text/plain"))
    await env.lease()
    env.registry.disconnect(env.session)
    with pytest.raises(TaskFailed) as ei:
        await h
    assert (ei.value.status, ei.value.message) == ("dead_lettered", "worker disconnected")


async def test_a_cancelled_report_cancels_the_task(env: _Env) -> None:
    h = await env.sched.submit(Blob(b"in", "text/plain"))
    lease = await env.lease()
    env.session.cancelled(lease.lease)
    with pytest.raises(TaskFailed) as ei:
        await h
    assert ei.value.status == "cancelled"


async def test_an_engine_abort_sends_abort_to_the_worker(env: _Env) -> None:
    h = await env.sched.submit(Blob(b"in", "text/plain"), timeout=0.05)
    lease = await env.lease()
    abort = await env.abort()
    assert (abort.lease, abort.reason) == (lease.lease, "attempt timed out")
    with pytest.raises(TaskFailed) as ei:
        await h
    assert ei.value.status == "dead_lettered"
    env.session.complete(lease.lease, b"late", "text/plain")  # (after the abort: stale)
    assert await env.sched.status(h.id) == "dead_lettered"


@pytest.mark.parametrize("end", ["complete", "fail", "cancelled", "abort"])
async def test_an_ended_attempt_is_freed_without_the_cyclic_collector(env: _Env, end: str) -> None:
    """The attempt is freed by reference counting once it ended: no cycle through its
    context's ``on_abort`` is left for the collector (a server made five objects of cyclic
    garbage a task that way, about half of what triggered its collections)."""
    with gc_paused():
        h = await env.sched.submit(Blob(b"in", "text/plain"), timeout=0.05 if end == "abort" else None)
        lease = await env.lease()
        att = env.session.attempts[lease.lease]
        gone = weakref.ref(att)
        del att
        if end == "complete":
            env.session.complete(lease.lease, b"out", "text/plain")
        elif end == "fail":
            env.session.fail(lease.lease, "no good", True, None)
        elif end == "cancelled":
            env.session.cancelled(lease.lease)
        else:
            await env.abort()
        with contextlib.suppress(TaskFailed):
            await h
        await asyncio.sleep(0)  # (the awaited form's done callbacks, already scheduled, run)
        assert gone() is None


async def test_an_attempt_that_made_a_durable_call_is_freed_without_the_cyclic_collector(env: _Env) -> None:
    """A durable call sets the context's ``on_park`` to the session's ``parked`` of the attempt
    (server/worker_durable.py): once the attempt ended, that hold is dropped too."""
    with gc_paused():
        h = await env.sched.submit(Blob(b"in", "text/plain"))
        lease = await env.lease()
        att = env.session.attempts[lease.lease]
        att.ctx.on_park = functools.partial(env.session.parked, att, 1)
        gone = weakref.ref(att)
        del att
        env.session.complete(lease.lease, b"out", "text/plain")
        await h
        await asyncio.sleep(0)  # (the awaited form's done callbacks, already scheduled, run)
        assert gone() is None


async def test_a_durable_call_whose_attempt_ended_before_it_ran_leaves_no_hold(env: _Env) -> None:
    """A durable call runs in its own asyncio task (server/worker_durable.py): an attempt that
    ends between the call's arrival and its task's first step must not be given an
    ``on_park`` then, which nothing would drop (attempt -> context -> on_park -> attempt)."""
    with gc_paused():
        h = await env.sched.submit(Blob(b"in", "text/plain"))
        lease = await env.lease()
        att = env.session.attempts[lease.lease]
        durable = WorkerDurable(None)  # type: ignore[arg-type]  # (a step call needs no app)
        durable(env.session, att, DurableCallMsg(lease.lease, 1, "step", {"name": "s"}))
        gone = weakref.ref(att)
        del att
        env.session.complete(lease.lease, b"out", "text/plain")  # (before the call's task ran)
        await h
        await asyncio.gather(*durable._calls)
        await asyncio.sleep(0)  # (the awaited form's done callbacks, already scheduled, run)
        assert gone() is None
