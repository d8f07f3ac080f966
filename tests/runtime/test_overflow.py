"""Queue bounds and overload policies (docs/reference/behaviour.md#overload)."""

from __future__ import annotations

import asyncio

import pytest

from cronoq import Scheduler, SchedulerError, SubmitError, Task, TaskFailed
from cronoq.errors import NotStartedError

from .conftest import Gate, pool, settle, wait


async def _frozen(s: Scheduler, name: str = "default") -> None:
    """No slots: everything submitted stays pending."""
    await s.set_capacity(name, 0)


# ----------------------------------------------------------------------------- wait


async def test_wait_blocks_submit_until_a_slot_takes_work(gate: Gate):
    async with Scheduler([pool(executor=gate, max_pending=1)]) as s:
        a = await s.submit("a")
        await wait(gate.started("a").wait())  # running: no longer pending
        b = await s.submit("b")  # pending = 1 = max_pending
        c_sub = asyncio.create_task(s.submit("c"))
        await settle()
        assert not c_sub.done()
        snap = await s.snapshot()
        assert snap.totals["submitted"] == 2
        assert snap.pool("default").pending == 1
        gate.release("a")  # a ends, b is dispatched, space frees for c
        c = await wait(c_sub)
        assert c.id == b.id + 1
        await wait(gate.started("b").wait())
        gate.release_all()
        assert await wait(asyncio.gather(a, b, c)) == ["a", "b", "c"]


async def test_wait_blocks_enqueue_and_cancel_frees_space(gate: Gate):
    async with Scheduler([pool(executor=gate, max_pending=2)]) as s:
        await _frozen(s)
        first = await s.enqueue("x")
        await s.enqueue("y")
        blocked = asyncio.create_task(s.enqueue("z"))
        await settle()
        assert not blocked.done()
        assert await s.cancel(first)
        tid = await wait(blocked)
        assert await s.status(tid) == "ready"
        assert (await s.snapshot()).pool("default").pending == 2


async def test_wait_blocked_submitters_all_get_in_eventually(gate: Gate):
    gate.release_all()
    async with Scheduler([pool(executor=gate, max_pending=1)]) as s:
        await _frozen(s)
        await s.enqueue(0)
        subs = [asyncio.create_task(s.submit(i)) for i in range(1, 6)]
        await settle()
        assert not any(t.done() for t in subs)
        await s.set_capacity("default", 1)
        handles = await wait(asyncio.gather(*subs))
        assert sorted(await wait(asyncio.gather(*handles))) == [1, 2, 3, 4, 5]


async def test_wait_batch_is_admitted_as_a_whole(gate: Gate):
    async with Scheduler([pool(executor=gate, max_pending=3)]) as s:
        await _frozen(s)
        first = await s.enqueue("x")
        await s.enqueue("y")
        batch = asyncio.create_task(s.submit_batch([Task("b1"), Task("b2")]))
        await settle()
        assert not batch.done()
        snap = await s.snapshot()
        assert snap.pool("default").pending == 2  # not partially admitted
        assert snap.totals["submitted"] == 2
        assert await s.cancel(first)
        hs = await wait(batch)
        assert len(hs) == 2
        assert (await s.snapshot()).pool("default").pending == 3


async def test_batch_larger_than_bound_is_overloaded_even_with_wait():
    async with Scheduler([pool(max_pending=2)]) as s:
        await _frozen(s)
        with pytest.raises(SubmitError) as ei:
            await wait(s.submit_batch([Task(i) for i in range(3)]))
        assert ei.value.code == "overloaded"
        assert (await s.snapshot()).totals["submitted"] == 0


async def test_unbounded_by_default():
    async with Scheduler([pool()]) as s:
        await _frozen(s)
        for i in range(500):
            await s.enqueue(i)
        assert (await s.snapshot()).pending == 500


async def test_duplicate_key_does_not_wait_on_full_pool():
    async with Scheduler([pool(max_pending=1)]) as s:
        await _frozen(s)
        tid = await s.enqueue("a", key="k")
        h = await wait(s.submit("b", key="k"), 2)
        assert h.duplicate and h.id == tid


async def test_a_submission_waiting_for_space_fails_at_shutdown():
    """Nothing was accepted: the waiting submit (and batch) raise a SchedulerError that says
    the scheduler shut down - not the "not started" advice."""
    s = Scheduler([pool(max_pending=2)])
    await s.start()
    await _frozen(s)
    await s.enqueue("a")
    await s.enqueue("a2")
    single = asyncio.ensure_future(s.submit("b"))
    batch = asyncio.ensure_future(s.submit_batch([Task("c"), Task("d")]))
    await settle()
    assert not single.done() and not batch.done()
    await s.shutdown()
    for fut in (single, batch):
        with pytest.raises(SchedulerError) as ei:
            await wait(fut)
        assert not isinstance(ei.value, NotStartedError)
        assert str(ei.value) == "scheduler shut down while the submission waited for space in pool 'default'"


# ----------------------------------------------------------------------------- reject


