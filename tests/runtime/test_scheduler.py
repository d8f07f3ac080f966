"""Scheduler construction, lifecycle, submission, queries and snapshots
(docs/reference/behaviour.md#ids-keys-retention, docs/reference/behaviour.md#metrics,
docs/reference/behaviour.md#scheduler-api)."""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path
from typing import Any

import pytest

from cronoq import (
    GroupSnapshot,
    Pool,
    PoolSnapshot,
    Priority,
    Retryable,
    RetryPolicy,
    Scheduler,
    SchedulerError,
    Snapshot,
    SubmitError,
    Task,
    TaskFailed,
    TaskHandle,
)
from cronoq.engine.mutations import RecurringRemove, StatusChange
from cronoq.errors import CronoqError
from cronoq.store import SqliteStore

from .conftest import Gate, echo, pool, settle, wait

NOT_STARTED = "scheduler not started; call `await scheduler.start()` first"

# ----------------------------------------------------------------------------- construction


def test_requires_at_least_one_pool():
    with pytest.raises(ValueError) as ei:
        Scheduler([])
    assert str(ei.value) == "at least one pool is required"


def test_requires_at_least_one_pool_from_empty_iterable():
    with pytest.raises(ValueError, match=r"^at least one pool is required$"):
        Scheduler(iter(()))


def test_duplicate_pool_name():
    with pytest.raises(ValueError) as ei:
        Scheduler([pool("a"), pool("b"), pool("a")])
    assert str(ei.value) == "duplicate pool name 'a'"


def test_properties_before_start():
    s = Scheduler([pool("x"), pool("y")])
    assert s.started is False
    assert s.pools == ["x", "y"]
    assert s.default_pool == "x"


def test_default_pool_named_default_wins():
    s = Scheduler([pool("x"), pool("default"), pool("y")])
    assert s.default_pool == "default"
    assert s.pools == ["x", "default", "y"]


def test_pools_property_is_a_copy():
    s = Scheduler([pool("x"), pool("y")])
    s.pools.append("z")
    assert s.pools == ["x", "y"]


def test_pool_name_is_readable():
    assert Pool("fast", echo).name == "fast"


# ----------------------------------------------------------------------------- lifecycle


async def test_async_with_binds_and_starts():
    sched = Scheduler([pool()])
    async with sched as s:
        assert s is sched
        assert s.started is True
        assert await (await s.submit(5)) == 5
    assert sched.started is False


async def test_start_is_idempotent_and_started_flag():
    s = Scheduler([pool()])
    await s.start()
    try:
        assert s.started
        await s.start()  # a no-op
        assert s.started
        assert await (await s.submit("a")) == "a"
    finally:
        await s.shutdown()
    assert not s.started


def _assert_not_started(exc: BaseException) -> None:
    assert isinstance(exc, RuntimeError)
    assert isinstance(exc, SchedulerError)
    assert isinstance(exc, CronoqError)
    assert str(exc) == NOT_STARTED


def _calls(s: Scheduler):
    return {
        "submit": lambda: s.submit(1),
        "enqueue": lambda: s.enqueue(1),
        "submit_batch": lambda: s.submit_batch([Task(1)]),
        "submit_batch_empty": lambda: s.submit_batch([]),
        "cancel": lambda: s.cancel(1),
        "status": lambda: s.status(1),
        "handle": lambda: s.handle(1),
        "snapshot": lambda: s.snapshot(),
        "set_capacity": lambda: s.set_capacity("default", 2),
    }


async def test_calls_before_start_raise_not_started():
    s = Scheduler([pool()])
    for call in _calls(s).values():
        with pytest.raises(RuntimeError) as ei:
            await call()
        _assert_not_started(ei.value)
    with pytest.raises(SchedulerError) as ei:
        s.events()
    _assert_not_started(ei.value)


async def test_calls_after_shutdown_raise_not_started():
    s = Scheduler([pool()])
    await s.start()
    await s.shutdown()
    for call in _calls(s).values():
        with pytest.raises(SchedulerError) as ei:
            await call()
        _assert_not_started(ei.value)
    with pytest.raises(RuntimeError) as ei:
        s.events()
    _assert_not_started(ei.value)


