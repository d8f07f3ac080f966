"""The seam between ``Scheduler`` and the shells built on it (docs/architecture/index.md#seam):
constructor options instead of attributes set afterwards, and ``sched.seam``."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from cronoq import BlockingScheduler, Pool, Scheduler, SubmitError
from cronoq.runtime.seam import SchedulerSeam
from cronoq.spec.submission import Submission
from cronoq.testing import VirtualClock


async def _echo(ctx: Any, payload: Any) -> Any:
    return payload


async def test_key_retention_is_a_constructor_option() -> None:
    clock = VirtualClock(1_000_000.0)
    async with Scheduler([Pool("p", _echo)], clock=clock, key_retention=10.0) as sched:
        first = await sched.submit(1, key="k")
        assert await asyncio.wait_for(first, 10) == 1
        again = await sched.submit(2, key="k")
        assert again.duplicate and again.id == first.id  # retained: the key is taken
        clock.advance(11)
        assert await sched.status(first.id) is None  # forgotten after key_retention
        fresh = await sched.submit(3, key="k")
        assert not fresh.duplicate and await asyncio.wait_for(fresh, 10) == 3


async def test_key_retention_max_bounds_the_retained_tasks() -> None:
    async with Scheduler([Pool("p", _echo)], key_retention_max=1) as sched:
        a = await sched.submit("a")
        await asyncio.wait_for(a, 10)
        b = await sched.submit("b")
        await asyncio.wait_for(b, 10)
        assert await sched.status(b.id) == "succeeded"
        assert await sched.status(a.id) is None


async def test_without_waiting_for_space_a_full_pool_answers_full() -> None:
    gate, running = asyncio.Event(), asyncio.Event()

    async def held(ctx: Any, payload: Any) -> None:
        running.set()
        await gate.wait()

    pool = Pool("p", held, min=1, max=1, autoscale=False, max_pending=1)
    async with Scheduler([pool], wait_for_space=False) as sched:
        await sched.enqueue(1)
        await asyncio.wait_for(running.wait(), 10)
        await sched.enqueue(2)  # the one pending task the pool holds
        with pytest.raises(SubmitError) as ei:
            await sched.submit(3, key="k")  # (with a key: the path that would wait)
        assert ei.value.code == "full"
        gate.set()


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        ({"key_retention": -1}, "key_retention must be a finite, non-negative number of seconds"),
        ({"key_retention_max": -1}, "key_retention_max must be an int >= 0"),
        ({"key_retention_max": True}, "key_retention_max must be an int >= 0"),
    ],
)
def test_the_options_are_validated(kw: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Scheduler([Pool("p", _echo)], **kw)


async def test_the_seam_reads_the_engine_and_operates_on_it() -> None:
    clock = VirtualClock(1_000_000.0)
    gate, running = asyncio.Event(), asyncio.Event()

    async def held(ctx: Any, payload: Any) -> Any:
        seen.append(seam.task_of(ctx).id)
        running.set()
        await gate.wait()
        return payload

    seen: list[int] = []
    sched = Scheduler([Pool("p", held, min=1, max=1, autoscale=False)], clock=clock, event_capacity=7)
    seam = sched.seam
    assert isinstance(seam, SchedulerSeam)
    assert seam.tasks == {} and seam.epoch is None and seam.lookup(1) is None
    assert seam.snapshot_now() is None and seam.pending_total() == 0 and not seam.cancel(1)
    seam.set_group_capacity("p", None, 2)  # not started: nothing to size
    async with sched:
        assert seam.loop is asyncio.get_running_loop() and seam.on_loop_thread()
        assert seam.store is None and not seam.durable and seam.event_capacity == 7
        assert seam.time_base == 1_000_000 * 10**9 and seam.epoch == 0
        assert seam.pool_at(0).name == "p"
        tid, dup = await seam.submit(Submission.from_kwargs("x", key="k"))
        assert not dup and await seam.submit(Submission.from_kwargs("y", key="k")) == (tid, True)
        other, _ = await seam.submit(Submission.from_kwargs("z", tenant="t"))
        await asyncio.wait_for(running.wait(), 10)
        assert seen == [tid] and seam.pending_total() == 1
        assert seam.lookup("k") is seam.tasks[tid] and seam.lookup(other).id == other  # type: ignore[union-attr]
        assert seam.cancel(other) and not seam.cancel(other)
        await seam.commit()  # (no store: nothing to wait for)
        before = seam.snapshot_now()
        assert before is not None and before.pools[0].capacity == 1
        seam.set_group_capacity("p", None, 2)
        handle = seam.handle(tid)
        gate.set()
        assert await asyncio.wait_for(handle, 10) == "x"
        assert set(seam.retained_tasks()) == {tid, other}
        seam.count_stale()
        assert (await sched.snapshot()).totals["stale_completions"] == 1
    assert seam.tasks == {}


async def test_tracing_switches_live_on_the_seam() -> None:
    seam = Scheduler([Pool("p", _echo)]).seam
    assert seam.trace_all is False and seam.tracer is None
    tracer = object()
    seam.trace_all, seam.tracer = True, tracer
    assert seam.trace_all is True and seam.tracer is tracer


def test_the_blocking_scheduler_passes_the_options_and_shares_the_seam() -> None:
    bs = BlockingScheduler([Pool("p", _echo)], key_retention=5.0, key_retention_max=3, wait_for_space=False)
    assert bs.seam is bs.scheduler.seam
    bs.start()
    try:

        async def both() -> tuple[int, int]:
            return await bs.scheduler.enqueue(1), await bs.scheduler.enqueue(2)

        a, b = bs.run_coroutine(both(), 10)
        assert b == a + 1
    finally:
        bs.shutdown()


async def test_submit_batch_answers_ids_without_handles() -> None:
    from cronoq import Task

    async with Scheduler([Pool("p", _echo)]) as sched:
        seam = sched.seam
        first = await seam.submit_batch([Task(1, key="a"), Task(2)])
        assert [dup for _, dup in first] == [False, False]
        again = await seam.submit_batch([Task(3, key="a"), Task(4)])
        assert again[0] == (first[0][0], True) and not again[1][1]
        assert not sched._run.waiters  # (no future parked for any member)
        assert await seam.submit_batch([]) == []
        with pytest.raises(SubmitError):
            await seam.submit_batch([Task(5, pool="nope")])


async def test_submit_now_enters_at_once_and_only_a_full_pool_member_waits(tmp_path: Any) -> None:
    """``seam.submit_now``: each submission is in the engine when the call returns, not yet
    committed (one ``commit()`` then covers them all); one whose pool is full (the scheduler
    waits for space) comes back as an awaitable and waits alone while the others are in."""
    from cronoq.store import SqliteStore

    gate, running = asyncio.Event(), asyncio.Event()

    async def held(ctx: Any, payload: Any) -> None:
        running.set()
        await gate.wait()

    small = Pool("small", held, min=1, max=1, autoscale=False, max_pending=1)
    store = SqliteStore(tmp_path / "now.db")
    async with Scheduler([small, Pool("idle", _echo, min=0, max=1, autoscale=False)], store=store) as sched:
        await sched.enqueue(0, pool="small")
        await asyncio.wait_for(running.wait(), 10)
        await sched.enqueue(1, pool="small")  # the one pending task the pool holds
        seam = sched.seam
        subs = [
            Submission.from_kwargs("a", pool="small", key="w"),  # full: waits for space
            Submission.from_kwargs("b", pool="idle", key="x"),
            Submission.from_kwargs("c", pool="idle", key="x"),  # a duplicate of "b"
        ]
        entered = [seam.submit_now(s) for s in subs]
        waiting, b, c = entered
        assert isinstance(b, tuple) and isinstance(c, tuple) and not isinstance(waiting, tuple)
        assert b[1] is False and c == (b[0], True)
        assert b[0] in seam.tasks  # in the engine before anything was awaited
        late = asyncio.ensure_future(waiting)
        await asyncio.wait_for(seam.commit(), 10)  # the others are committed meanwhile
        assert not late.done()
        gate.set()  # the running task ends: the pending one runs, space for "a"
        tid, dup = await asyncio.wait_for(late, 10)
        assert not dup and seam.tasks[tid].opts.pool_index == 0
        await asyncio.wait_for(seam.commit(), 10)
    rec = SqliteStore(tmp_path / "now.db")
    await rec.open()
    try:
        from cronoq.store import JsonCodec

        loaded = await rec.load(JsonCodec())
        ids = {t.id for t in loaded.tasks} | {t.id for t in loaded.terminal}
        assert {b[0], tid} <= ids
    finally:
        await rec.close()


async def test_commit_of_a_scheduler_that_stopped_leading_raises(tmp_path: Any) -> None:
    """``seam.commit()`` on a scheduler with a store that no longer runs (it stepped down or
    shut down) raises ``Fenced``: a caller that awaited something between its change and the
    commit (a Wait for an outcome) must not take the change as committed.  It used to return
    as if everything were committed; without a store it still returns."""
    from cronoq.errors import Fenced
    from cronoq.store import SqliteStore

    sched = Scheduler([Pool("default", _echo)], store=SqliteStore(tmp_path / "gone.db"))
    await sched.start()
    await sched.seam.commit()
    await sched.shutdown()
    with pytest.raises(Fenced, match="stopped leading"):
        await sched.seam.commit()
    plain = Scheduler([Pool("default", _echo)])
    await plain.start()
    await plain.shutdown()
    await plain.seam.commit()