async def test_reject_overloaded():
    async with Scheduler([pool(max_pending=2, overflow="reject")]) as s:
        await _frozen(s)
        await s.enqueue(1)
        await s.submit(2)
        for call in (lambda: s.submit(3), lambda: s.enqueue(3), lambda: s.submit_batch([Task(3)])):
            with pytest.raises(SubmitError) as ei:
                await wait(call())
            assert ei.value.code == "overloaded"
        snap = await s.snapshot()
        assert snap.totals["submitted"] == 2
        assert snap.totals["shed"] == 0


async def test_reject_counts_retrying_and_ready_as_pending(gate: Gate):
    async with Scheduler([pool(executor=gate, max_pending=1, overflow="reject")]) as s:
        a = await s.submit("a")
        await wait(gate.started("a").wait())
        await s.submit("b")  # ready: pending
        with pytest.raises(SubmitError) as ei:
            await s.submit("c")
        assert ei.value.code == "overloaded"
        gate.release_all()
        await wait(a)


async def test_reject_batch_too_large():
    async with Scheduler([pool(max_pending=2, overflow="reject")]) as s:
        with pytest.raises(SubmitError) as ei:
            await s.submit_batch([Task(i) for i in range(3)])
        assert ei.value.code == "overloaded"


# ----------------------------------------------------------------------------- shed policies


async def _assert_shed(s: Scheduler, h) -> None:
    with pytest.raises(TaskFailed) as ei:
        await wait(h)
    assert (ei.value.status, ei.value.message, ei.value.task_id) == ("shed", "shed under overload", h.id)
    assert await s.status(h.id) == "shed"


async def test_shed_lowest_evicts_newest_of_least_important_class():
    async with Scheduler([pool(max_pending=3, overflow="shed_lowest")]) as s:
        await _frozen(s)
        stream = s.events()
        l1 = await s.submit("l1", priority="low")
        l2 = await s.submit("l2", priority="low")
        n1 = await s.submit("n1")
        h = await s.submit("h", priority="high")  # full: sheds the newest low
        await _assert_shed(s, l2)
        assert await s.status(l1.id) == "ready"
        ev = await wait(stream.__anext__())
        assert (ev.id, ev.status, ev.message) == (l2.id, "shed", "shed under overload")
        c = await s.submit("c", priority="critical")  # sheds l1, the remaining low
        await _assert_shed(s, l1)
        n2 = await s.submit("n2", priority="high")  # now normal is least important
        await _assert_shed(s, n1)
        snap = await s.snapshot()
        assert snap.totals["shed"] == 3
        assert snap.pool("default").pending == 3
        assert snap.pool("default").pending_by_class == [1, 2, 0, 0]
        for live in (h, c, n2):
            assert await s.status(live.id) == "ready"


async def test_shed_lowest_overloaded_when_nothing_less_important():
    async with Scheduler([pool(max_pending=2, overflow="shed_lowest")]) as s:
        await _frozen(s)
        a = await s.submit("a")
        b = await s.submit("b", priority="high")
        for prio in ("normal", "low"):
            with pytest.raises(SubmitError) as ei:
                await s.submit("x", priority=prio)
            assert ei.value.code == "overloaded"
        assert await s.status(a.id) == "ready"
        assert await s.status(b.id) == "ready"
        assert (await s.snapshot()).totals["shed"] == 0


async def test_shed_oldest_evicts_oldest_low():
    async with Scheduler([pool(max_pending=3, overflow="shed_oldest")]) as s:
        await _frozen(s)
        l1 = await s.submit("l1", priority="low")
        n = await s.submit("n")
        l2 = await s.submit("l2", priority="low")
        await s.submit("x", priority="high")
        await _assert_shed(s, l1)
        assert await s.status(l2.id) == "ready"
        # a new low task may also evict the oldest low
        l3 = await s.submit("l3", priority="low")
        await _assert_shed(s, l2)
        assert await s.status(l3.id) == "ready"
        assert await s.status(n.id) == "ready"
        assert (await s.snapshot()).totals["shed"] == 2


async def test_shed_oldest_overloaded_without_low_tasks():
    async with Scheduler([pool(max_pending=2, overflow="shed_oldest")]) as s:
        await _frozen(s)
        await s.submit("a")
        await s.submit("b", priority="high")
        with pytest.raises(SubmitError) as ei:
            await s.submit("c", priority="critical")
        assert ei.value.code == "overloaded"
        assert (await s.snapshot()).totals["shed"] == 0


async def test_shed_never_evicts_running_tasks(gate: Gate):
    async with Scheduler([pool(executor=gate, max_pending=1, overflow="shed_oldest")]) as s:
        low_running = await s.submit("lr", priority="low")
        await wait(gate.started("lr").wait())
        low_queued = await s.submit("lq", priority="low")
        await s.submit("n")
        await _assert_shed(s, low_queued)
        assert await s.status(low_running.id) == "running"
        gate.release_all()
        assert await wait(low_running) == "lr"


async def test_pools_have_independent_bounds():
    async with Scheduler([pool("a", max_pending=1, overflow="reject"), pool("b")]) as s:
        await _frozen(s, "a")
        await _frozen(s, "b")
        await s.enqueue(1, pool="a")
        with pytest.raises(SubmitError):
            await s.enqueue(2, pool="a")
        for i in range(5):
            await s.enqueue(i, pool="b")
        snap = await s.snapshot()
        assert (snap.pool("a").pending, snap.pool("b").pending) == (1, 5)