async def test_restart_begins_empty_and_ids_continue():
    s = Scheduler([pool()])
    await s.start()
    a = await s.enqueue("a")
    h = await s.submit("b", key="kb")
    assert await wait(h) == "b"
    assert (a, h.id) == (1, 2)
    await s.shutdown()
    assert not s.started

    await s.start()
    try:
        assert s.started
        assert await s.status(1) is None
        assert await s.status("kb") is None  # the key is free again: no store
        h2 = await s.submit("c", key="kb")
        assert h2.id == 3
        assert h2.duplicate is False
        assert await wait(h2) == "c"
        assert await s.enqueue("d") == 4
        snap = await s.snapshot()
        assert snap.totals["submitted"] == 2  # totals restart with the engine
    finally:
        await s.shutdown()


# ----------------------------------------------------------------------------- submit / enqueue


async def test_ids_are_sequential_from_one():
    async with Scheduler([pool()]) as s:
        h1 = await s.submit("a")
        i2 = await s.enqueue("b")
        h3 = await s.submit("c")
        assert isinstance(h1, TaskHandle)
        assert isinstance(i2, int) and not isinstance(i2, bool)
        assert (h1.id, i2, h3.id) == (1, 2, 3)
        assert h1.duplicate is False
        assert await wait(h3) == "c"


async def test_enqueue_runs_the_task(gate: Gate):
    gate.release_all()
    async with Scheduler([pool(executor=gate)]) as s:
        tid = await s.enqueue("job")
        await wait(gate.started("job").wait())
        h = await s.handle(tid)
        assert h is not None
        assert await wait(h) == "job"
        assert await s.status(tid) == "succeeded"


async def test_submit_unknown_pool():
    async with Scheduler([pool("a")]) as s:
        for call in (lambda: s.submit(1, pool="x"), lambda: s.enqueue(1, pool="x")):
            with pytest.raises(SubmitError) as ei:
                await call()
            assert ei.value.code == "unknown_pool"
            assert ei.value.message == "unknown pool 'x'"
            assert str(ei.value) == "unknown pool 'x'"
        assert (await s.snapshot()).totals["submitted"] == 0


async def test_tasks_go_to_default_or_named_pool():
    seen: dict[str, list[str]] = {"a": [], "default": []}

    def mk(name):
        async def run(ctx, payload):
            seen[name].append(payload)
            assert ctx.pool == name
            return name

        return run

    async with Scheduler([pool("a", mk("a")), pool("default", mk("default"))]) as s:
        assert await wait(await s.submit("p1")) == "default"
        assert await wait(await s.submit("p2", pool="a")) == "a"
    assert seen == {"a": ["p2"], "default": ["p1"]}


async def test_duplicate_key_while_live(gate: Gate):
    async with Scheduler([pool(executor=gate)]) as s:
        h1 = await s.submit("first", key="k")
        await wait(gate.started("first").wait())
        h2 = await s.submit("second", key="k")
        assert h2.id == h1.id
        assert h2.duplicate is True
        assert await s.enqueue("third", key="k") == h1.id
        # a duplicate consumes no id
        h3 = await s.submit("other")
        assert h3.id == h1.id + 1
        gate.release_all()
        assert await wait(h2) == "first"
        assert await wait(h1) == "first"
        await wait(h3)
        assert gate.order == ["first", "other"]
        assert (await s.snapshot()).totals["submitted"] == 2


async def test_duplicate_key_after_finish_gives_original_outcome():
    calls = []

    async def failing(ctx, payload):
        calls.append(payload)
        raise Retryable("nope")

    async with Scheduler([pool(executor=failing, retry=RetryPolicy.none())]) as s:
        h1 = await s.submit("x", key="k")
        with pytest.raises(TaskFailed) as e1:
            await wait(h1)
        h2 = await s.submit("y", key="k")
        assert h2.duplicate is True
        assert h2.id == h1.id
        assert h2.done()
        with pytest.raises(TaskFailed) as e2:
            await wait(h2)
        assert (e2.value.status, e2.value.message, e2.value.task_id) == ("dead_lettered", "nope", h1.id)
        assert e1.value.status == "dead_lettered"
        assert calls == ["x"]


