"""Pipelines and time: dependencies, batches, fixed starts and recurring schedules
(docs/reference/behaviour.md#fixed-starts, docs/reference/behaviour.md#cron,
docs/reference/behaviour.md#dependencies).

Everything goes through the public ``Scheduler`` API.  Ordering is observed through handles,
event streams and executor gates; wall-clock waits appear only as generous safety timeouts
(``wait``) or as the short "nothing else happened" checks a timing feature needs.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import itertools
import pickle
import re
import time
from typing import Any

import pytest

from cronoq import (
    Dep,
    Permanent,
    Pool,
    RecurringInfo,
    Scheduler,
    SchedulerError,
    StatusEvent,
    SubmitError,
    Task,
    TaskFailed,
)
from cronoq.errors import ConfigurationError
from cronoq.testing import VirtualClock

from .conftest import SAFETY, Gate, echo, pool, settle, wait

OCCURRENCE_KEY = re.compile(r"^k@\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")
EVERY_SECOND = "* * * * * *"


async def failed(h: Any, timeout: float = SAFETY) -> TaskFailed:
    """Await a handle that must fail; return its TaskFailed."""
    with pytest.raises(TaskFailed) as ei:
        await wait(h, timeout)
    return ei.value


async def run_until(stream: Any, pred: Any, timeout: float = SAFETY) -> list[StatusEvent]:
    """Read events until ``pred(event)`` is true; return everything read (last = the match)."""
    seen: list[StatusEvent] = []

    async def go() -> None:
        async for ev in stream:
            seen.append(ev)
            if pred(ev):
                return
        raise AssertionError(f"stream ended before the awaited event; saw {seen}")

    await wait(go(), timeout)
    return seen


async def boom_or_echo(ctx: Any, payload: Any) -> Any:
    if payload == "boom":
        raise Permanent("nope")
    return payload


# ============================================================================ dependencies


async def test_after_by_id_key_and_list(gate: Gate) -> None:
    async with Scheduler([pool(executor=gate, min=4, max=4)]) as s:
        a = await s.submit("a", key="A")
        b = await s.submit("b")
        by_id = await s.submit("by_id", after=a.id)
        by_key = await s.submit("by_key", after="A")
        by_list = await s.submit("by_list", after=[a.id, "A", b.id])
        await wait(gate.started("a").wait())
        await wait(gate.started("b").wait())
        for h in (by_id, by_key, by_list):
            assert await s.status(h.id) == "blocked"
        gate.release("a")
        await wait(gate.started("by_id").wait())
        await wait(gate.started("by_key").wait())
        await settle()
        assert await s.status(by_list.id) == "blocked"  # still waiting for b
        assert "by_list" not in gate.order
        gate.release("b")
        gate.release_all()
        assert await wait(by_list) == "by_list"
        assert await wait(by_id) == "by_id"
        assert await wait(by_key) == "by_key"


async def test_after_tuple_is_success_edges() -> None:
    async with Scheduler([pool(executor=boom_or_echo, min=2, max=2)]) as s:
        a = await s.submit("boom", key="A")
        b = await s.submit("fine", key="B")
        h = await s.submit("x", after=("B", a.id))
        e = await failed(h)
        assert (e.status, e.message) == ("skipped", f"dependency {a.id} ended as failed")
        assert await wait(b) == "fine"


@pytest.mark.parametrize("on", ["success", "on_success"])
async def test_dep_success_spellings(on: str) -> None:
    d = Dep("A", on=on)
    assert d.on == "success"
    async with Scheduler([pool(executor=boom_or_echo, min=2, max=2)]) as s:
        await s.submit("ok", key="A")
        h = await s.submit("child", deps=[d])
        assert await wait(h) == "child"
        await s.submit("boom", key="B")
        h2 = await s.submit("child2", deps=[Dep("B", on=on)])
        e = await failed(h2)
        assert e.status == "skipped"


@pytest.mark.parametrize("on", ["failure", "on_failure"])
async def test_dep_failure_spellings(on: str) -> None:
    assert Dep(1, on=on).on == "failure"
    async with Scheduler([pool(executor=boom_or_echo, min=2, max=2)]) as s:
        bad = await s.submit("boom", key="A")
        h = await s.submit("compensate", deps=[Dep("A", on=on)])
        assert await wait(h) == "compensate"
        await failed(bad)
        good = await s.submit("fine", key="B")
        h2 = await s.submit("never", deps=[Dep(good.id, on=on)])
        e = await failed(h2)
        assert (e.status, e.message) == ("skipped", f"dependency {good.id} ended as succeeded")


@pytest.mark.parametrize("on", ["complete", "on_complete"])
async def test_dep_complete_spellings(on: str) -> None:
    assert Dep("k", on=on).on == "complete"
    async with Scheduler([pool(executor=boom_or_echo, min=2, max=2)]) as s:
        await s.submit("boom", key="A")
        await s.submit("fine", key="B")
        h = await s.submit("cleanup", deps=[Dep("A", on=on), Dep("B", on=on)])
        assert await wait(h) == "cleanup"


@pytest.mark.parametrize("on", ["succeeded", "Success", "always", "", None, 1])
def test_dep_bad_on_raises_at_construction(on: Any) -> None:
    with pytest.raises(ValueError):
        Dep("a", on=on)


@pytest.mark.parametrize("target", [3.5, None, True, 0, -1, b"k", ["a"]])
def test_dep_bad_target(target: Any) -> None:
    with pytest.raises(ValueError):
        Dep(target)


def test_dep_defaults_and_equality() -> None:
    assert Dep("a").on == "success"
    assert Dep("a") == Dep("a", on="on_success")
    assert Dep("a", on="failure") != Dep("a")
    assert Dep(3).target == 3


@pytest.mark.parametrize(
    "fields",
    [
        {"after": 3.5},
        {"after": [3.5]},
        {"after": True},
        {"after": [None]},
        {"after": 0},
        {"after": {"a"}},
        {"deps": ["a"]},
        {"deps": Dep("a")},
        {"deps": [3]},
    ],
)
async def test_bad_dependency_reference_types(fields: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        Task("x", **fields)
    async with Scheduler([pool()]) as s:
        with pytest.raises(ValueError):
            await s.submit("x", **fields)
        with pytest.raises(ValueError):
            await s.enqueue("x", **fields)
        assert (await s.snapshot()).totals["submitted"] == 0


async def test_after_and_deps_are_a_union(gate: Gate) -> None:
    async with Scheduler([pool(executor=gate, min=3, max=3)]) as s:
        a = await s.submit("a", key="A")
        await s.submit("b", key="B")
        h = await s.submit("c", after="A", deps=[Dep("B", on="complete")])
        gate.release("a")
        await wait(a)
        await settle()
        assert await s.status(h.id) == "blocked"
        gate.release("b")
        gate.release("c")
        assert await wait(h) == "c"


async def test_skip_propagates_along_success_edges() -> None:
    async with Scheduler([pool(executor=boom_or_echo, min=2, max=2)]) as s:
        events = s.events()
        a = await s.submit("boom", key="A")
        b = await s.submit("b", after="A")
        c = await s.submit("c", after=b.id)
        d = await s.submit("d", deps=[Dep(c.id, on="failure")])  # skipped c satisfies failure
        e = await s.submit("e", deps=[Dep(b.id, on="complete")])  # and complete
        ea = await failed(a)
        assert (ea.status, ea.message, ea.task_id) == ("failed", "nope", a.id)
        eb = await failed(b)
        assert (eb.status, eb.message) == ("skipped", f"dependency {a.id} ended as failed")
        ec = await failed(c)
        assert (ec.status, ec.message) == ("skipped", f"dependency {b.id} ended as skipped")
        assert str(ec) == f"task {c.id} ended as skipped: dependency {b.id} ended as skipped"
        assert await wait(d) == "d"
        assert await wait(e) == "e"
        seen = await run_until(events, lambda ev: ev.id == c.id)
        skipped = {ev.id: ev for ev in seen if ev.status == "skipped"}
        assert skipped[c.id].message == f"dependency {b.id} ended as skipped"
        assert skipped[c.id].attempt == 0
        snap = await s.snapshot()
        assert snap.totals["skipped"] == 2
        assert await s.status(c.id) == "skipped"


async def test_retained_terminal_targets_resolve_at_once() -> None:
    async with Scheduler([pool(executor=boom_or_echo, min=2, max=2)]) as s:
        ok = await s.submit("ok", key="OK")
        bad = await s.submit("boom", key="BAD")
        await wait(ok)
        await failed(bad)
        assert await wait(await s.submit("x", after="OK")) == "x"
        assert await wait(await s.submit("y", deps=[Dep("BAD", on="failure")])) == "y"
        e = await failed(await s.submit("z", after="BAD"))
        assert (e.status, e.message) == ("skipped", "task already finished")
        e2 = await failed(await s.submit("w", deps=[Dep(ok.id, on="failure")]))
        assert (e2.status, e2.message) == ("skipped", "task already finished")


async def test_cancelled_parent_skips_success_dependents(gate: Gate) -> None:
    async with Scheduler([pool(executor=gate, min=1, max=1)]) as s:
        a = await s.submit("a")
        b = await s.submit("b", after=a.id)
        assert await s.cancel(a.id)
        e = await failed(b)
        assert (e.status, e.message) == ("skipped", f"dependency {a.id} ended as cancelled")


async def test_unknown_dependency_rejected_by_default() -> None:
    async with Scheduler([pool()]) as s:
        for ref in ("nope", 999):
            with pytest.raises(SubmitError) as ei:
                await s.submit("x", after=ref)
            assert ei.value.code == "unknown_dependency"
            assert ei.value.message == f"unknown dependency '{ref}'"
        with pytest.raises(SubmitError) as ei:
            await s.enqueue("x", deps=[Dep("nope", on="complete")])
        assert ei.value.code == "unknown_dependency"
        assert (await s.snapshot()).totals["submitted"] == 0


async def test_await_binds_when_key_is_submitted(gate: Gate) -> None:
    async with Scheduler([pool(executor=gate, min=2, max=2, unknown_dependency="await")]) as s:
        child = await s.submit("child", after="parent")
        assert await s.status(child.id) == "blocked"
        await settle()
        assert "child" not in gate.order
        parent = await s.submit("parent", key="parent")  # a plain submit must bind the waiter
        await wait(gate.started("parent").wait())
        assert await s.status(child.id) == "blocked"
        gate.release("parent")
        gate.release("child")
        assert await wait(child) == "child"
        assert await wait(parent) == "parent"


async def test_await_binds_through_fixed_start_and_batch() -> None:
    async with Scheduler([pool(min=2, max=2, unknown_dependency="await")]) as s:
        c1 = await s.submit("c1", after="p1")
        c2 = await s.submit("c2", deps=[Dep("p2", on="complete")])
        await s.submit("p1", key="p1", start_in=0.05)
        await s.submit_batch([Task("p2", key="p2")])
        assert await wait(c1) == "c1"
        assert await wait(c2) == "c2"


async def test_await_failure_edge_to_awaited_key() -> None:
    async with Scheduler([pool(executor=boom_or_echo, min=2, max=2, unknown_dependency="await")]) as s:
        c = await s.submit("c", deps=[Dep("p", on="failure")])
        await s.submit("boom", key="p")
        assert await wait(c) == "c"


async def test_await_timeout_skips() -> None:
    p = pool(unknown_dependency="await", await_timeout=0.05)
    async with Scheduler([p]) as s:
        events = s.events()
        h = await s.submit("x", after="never")
        e = await failed(h)
        assert (e.status, e.message) == ("skipped", "timed out awaiting unknown dependency")
        seen = await run_until(events, lambda ev: ev.id == h.id)
        assert seen[-1].status == "skipped"
        assert seen[-1].message == "timed out awaiting unknown dependency"


async def test_await_timeout_does_not_fire_once_bound(gate: Gate) -> None:
    p = pool(executor=gate, min=2, max=2, unknown_dependency="await", await_timeout=0.2)
    clock = VirtualClock(1_000_000.0)
    async with Scheduler([p], clock=clock) as s:
        child = await s.submit("child", after="p")
        await s.submit("p", key="p")
        await wait(gate.started("p").wait())
        clock.advance(0.4)  # well past await_timeout (virtual time): the bound edge must not time out
        await settle()
        assert await s.status(child.id) == "blocked"
        gate.release_all()
        assert await wait(child) == "child"


def test_pool_unknown_dependency_validation() -> None:
    with pytest.raises(ValueError):
        Pool("p", echo, unknown_dependency="ignore")
    with pytest.raises(ValueError, match="await_timeout must be a finite, non-negative number"):
        Pool("p", echo, unknown_dependency="await", await_timeout=-1)
    Pool("p", echo, unknown_dependency="await", await_timeout=0)


async def test_await_only_in_await_pools() -> None:
    async with Scheduler([pool("strict"), pool("lax", unknown_dependency="await")]) as s:
        with pytest.raises(SubmitError) as ei:
            await s.submit("x", pool="strict", after="k")
        assert ei.value.code == "unknown_dependency"
        h = await s.submit("y", pool="lax", after="k")
        assert await s.status(h.id) == "blocked"


async def test_self_dependency_is_a_cycle() -> None:
    async with Scheduler([pool(unknown_dependency="await")]) as s:
        with pytest.raises(SubmitError) as ei:
            await s.submit("x", key="S", after="S")
        assert ei.value.code == "cycle"
        with pytest.raises(SubmitError) as ei:
            await s.submit_batch([Task("x", key="S", deps=[Dep("S", on="complete")])])
        assert ei.value.code == "cycle"
        assert await s.status("S") is None


async def test_cycle_in_batch_rejected_atomically() -> None:
    async with Scheduler([pool()]) as s:
        with pytest.raises(SubmitError) as ei:
            await s.submit_batch(
                [
                    Task(0, key="ok"),
                    Task(1, key="a", after="c"),
                    Task(2, key="b", after="a"),
                    Task(3, key="c", after="b"),
                ]
            )
        assert ei.value.code == "cycle"
        assert await s.status("ok") is None
        assert (await s.snapshot()).totals["submitted"] == 0


async def test_cycle_through_awaited_keys(gate: Gate) -> None:
    async with Scheduler([pool(executor=gate, unknown_dependency="await")]) as s:
        x = await s.submit("x", key="X", after="Y")
        with pytest.raises(SubmitError) as ei:
            await s.submit("y", key="Y", after="X")
        assert ei.value.code == "cycle"
        # longer: X -> Y (awaited), Z -> X, Y -> Z closes it
        await s.submit("z", key="Z", after="X")
        with pytest.raises(SubmitError) as ei:
            await s.submit_batch([Task("y", key="Y", after="Z")])
        assert ei.value.code == "cycle"
        assert await s.status("Y") is None
        assert await s.status(x.id) == "blocked"


# ============================================================================ batches


async def test_submit_batch_forward_references(gate: Gate) -> None:
    async with Scheduler([pool(executor=gate, min=4, max=4)]) as s:
        hs = await s.submit_batch(
            [
                Task("join", key="join", after=["left", "right"]),
                Task("left", key="left", after="root"),
                Task("right", key="right", after="root"),
                Task("root", key="root"),
            ]
        )
        ids = [h.id for h in hs]
        assert ids == sorted(ids) and len(set(ids)) == 4  # ids increase with position
        assert not any(h.duplicate for h in hs)
        await wait(gate.started("root").wait())
        assert [await s.status(i) for i in ids[:3]] == ["blocked"] * 3
        gate.release("root")
        await wait(gate.started("left").wait())
        await wait(gate.started("right").wait())
        assert await s.status("join") == "blocked"
        gate.release_all()
        assert [await wait(h) for h in hs] == ["join", "left", "right", "root"]
        assert gate.order.index("join") == 3


async def test_submit_batch_is_atomic_on_unknown_dependency() -> None:
    async with Scheduler([pool()]) as s:
        with pytest.raises(SubmitError) as ei:
            await s.submit_batch([Task(1, key="ok1"), Task(2, after="missing")])
        assert (ei.value.code, ei.value.message) == ("unknown_dependency", "unknown dependency 'missing'")
        assert await s.status("ok1") is None
        assert (await s.snapshot()).totals["submitted"] == 0
        # ids are not consumed by a rejected batch
        h = await s.submit("next")
        assert h.id == 1


async def test_submit_batch_is_atomic_on_reservation_conflict() -> None:
    async with Scheduler([pool(max=2)]) as s:  # limit max(1, floor(2 * 0.5)) = 1
        with pytest.raises(SubmitError) as ei:
            await s.submit_batch([Task("a", key="a"), Task("f1", start_in=30), Task("f2", start_in=30)])
        assert ei.value.code == "reservation_conflict"
        assert await s.status("a") is None
        assert (await s.snapshot()).pool("default").reservations == 0


async def test_submit_batch_duplicate_key_in_batch() -> None:
    async with Scheduler([pool()]) as s:
        with pytest.raises(SubmitError) as ei:
            await s.submit_batch([Task(1, key="k"), Task(2), Task(3, key="k")])
        assert ei.value.code == "duplicate_key_in_batch"
        assert ei.value.message == "duplicate key 'k' in batch"
        assert str(ei.value) == "duplicate key 'k' in batch"
        assert (await s.snapshot()).totals["submitted"] == 0


async def test_submit_batch_existing_key_is_a_duplicate_while_others_are_created() -> None:
    async with Scheduler([pool()]) as s:
        first = await s.submit("orig", key="k")
        assert await wait(first) == "orig"
        hs = await s.submit_batch([Task("new1"), Task("other", key="k"), Task("new2", after="k")])
        assert [h.duplicate for h in hs] == [False, True, False]
        assert hs[1].id == first.id
        assert await wait(hs[1]) == "orig"
        assert await wait(hs[0]) == "new1"
        assert await wait(hs[2]) == "new2"


async def test_submit_batch_empty_and_bad_members() -> None:
    async with Scheduler([pool()]) as s:
        assert await s.submit_batch([]) == []
        with pytest.raises(ValueError):
            await s.submit_batch(["not a task"])  # type: ignore[list-item]


async def test_submit_batch_dag_order_is_respected() -> None:
    order: list[int] = []

    async def run(ctx: Any, i: int) -> int:
        order.append(i)
        return i

    layers, width = 5, 8
    tasks = []
    for layer in range(layers):
        for j in range(width):
            after = [f"n{layer - 1}-{k}" for k in range(width)] if layer else None
            tasks.append(Task(layer * width + j, key=f"n{layer}-{j}", after=after))
    async with Scheduler([pool(executor=run, min=3, max=3)]) as s:
        hs = await s.submit_batch(tasks)
        await wait(asyncio.gather(*(h.result() for h in hs)))
    pos = {v: i for i, v in enumerate(order)}
    for layer in range(1, layers):
        assert min(pos[layer * width + j] for j in range(width)) > max(
            pos[(layer - 1) * width + j] for j in range(width)
        )


# ============================================================================ fixed starts


@pytest.mark.parametrize(
    ("fields", "match"),
    [
        ({"start_at": dt.datetime(2030, 1, 1)}, "naive"),
        ({"start_in": 1, "start_at": time.time() + 1}, "mutually exclusive"),
        ({"start_in": 1, "tolerance": -0.5}, "tolerance must be a finite, non-negative number"),
        ({"start_in": 1, "tolerance": float("nan")}, "tolerance"),
        ({"start_in": -1}, "start_in must be a finite, non-negative number"),
        ({"start_in": float("inf")}, "start_in"),
        ({"start_at": "tomorrow"}, "start_at"),
        ({"start_at": float("nan")}, "start_at"),
        ({"start_in": 1, "on_miss": "later"}, "on_miss"),
    ],
)
async def test_fixed_start_validation(fields: dict[str, Any], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        Task("x", **fields)
    async with Scheduler([pool()]) as s:
        with pytest.raises(ValueError, match=match):
            await s.submit("x", **fields)
        with pytest.raises(ValueError, match=match):
            await s.enqueue("x", **fields)
        assert (await s.snapshot()).totals["submitted"] == 0


def test_tolerance_message_is_exact() -> None:
    with pytest.raises(ValueError) as ei:
        Task("x", start_in=1, tolerance=-0.5)
    assert str(ei.value) == "tolerance must be a finite, non-negative number of seconds (got -0.5)"


@pytest.mark.parametrize("kind", ["unix_float", "unix_int", "aware_utc", "aware_offset", "start_in"])
async def test_fixed_start_forms(kind: str) -> None:
    started: dict[str, float] = {}

    async def run(ctx: Any, p: str) -> str:
        started[p] = time.time()
        return p

    target = float(int(time.time()) + 2)  # whole second so the int form is exact
    when: dict[str, Any] = {
        "unix_float": {"start_at": target},
        "unix_int": {"start_at": int(target)},
        "aware_utc": {"start_at": dt.datetime.fromtimestamp(target, dt.UTC)},
        "aware_offset": {"start_at": dt.datetime.fromtimestamp(target, dt.timezone(dt.timedelta(hours=-5)))},
        "start_in": {"start_in": target - time.time()},
    }[kind]
    async with Scheduler([pool(executor=run, min=2, max=2)], emit_transitions=True) as s:
        events = s.events()
        h = await s.submit(kind, **when)
        assert await s.status(h.id) == "scheduled"
        snap = (await s.snapshot()).pool("default")
        assert snap.reservations == 1
        assert await wait(h) == kind
        seen = await run_until(events, lambda ev: ev.id == h.id and ev.status == "succeeded")
        statuses = [ev.status for ev in seen if ev.id == h.id]
        assert statuses == ["blocked", "scheduled", "ready", "running", "succeeded"]
        # never early; within the default 1 s tolerance
        assert started[kind] >= target - 0.005
        assert started[kind] <= target + 1.0
        snap = (await s.snapshot()).pool("default")
        assert snap.reservations == 0
        assert snap.fixed_start_hit_rate == 1.0


async def test_fixed_start_in_the_past_runs_at_once() -> None:
    async with Scheduler([pool()]) as s:
        h = await s.submit("late", start_at=time.time() - 0.2, tolerance=5)
        assert await wait(h) == "late"


async def test_fixed_start_held_slot_under_saturation() -> None:
    """Two slots saturated by a backlog of long tasks: the fixed start still hits its time."""
    starts: dict[str, float] = {}
    backlog_at_start: list[int] = []
    info: dict[str, Any] = {}

    async def run(ctx: Any, p: str) -> str:
        starts[p] = time.time()
        if p == "fixed":
            snap = (await info["s"].snapshot()).pool("default")
            backlog_at_start.append(snap.ready)
            return p
        await asyncio.sleep(0.2)
        return p

    async with Scheduler([pool(executor=run, min=2, max=2)]) as s:
        info["s"] = s
        for i in range(60):  # 6 s of work on 2 slots
            await s.enqueue(f"bg{i}")
        start_at = time.time() + 1.6
        tolerance = 0.5
        h = await s.submit("fixed", start_at=start_at, tolerance=tolerance, on_miss="fail")
        saw_held = False
        while not h.done():
            snap = (await s.snapshot()).pool("default")
            if snap.held >= 1:
                saw_held = True
            await asyncio.sleep(0.01)
        assert await wait(h) == "fixed"
        lateness = starts["fixed"] - start_at
        assert -0.005 <= lateness <= tolerance
        assert backlog_at_start and backlog_at_start[0] > 0  # it jumped a non-empty queue
        assert saw_held
        snap = (await s.snapshot()).pool("default")
        assert snap.fixed_start_hit_rate == 1.0
        assert (await s.snapshot()).totals["missed"] == 0


async def test_hold_keeps_slot_free(gate: Gate) -> None:
    """Within max_hold (1 s) of its start, a free slot is not given to other work."""
    async with Scheduler([pool(executor=gate, min=1, max=2)]) as s:
        h = await s.submit("fixed", start_in=0.6)
        snap = (await s.snapshot()).pool("default")
        assert snap.held == 1
        other = await s.submit("other")
        await settle()
        assert gate.order == []  # the only slot is held
        assert await s.status(other.id) == "ready"
        await wait(gate.started("fixed").wait())
        assert gate.order == ["fixed"]
        gate.release_all()
        assert await wait(h) == "fixed"
        assert await wait(other) == "other"


@pytest.mark.parametrize(("on_miss", "status"), [("skip", "missed"), ("fail", "failed")])
async def test_on_miss_skip_and_fail(on_miss: str, status: str) -> None:
    async with Scheduler([pool(min=0, max=2, initial=0)]) as s:  # capacity 0: can never start
        events = s.events()
        h = await s.submit("x", start_in=0.05, tolerance=0.05, on_miss=on_miss)
        e = await failed(h)
        assert (e.status, e.message) == (status, "fixed start missed")
        seen = await run_until(events, lambda ev: ev.id == h.id)
        assert (seen[-1].status, seen[-1].message) == (status, "fixed start missed")
        snap = await s.snapshot()
        assert snap.totals["missed" if on_miss == "skip" else "failed"] == 1
        assert snap.pool("default").fixed_start_hit_rate == 0.0
        assert snap.pool("default").reservations == 0


async def test_on_miss_run_late_runs_at_first_opportunity() -> None:
    clock = VirtualClock(1_000_000.0)
    async with Scheduler([pool(min=0, max=2, initial=0)], clock=clock) as s:
        h = await s.submit("late", start_in=0.05, tolerance=0.05)  # run_late is the default
        plain = await s.submit("plain")
        clock.advance(0.3)  # past start + tolerance (virtual time)
        await settle()
        assert await s.status(h.id) == "ready"
        assert (await s.snapshot()).pool("default").fixed_start_hit_rate == 0.0
        await s.set_capacity("default", 1)
        assert await wait(h) == "late"
        assert await wait(plain) == "plain"
        assert (await s.snapshot()).totals["missed"] == 0


async def test_fixed_start_waits_for_dependencies() -> None:
    async with Scheduler([pool(executor=boom_or_echo, min=2, max=2)]) as s:
        await s.submit("boom", key="A")
        h = await s.submit("x", after="A", start_in=5)
        e = await failed(h)
        assert e.status == "skipped"
        assert (await s.snapshot()).pool("default").reservations == 0


async def test_reservation_conflict() -> None:
    async with Scheduler([pool(max=4)]) as s:  # limit max(1, floor(4 * 0.5)) = 2
        a = await s.submit("a", start_in=30, duration_hint=1, tolerance=1)
        b = await s.submit("b", start_in=30.5, duration_hint=1, tolerance=1)
        with pytest.raises(SubmitError) as ei:
            await s.submit("c", start_in=31, duration_hint=1, tolerance=1)
        assert (ei.value.code, ei.value.message) == (
            "reservation_conflict",
            "fixed-start reservation conflict",
        )
        with pytest.raises(SubmitError):
            await s.submit_batch([Task("c", start_in=29.5, duration_hint=1)])
        # windows [s-1, s+2]: one that only touches a's and b's windows does not overlap them
        d = await s.submit("d", start_in=33.5, duration_hint=1, tolerance=1)
        assert (await s.snapshot()).pool("default").reservations == 3
        # cancelling releases the reservation
        assert await s.cancel(a.id)
        c = await s.submit("c", start_in=31, duration_hint=1, tolerance=1)
        assert [await s.status(h.id) for h in (b, c, d)] == ["scheduled"] * 3
        assert (await s.snapshot()).pool("default").reservations == 3


async def test_reservation_limit_uses_reservable_fraction() -> None:
    async with Scheduler([pool(max=10, reservable_fraction=0.3), pool("one", max=1)]) as s:
        for i in range(3):  # floor(10 * 0.3) = 3
            await s.enqueue(i, start_in=20)
        with pytest.raises(SubmitError):
            await s.enqueue(3, start_in=20)
        await s.enqueue("x", pool="one", start_in=20)  # max(1, floor(0.5)) = 1
        with pytest.raises(SubmitError):
            await s.enqueue("y", pool="one", start_in=20)


async def test_reservation_released_when_dispatched() -> None:
    async with Scheduler([pool(max=2)]) as s:  # limit 1
        h = await s.submit("a", start_in=0.05, duration_hint=5)
        with pytest.raises(SubmitError):
            await s.submit("b", start_in=0.5, duration_hint=1)
        assert await wait(h) == "a"
        await s.submit("b", start_in=0.5, duration_hint=1)


# ============================================================================ recurring


class KeyedGate:
    """An executor for recurring tests: each occurrence (by key) may be held until released."""

    def __init__(self, hold: bool = False, fail_first: bool = False) -> None:
        self.hold = hold
        self.fail_first = fail_first
        self.started: list[str] = []
        self.times: dict[str, float] = {}
        self.running = 0
        self.max_running = 0
        self.release = asyncio.Event()
        self.first_started = asyncio.Event()

    async def __call__(self, ctx: Any, payload: Any) -> Any:
        self.started.append(ctx.key)
        self.times[ctx.key] = time.time()
        self.running += 1
        self.max_running = max(self.max_running, self.running)
        first = len(self.started) == 1
        if first:
            self.first_started.set()
        try:
            if self.hold and first:
                await self.release.wait()
            if self.fail_first and first:
                raise Permanent("first failed")
            return ctx.key
        finally:
            self.running -= 1


async def test_recurring_every_second_keys_and_listing() -> None:
    ex = KeyedGate()
    async with Scheduler([pool(executor=ex, min=2, max=4)]) as s:
        events = s.events()
        before = time.time()
        info = await s.add_recurring("r", EVERY_SECOND, "tick", key="k")
        assert isinstance(info, RecurringInfo)
        assert (info.name, info.cron, info.tz, info.overlap, info.pool, info.key) == (
            "r", EVERY_SECOND, None, "skip", "default", "k"
        )  # fmt: skip
        after = time.time()
        assert info.next_run is not None and before < info.next_run <= after + 1.001
        assert info.next_run == int(info.next_run)
        assert info.next_unix_ns == int(info.next_run) * 1_000_000_000
        # the first occurrence is materialized at once, scheduled, with its reservation
        assert await s.status(info.last_task_id) == "scheduled"
        first = await s.handle(info.last_task_id)
        assert first is not None
        expected_key = (
            "k@" + dt.datetime.fromtimestamp(info.next_run, dt.UTC).strftime("%Y-%m-%dT%H:%M:%S") + "Z"
        )
        assert await s.status(expected_key) == "scheduled"
        assert (await s.list_recurring()) == [info]
        done = await run_until(events, lambda ev: ev.status == "succeeded" and len(ex.started) >= 3)
        ok = [ev for ev in done if ev.status == "succeeded"]
        assert ok[0].key == expected_key and ok[0].id == first.id
        keys = [ev.key for ev in ok]
        assert all(k is not None and OCCURRENCE_KEY.match(k) for k in keys)
        assert len(set(keys)) == len(keys)
        stamps = [dt.datetime.strptime(k[2:], "%Y-%m-%dT%H:%M:%SZ") for k in keys]  # type: ignore[index]
        assert all((b - a).total_seconds() == 1 for a, b in itertools.pairwise(stamps))
        # each occurrence started at its second, within the default tolerance
        for k, st in zip(keys, stamps):
            due = st.replace(tzinfo=dt.UTC).timestamp()
            assert due - 0.005 <= ex.times[k] <= due + 1.0  # type: ignore[index]
        listed = await s.list_recurring()
        assert len(listed) == 1 and listed[0].next_run is not None
        assert listed[0].next_run > stamps[-1].replace(tzinfo=dt.UTC).timestamp()
        assert await s.status(listed[0].last_task_id) in ("scheduled", "ready", "running", "succeeded")
        assert await s.remove_recurring("r") is True
        assert await s.remove_recurring("r") is False
        assert await s.list_recurring() == []


async def test_remove_recurring_keeps_materialized_occurrence() -> None:
    ex = KeyedGate()
    clock = VirtualClock(1_000_000.0)
    async with Scheduler([pool(executor=ex, min=2, max=4)], clock=clock) as s:
        info = await s.add_recurring("r", EVERY_SECOND, "tick", key="k")
        assert await s.remove_recurring("r") is True
        h = await s.handle(info.last_task_id)
        assert h is not None
        clock.advance(1.0)  # (virtual time) the materialized occurrence's start
        assert await wait(h) == ex.started[0]
        submitted = (await s.snapshot()).totals["submitted"]
        clock.advance(1.3)  # past the next second: no new occurrence may appear
        await settle()
        assert (await s.snapshot()).totals["submitted"] == submitted == 1
        assert ex.started == [ex.started[0]]


async def test_add_recurring_same_name_replaces() -> None:
    async with Scheduler([pool(max=4)]) as s:
        await s.add_recurring("r", "0 0 * * *", "a")
        info = await s.add_recurring("r", "@hourly", "b", overlap="allow")
        listed = await s.list_recurring()
        assert len(listed) == 1
        assert listed[0].cron == "@hourly" and listed[0].overlap == "allow"
        assert listed[0] == info
        # the replaced schedule's occurrence (next midnight) stays the one ahead: the new
        # schedule's first occurrence is the first hour after it (docs/reference/behaviour.md#cron, one per
        # instant)
        nxt = listed[0].next_run
        assert nxt is not None and nxt % 86400 == 0 and 0 < nxt - time.time() <= 86400
        assert (await s.snapshot()).pool("default").pending == 1
        await s.remove_recurring("r")


@pytest.mark.parametrize(
    ("cron", "tz"),
    [
        ("*/5 * * * *", None),
        ("0 9 * * MON-FRI", "Europe/Berlin"),
        ("0 0 L * *", None),
        ("0 0 LW * *", "Europe/Berlin"),  # the last weekday of the month
        ("0 0 ? * 1#2", "America/New_York"),
        ("30 0 12 * * ? *", None),  # 7 fields: seconds first, trailing year
        ("@daily", None),
        ("@midnight", "Asia/Tokyo"),
        ("@weekly", None),
        ("@monthly", None),
        ("@yearly", None),
    ],
)
async def test_cron_syntax_accepted(cron: str, tz: str | None) -> None:
    async with Scheduler([pool(max=4)]) as s:
        info = await s.add_recurring("r", cron, None, tz=tz)
        assert info.tz == tz
        assert info.next_run is not None and info.next_run > time.time()


@pytest.mark.parametrize(
    ("cron", "tz"),
    [
        ("not a cron", None),
        ("* * *", None),
        ("61 * * * *", None),
        ("* * * * * * * *", None),
        ("", None),
        ("@sometimes", None),
        ("* * * * *", "Mars/Olympus"),
        ("* * * * *", "not a zone"),
    ],
)
async def test_invalid_cron_or_tz_is_configuration_error(cron: str, tz: str | None) -> None:
    async with Scheduler([pool()]) as s:
        with pytest.raises(SchedulerError) as ei:
            await s.add_recurring("r", cron, None, tz=tz)
        assert not isinstance(ei.value, SubmitError)
        assert str(ei.value).startswith("configuration error: ")
        assert isinstance(ei.value, ConfigurationError) and ei.value.code is None
        assert await s.list_recurring() == []


@pytest.mark.parametrize(
    ("cron", "message"),
    [
        ("61 * * * *", "invalid cron '61 * * * *': minute value 61 out of range 0-59"),
        ("* * * * FOO", "invalid cron '* * * * FOO': invalid day-of-week value 'FOO'"),
        ("* * * *", "invalid cron '* * * *': expected 5, 6 or 7 fields, got 4"),
        ("", "invalid cron '': empty expression"),
    ],
)
async def test_invalid_cron_message(cron: str, message: str) -> None:
    """The expression as written and a short reason (not the parser's rewritten field list)."""
    async with Scheduler([pool()]) as s:
        with pytest.raises(SchedulerError) as ei:
            await s.add_recurring("r", cron, None)
        assert str(ei.value) == f"configuration error: {message}"


async def test_unknown_pool_is_configuration_error() -> None:
    async with Scheduler([pool()]) as s:
        with pytest.raises(SchedulerError) as ei:
            await s.add_recurring("r", "* * * * *", None, pool="x")
        assert str(ei.value) == "configuration error: unknown pool 'x'"
        assert isinstance(ei.value, ConfigurationError) and ei.value.code == "unknown_pool"
        copy = pickle.loads(pickle.dumps(ei.value))  # (errors are picklable)
        assert (type(copy), str(copy), copy.code) == (ConfigurationError, str(ei.value), "unknown_pool")
        assert await s.list_recurring() == []


@pytest.mark.parametrize("overlap", ["Skip", "never", "", None, 1, "queue-on-success"])
async def test_invalid_overlap(overlap: Any) -> None:
    async with Scheduler([pool()]) as s:
        with pytest.raises(ValueError) as ei:
            await s.add_recurring("r", "* * * * *", None, overlap=overlap)
        assert str(ei.value) == "overlap must be 'skip', 'allow', 'queue' or 'queue_on_success'"
        assert await s.list_recurring() == []


async def test_recurring_task_field_validation() -> None:
    async with Scheduler([pool()]) as s:
        with pytest.raises(ValueError):
            await s.add_recurring("r", "* * * * *", None, tolerance=-1)
        with pytest.raises(ValueError):
            await s.add_recurring("r", "* * * * *", None, on_miss="never")
        with pytest.raises(ValueError):
            await s.add_recurring("r", "* * * * *", None, priority="urgent")
        assert await s.list_recurring() == []


async def test_recurring_before_start_raises() -> None:
    s = Scheduler([pool()])
    for call in (
        s.add_recurring("r", "* * * * *", None),
        s.remove_recurring("r"),
        s.list_recurring(),
    ):
        with pytest.raises(SchedulerError) as ei:
            await call
        assert isinstance(ei.value, RuntimeError)


async def test_overlap_skip_never_runs_concurrently() -> None:
    """Two occurrences come due while the first runs: both skipped (not just the first)."""
    ex = KeyedGate(hold=True)
    async with Scheduler([pool(executor=ex, min=4, max=10)]) as s:
        events = s.events()
        await s.add_recurring("r", EVERY_SECOND, None, key="k", overlap="skip")
        await wait(ex.first_started.wait())
        ended: list[StatusEvent] = []

        def two_more_ended(ev: StatusEvent) -> bool:
            if ev.key != ex.started[0]:
                ended.append(ev)
            return len(ended) >= 2

        # the next two occurrences come due while the first is still held: both must be skipped
        await run_until(events, two_more_ended)
        ex.release.set()
        await s.remove_recurring("r")
        assert [ev.status for ev in ended] == ["skipped", "skipped"]
        assert ex.max_running == 1, ex.started


async def test_overlap_skip_skips_while_previous_runs() -> None:
    ex = KeyedGate(hold=True)
    async with Scheduler([pool(executor=ex, min=4, max=10)]) as s:
        events = s.events()
        await s.add_recurring("r", EVERY_SECOND, None, key="k", overlap="skip")
        await wait(ex.first_started.wait())
        seen = await run_until(events, lambda ev: ev.status == "skipped")
        skipped = seen[-1]
        assert skipped.message == "previous occurrence still running"
        assert skipped.key is not None and OCCURRENCE_KEY.match(skipped.key)
        assert skipped.key > ex.started[0]
        assert (await s.snapshot()).totals["skipped"] >= 1
        ex.release.set()
        await s.remove_recurring("r")
        assert ex.max_running == 1


async def test_overlap_allow_runs_concurrently() -> None:
    ex = KeyedGate(hold=True)
    async with Scheduler([pool(executor=ex, min=4, max=10)]) as s:
        events = s.events()
        await s.add_recurring("r", EVERY_SECOND, None, key="k", overlap="allow")
        await wait(ex.first_started.wait())
        seen = await run_until(events, lambda ev: ev.status == "succeeded")
        assert ex.max_running == 2  # the second ran while the first was held
        assert seen[-1].key != ex.started[0]
        assert not any(ev.status == "skipped" for ev in seen)
        ex.release.set()
        await s.remove_recurring("r")


async def test_overlap_queue_chains_occurrences() -> None:
    ex = KeyedGate(hold=True)
    async with Scheduler([pool(executor=ex, min=4, max=10)], emit_transitions=True) as s:
        events = s.events()
        await s.add_recurring("r", EVERY_SECOND, None, key="k", overlap="queue")
        await wait(ex.first_started.wait())
        first_key = ex.started[0]
        # the next occurrence exists, blocked on the running one, and stays blocked past its start
        info = (await s.list_recurring())[0]
        await run_until(events, lambda ev: ev.id > info.last_task_id)  # one more materialized
        assert len(ex.started) == 1
        assert await s.status(info.last_task_id) == "blocked"
        ex.release.set()
        seen = await run_until(events, lambda ev: ev.status == "succeeded" and ev.id == info.last_task_id)
        assert ex.max_running == 1
        ok = [ev.key for ev in seen if ev.status == "succeeded"]
        assert ok[0] == first_key
        await s.remove_recurring("r")


async def test_overlap_queue_on_success_breaks_the_chain() -> None:
    ex = KeyedGate(hold=True, fail_first=True)
    async with Scheduler([pool(executor=ex, min=4, max=10)]) as s:
        events = s.events()
        info = await s.add_recurring("r", EVERY_SECOND, None, key="k", overlap="queue_on_success")
        first_id = info.last_task_id
        await wait(ex.first_started.wait())

        # wait until the second occurrence exists (blocked on the first), then fail the first
        async def next_materialized() -> None:
            while (await s.list_recurring())[0].last_task_id == first_id:
                await asyncio.sleep(0.02)

        await wait(next_materialized())
        second_id = (await s.list_recurring())[0].last_task_id
        assert await s.status(second_id) == "blocked"
        ex.release.set()
        seen = await run_until(events, lambda ev: ev.id == second_id)
        assert (seen[-1].status, seen[-1].message) == ("skipped", f"dependency {first_id} ended as failed")
        # the chain stays broken: the next occurrence is skipped too
        third = await run_until(events, lambda ev: ev.id > second_id)
        assert third[-1].status == "skipped"
        assert ex.started == [ex.started[0]]
        await s.remove_recurring("r")


async def test_recurring_conflicts_are_dropped_and_counted() -> None:
    async with Scheduler([pool(max=2)]) as s:  # limit 1
        blocker = await s.submit("blocker", start_in=30, duration_hint=1, tolerance=1)
        info = await s.add_recurring("r", "*/10 * * * * *", None, duration_hint=60)
        # the first occurrence overlaps the blocker's window: dropped and counted once; the
        # schedule tries the following one when the dropped one comes due (docs/reference/behaviour.md#cron)
        assert (await s.snapshot()).totals["recurring_conflicts"] == 1
        assert info.last_task_id == 0
        assert info.next_run is not None and info.next_run % 10 == 0
        assert info.next_run <= time.time() + 10
        assert (await s.snapshot()).pool("default").pending == 1  # the blocker only
        assert await s.status(blocker.id) == "scheduled"
        await s.remove_recurring("r")


async def test_a_task_submitted_to_two_schedulers_runs_in_its_pool_in_each():
    """Task objects carry resolved options: a second scheduler (other pool order) re-resolves."""
    from cronoq import Pool, Scheduler, Task

    seen: list[tuple[str, str]] = []

    def executor(tag: str):
        async def run(ctx, payload):
            seen.append((tag, ctx.pool))
            return payload

        return run

    task = Task("x", pool="b")
    one = Scheduler([Pool("a", executor("A")), Pool("b", executor("A"))])
    two = Scheduler([Pool("b", executor("B"))])
    async with one, two:
        (h1,) = await one.submit_batch([task])
        (h2,) = await two.submit_batch([task])
        assert await h1 == "x" and await h2 == "x"
        (h3,) = await one.submit_batch([task])
        assert await h3 == "x"
    assert sorted(seen) == [("A", "b"), ("A", "b"), ("B", "b")]