async def test_duplicate_key_after_success_gives_original_output():
    async with Scheduler([pool()]) as s:
        h1 = await s.submit({"v": 1}, key="k")
        out = await wait(h1)
        h2 = await s.submit({"v": 2}, key="k")
        assert h2.duplicate and h2.id == h1.id
        assert await wait(h2) is out


# ----------------------------------------------------------------------------- submit_batch


async def test_submit_batch_empty_returns_empty_list():
    async with Scheduler([pool()]) as s:
        assert await s.submit_batch([]) == []
        assert (await s.snapshot()).totals["submitted"] == 0


async def test_submit_batch_runs_all_with_keys():
    async with Scheduler([pool(max=4)]) as s:
        hs = await s.submit_batch([Task(i, key=f"k{i}") for i in range(4)])
        assert [h.id for h in hs] == [1, 2, 3, 4]
        assert all(isinstance(h, TaskHandle) and not h.duplicate for h in hs)
        assert await wait(asyncio.gather(*hs)) == [0, 1, 2, 3]
        assert await s.status("k2") == "succeeded"
        assert (await s.handle("k3")).id == 4


async def test_submit_batch_with_existing_key_is_duplicate(gate: Gate):
    async with Scheduler([pool(executor=gate)]) as s:
        h0 = await s.submit("orig", key="dup")
        hs = await s.submit_batch([Task("a"), Task("new", key="dup"), Task("b")])
        assert hs[1].id == h0.id and hs[1].duplicate is True
        assert not hs[0].duplicate and not hs[2].duplicate
        assert hs[0].id == h0.id + 1 and hs[2].id == h0.id + 2
        gate.release_all()
        assert await wait(asyncio.gather(*hs)) == ["a", "orig", "b"]


async def test_submit_batch_is_atomic_on_unknown_pool():
    async with Scheduler([pool()]) as s:
        with pytest.raises(SubmitError) as ei:
            await s.submit_batch([Task("a", key="a"), Task("b", pool="nope"), Task("c")])
        assert ei.value.code == "unknown_pool"
        assert ei.value.message == "unknown pool 'nope'"
        assert await s.status("a") is None
        assert await s.status(1) is None
        assert (await s.snapshot()).totals["submitted"] == 0
        # nothing consumed an id
        assert await s.enqueue("z") == 1


async def test_submit_batch_duplicate_key_in_batch():
    async with Scheduler([pool()]) as s:
        with pytest.raises(SubmitError) as ei:
            await s.submit_batch([Task(1, key="k"), Task(2), Task(3, key="k")])
        assert ei.value.code == "duplicate_key_in_batch"
        assert await s.status("k") is None
        assert (await s.snapshot()).totals["submitted"] == 0


async def test_submit_batch_rejects_non_tasks():
    async with Scheduler([pool()]) as s:
        with pytest.raises((TypeError, ValueError)):
            await s.submit_batch(["not a task"])  # type: ignore[list-item]


# ----------------------------------------------------------------------------- cancel / status / handle


async def test_unknown_refs():
    async with Scheduler([pool()]) as s:
        assert await s.status(12345) is None
        assert await s.status("nope") is None
        assert await s.handle(12345) is None
        assert await s.handle("nope") is None
        assert await s.cancel(12345) is False
        assert await s.cancel("nope") is False


async def test_status_progression_and_cancel_running(gate: Gate):
    async with Scheduler([pool(executor=gate)]) as s:
        h = await s.submit("a", key="ka")
        await wait(gate.started("a").wait())
        assert await s.status(h.id) == "running"
        assert await s.status("ka") == "running"
        assert await s.cancel("ka") is True
        ctx = gate.contexts["a"]
        assert ctx.is_cancelled()
        with pytest.raises(TaskFailed) as ei:
            await wait(h)
        assert (ei.value.status, ei.value.message, ei.value.task_id) == ("cancelled", "cancelled", h.id)
        assert await s.status(h.id) == "cancelled"
        assert await s.cancel(h.id) is False  # already terminal
        await settle()
        assert gate.cancelled == ["a"]  # the executor's asyncio task was cancelled
        snap = await s.snapshot()
        assert snap.totals["cancelled"] == 1
        assert snap.running == 0 and snap.live_tasks == 0


async def test_cancel_ready_task_never_runs(gate: Gate):
    async with Scheduler([pool(executor=gate)]) as s:
        a = await s.submit("a")
        await wait(gate.started("a").wait())
        b = await s.submit("b")
        assert await s.status(b.id) == "ready"
        assert await s.cancel(b.id) is True
        gate.release_all()
        assert await wait(a) == "a"
        with pytest.raises(TaskFailed, match="cancelled"):
            await wait(b)
        c = await s.submit("c")
        assert await wait(c) == "c"
        assert gate.order == ["a", "c"]


async def test_cancel_succeeded_task_is_false():
    async with Scheduler([pool()]) as s:
        h = await s.submit(1)
        await wait(h)
        assert await s.cancel(h.id) is False
        assert await s.status(h.id) == "succeeded"


async def test_handle_of_finished_and_live_tasks(gate: Gate):
    async with Scheduler([pool(executor=gate)]) as s:
        h = await s.submit("a", key="a")
        await wait(gate.started("a").wait())
        live = await s.handle("a")
        assert live is not None and live.id == h.id and not live.done()
        gate.release("a")
        assert await wait(live) == "a"
        late = await s.handle(h.id)
        assert late is not None and late.done()
        assert await wait(late) == "a"


async def test_handle_of_failed_task_raises():
    async def boom(ctx, p):
        raise ValueError("bad")

    async with Scheduler([pool(executor=boom, retry=RetryPolicy.none())]) as s:
        tid = await s.enqueue(1)
        h = await s.handle(tid)
        with pytest.raises(TaskFailed) as ei:
            await wait(h)
        assert ei.value.status == "dead_lettered"
        h2 = await s.handle(tid)
        assert h2.done()
        with pytest.raises(TaskFailed, match="ValueError: bad"):
            await h2


# ----------------------------------------------------------------------------- priorities


async def test_priority_classes_dispatch_in_order(gate: Gate):
    gate.release_all()
    async with Scheduler([pool(executor=gate)]) as s:
        await s.set_capacity("default", 0)
        hs = [
            await s.submit("low", priority="low"),
            await s.submit("normal"),
            await s.submit("low2", priority=Priority.LOW),
            await s.submit("high", priority="HIGH"),
            await s.submit("crit", priority=0),
            await s.submit("high2", priority=1),
        ]
        await s.set_capacity("default", 1)
        await wait(asyncio.gather(*hs))
        assert gate.order == ["crit", "high", "high2", "normal", "low", "low2"]


# ----------------------------------------------------------------------------- snapshot / set_capacity


async def test_snapshot_types_and_fields():
    async with Scheduler([pool("a"), pool("b")]) as s:
        snap = await s.snapshot()
        assert isinstance(snap, Snapshot)
        assert [p.name for p in snap.pools] == ["a", "b"]
        assert all(isinstance(p, PoolSnapshot) for p in snap.pools)
        assert snap.pool("b") is snap.pools[1]
        assert snap.pool("zzz") is None
        assert (snap.live_tasks, snap.running, snap.pending) == (0, 0, 0)
        assert isinstance(snap.totals, dict)
        assert set(snap.totals) >= {
            "submitted",
            "dispatched",
            "succeeded",
            "failed",
            "dead_lettered",
            "cancelled",
            "skipped",
            "missed",
            "shed",
            "retries",
            "timeouts",
            "lease_expiries",
            "stale_completions",
            "recurring_conflicts",
            "recurring_rejected",
            "recurring_invalid",
        }
        assert all(v == 0 for v in snap.totals.values())
        names = {f.name for f in dataclasses.fields(PoolSnapshot)}
        assert names >= {
            "name",
            "capacity",
            "busy",
            "held",
            "desired",
            "pending",
            "pending_by_class",
            "ready",
            "reservations",
            "window",
            "dispatched",
            "succeeded",
            "failed",
            "retried",
            "priority_adherence",
            "fixed_start_hit_rate",
            "utilization",
            "schedule_efficiency",
            "wait_mean",
            "wait_p50",
            "wait_p90",
            "wait_p99",
            "run_p50",
            "run_p99",
            "worker_seconds",
            "cost",
            "groups",
        }
        a = snap.pool("a")
        assert a.capacity == 1  # initial defaults to min (1)
        assert a.window == 60.0
        assert a.priority_adherence == 1.0  # no data
        assert a.fixed_start_hit_rate == 1.0  # no data
        assert a.pending_by_class == [0, 0, 0, 0]
        assert a.reservations == 0
        assert a.groups and isinstance(a.groups[0], GroupSnapshot)
        assert a.groups[0].labels == {}


async def test_initial_capacity_is_clamped_min():
    async with Scheduler([pool("a", min=2, max=5), pool("b", initial=3), pool("c", initial=9, max=4)]) as s:
        snap = await s.snapshot()
        assert [p.capacity for p in snap.pools] == [2, 3, 4]


async def test_snapshot_counts_while_running(gate: Gate):
    async with Scheduler([pool(executor=gate)]) as s:
        a = await s.submit("a")
        await wait(gate.started("a").wait())
        b = await s.submit("b", priority="high")
        c = await s.submit("c", priority="low")
        snap = await s.snapshot()
        p = snap.pool("default")
        assert (snap.live_tasks, snap.running, snap.pending) == (3, 1, 2)
        assert (p.busy, p.pending, p.ready, p.capacity) == (1, 2, 2, 1)
        assert p.pending_by_class == [0, 1, 0, 1]
        assert p.dispatched == 1
        assert snap.totals["submitted"] == 3 and snap.totals["dispatched"] == 1
        gate.release_all()
        await wait(asyncio.gather(a, b, c))
        snap = await s.snapshot()
        p = snap.pool("default")
        assert (snap.live_tasks, snap.running, snap.pending) == (0, 0, 0)
        assert (p.busy, p.pending, p.ready, p.dispatched, p.succeeded) == (0, 0, 0, 3, 3)
        assert snap.totals["succeeded"] == 3


async def test_pending_by_class_is_indexed_by_priority_value():
    async with Scheduler([pool()]) as s:
        await s.set_capacity("default", 0)
        for prio, n in (("critical", 1), (Priority.HIGH, 2), (2, 3), ("Low", 4)):
            for _ in range(n):
                await s.enqueue(None, priority=prio)
        snap = await s.snapshot()
        p = snap.pool("default")
        assert p.pending_by_class == [1, 2, 3, 4]
        assert p.pending_by_class[Priority.CRITICAL.value] == 1
        assert p.pending_by_class[Priority.LOW.value] == 4
        assert p.pending == p.ready == snap.pending == snap.live_tasks == 10
        assert p.capacity == 0 and snap.running == 0


async def test_snapshot_attempt_counters():
    attempts: dict[int, int] = {}

    async def flaky(ctx, p):
        attempts[ctx.id] = ctx.attempt
        if ctx.attempt < 3:
            raise Retryable("again", retry_after=0)
        return "ok"

    async with Scheduler([pool(executor=flaky)]) as s:
        assert await wait(await s.submit(1)) == "ok"
        snap = await s.snapshot()
        p = snap.pool("default")
        assert (p.dispatched, p.failed, p.retried, p.succeeded) == (3, 2, 2, 1)
        t = snap.totals
        assert (t["dispatched"], t["retries"], t["failed"], t["succeeded"]) == (3, 2, 0, 1)


async def test_set_capacity(gate: Gate):
    async with Scheduler([pool(executor=gate)]) as s:
        await s.set_capacity("default", 0)
        a = await s.submit("a")
        b = await s.submit("b")
        await settle()
        assert gate.order == []
        assert (await s.snapshot()).pool("default").capacity == 0
        await s.set_capacity("default", 2)
        await wait(gate.started("a").wait())
        await wait(gate.started("b").wait())
        snap = await s.snapshot()
        assert snap.pool("default").capacity == 2
        assert snap.running == 2
        gate.release_all()
        await wait(asyncio.gather(a, b))


async def test_set_capacity_not_clamped_to_max(gate: Gate):
    async with Scheduler([pool(executor=gate, max=1)]) as s:
        await s.set_capacity("default", 3)
        hs = [await s.submit(i) for i in range(3)]
        for i in range(3):
            await wait(gate.started(i).wait())
        assert (await s.snapshot()).pool("default").capacity == 3
        gate.release_all()
        await wait(asyncio.gather(*hs))


async def test_set_capacity_unknown_pool():
    async with Scheduler([pool("a")]) as s:
        with pytest.raises(SubmitError) as ei:
            await s.set_capacity("x", 3)
        assert ei.value.code == "unknown_pool"
        assert ei.value.message == "unknown pool 'x'"
        assert str(ei.value) == "unknown pool 'x'"


async def test_cancel_task_waiting_for_retry():
    attempts = []

    async def run(ctx, p):
        attempts.append(ctx.attempt)
        raise Retryable("later")

    slow = RetryPolicy(max_attempts=5, initial_backoff=100.0, jitter=False)
    async with Scheduler([pool(executor=run, retry=slow)], emit_transitions=True) as s:
        stream = s.events()
        h = await s.submit(1)

        async def until_retrying():
            async for ev in stream:
                if ev.status == "retrying":
                    return ev
            return None

        ev = await wait(until_retrying())
        assert (ev.id, ev.message) == (h.id, "later")
        assert await s.status(h.id) == "retrying"
        snap = await s.snapshot()
        p = snap.pool("default")
        # a retrying task is pending but not ready
        assert (snap.pending, p.pending, p.ready, snap.running, snap.live_tasks) == (1, 1, 0, 0, 1)
        assert p.pending_by_class == [0, 0, 1, 0]
        assert await s.cancel(h.id) is True
        with pytest.raises(TaskFailed) as ei:
            await wait(h)
        assert (ei.value.status, ei.value.message) == ("cancelled", "cancelled")
        assert (await s.snapshot()).pending == 0
    assert attempts == [1]


class RecordingSqliteStore(SqliteStore):
    """A real SQLite store that records the mutations of every commit that returned."""

    def __init__(self, *a: Any, **kw: Any) -> None:
        super().__init__(*a, **kw)
        self.committed: list[Any] = []

    async def commit(self, mutations: list[Any], epoch: int, codec: Any) -> None:
        await super().commit(mutations, epoch, codec)
        self.committed.extend(mutations)


async def test_cancel_and_remove_recurring_return_once_committed(gate: Gate, tmp_path: Path) -> None:
    """With a durable store ``cancel`` and ``remove_recurring`` return once their change is
    committed, as the other control calls do: a crash right after they answered must not bring
    the cancelled task back to run, nor the removed schedule back to make occurrences."""
    store = RecordingSqliteStore(tmp_path / "control.db")
    async with Scheduler([pool("default", gate, max=1)], store=store) as s:
        tid = await s.enqueue("a")
        await wait(gate.started("a").wait())
        await s.add_recurring("r", "0 0 1 1 *", "x")
        assert await s.cancel(tid) is True
        assert any(
            isinstance(m, StatusChange) and m.id == tid and m.status == "cancelled" for m in store.committed
        ), "cancel answered before its commit"
        assert await s.remove_recurring("r") is True
        assert any(isinstance(m, RecurringRemove) and m.name == "r" for m in store.committed), (
            "remove_recurring answered before its commit"
        )
