"""cronoq.App: defining named tasks, calling them, and in-process dispatch by name."""

from __future__ import annotations

import asyncio
import datetime as dt
import sys
import threading
from pathlib import Path
from typing import Any

import pydantic
import pytest

import cronoq
from cronoq import (
    App,
    Dep,
    Permanent,
    Retryable,
    RetryPolicy,
    SchedulerError,
    SubmitError,
    TaskContext,
    TaskFailed,
)
from cronoq.tasks import NamedTask, TaskDefinition, TaskDefinitionError


class Opaque:
    """A class pydantic has no schema for."""


class Item(pydantic.BaseModel):
    sku: str
    qty: int


ADD = f"{__name__}.make_app.<locals>.add"  # the default name: "<module>.<qualname>"


def make_app() -> App:
    app = App("shop")

    @app.task
    async def add(x: int, y: int = 2) -> int:
        return x + y

    @app.task(name="shop.greet", priority="high", tags={"team": "web"})
    def greet(ctx: TaskContext, who: str) -> str:
        in_thread = threading.current_thread().name != "MainThread"
        return f"hi {who} from {in_thread} attempt {ctx.attempt} {ctx.kind}"

    @app.task(name="shop.reserve")
    async def reserve(item: Item, at: dt.datetime, *, key: str = "k", priority: int = 0) -> Item:
        return Item(sku=f"{item.sku}@{at.isoformat()}:{key}:{priority}", qty=item.qty * 2)

    return app


def test_definitions_are_registered_under_their_names() -> None:
    app = make_app()
    add = app.tasks[ADD]
    assert isinstance(add, TaskDefinition)
    assert add.kind == add.name
    assert app.tasks["shop.greet"].fields == {
        "priority": "high",
        "tags": {"team": "web"},
        "kind": "shop.greet",
    }
    assert app.tasks["shop.greet"].takes_context
    assert str(app.tasks["shop.greet"].signature) == "(who: str) -> str"
    assert asyncio.run(add(1, 2)) == 3  # t(...) calls the plain function
    with pytest.raises(TypeError):
        app.tasks["x"] = add  # type: ignore[index]
    assert "App('shop'" in repr(app)


def test_bad_definitions_fail_at_decoration() -> None:
    app = App("a")

    @app.task(name="t")
    def t(x: int) -> int:
        return x

    with pytest.raises(TaskDefinitionError, match="app 'a' already has a task named 't'"):
        app.task(name="t")(lambda: None)
    with pytest.raises(TaskDefinitionError, match="kind 't' is already the kind of task 't'"):
        app.task(name="u", kind="t")(lambda: None)
    with pytest.raises(ValueError, match="unexpected task field 'colour'"):
        app.task(colour="red")
    with pytest.raises(ValueError, match="unexpected task field 'key'"):
        app.task(key="k")
    with pytest.raises(ValueError, match="priority"):
        app.task(priority="urgent")
    with pytest.raises(TaskDefinitionError, match="applies to a function"):
        app.task(int)
    # a name that is the task's kind must be text a store holds (not at the first call)
    with pytest.raises(TaskDefinitionError, match=r"task 'b\\x00d': its name is its kind.*NUL"):
        app.task(name="b\x00d")(lambda: None)
    with pytest.raises(TaskDefinitionError, match=r"its name is its kind.*surrogate"):
        app.task(name="b\ud800d")(lambda: None)
    assert App("other").task(name="b\x00e", kind="ok")(lambda: None).kind == "ok"
    with pytest.raises(TaskDefinitionError, match="already a task"):
        app.task(t)

    def uses_opaque(o: Opaque) -> None: ...

    with pytest.raises(TaskDefinitionError, match="argument 'o': pydantic cannot handle"):
        app.task(uses_opaque)

    def unresolvable(o: NoSuchName) -> None:  # type: ignore[name-defined]  # noqa: F821
        ...

    with pytest.raises(
        TaskDefinitionError, match=r"cannot resolve the annotations .* name 'NoSuchName' is not defined"
    ):
        app.task(unresolvable)

    def ctx_late(x: int, ctx: TaskContext) -> None: ...

    with pytest.raises(TaskDefinitionError, match="only the first parameter may take the TaskContext"):
        app.task(ctx_late)

    def bad_default(x: int = "no") -> None:  # type: ignore[assignment]
        ...

    with pytest.raises(TaskDefinitionError, match="the default of argument 'x' does not fit"):
        app.task(bad_default)
    with pytest.raises(ValueError, match="non-empty string"):
        App("")
    assert list(app.tasks) == ["t"]  # nothing half-registered


def test_recurring_definitions_are_checked_at_decoration() -> None:
    app = App("a")

    @app.recurring("0 3 * * *", args=[5])
    @app.task(name="nightly")
    def nightly(n: int) -> int:
        return n

    (r,) = app.recurring_schedules
    assert (r.name, r.cron, r.task, r.payload) == (
        "nightly",
        "0 3 * * *",
        "nightly",
        {"args": [5], "kwargs": {}},
    )
    other = App("b").task(name="elsewhere")(lambda: None)
    with pytest.raises(TaskDefinitionError, match="unknown task 'elsewhere' in app 'a'"):
        app.recurring("* * * * *")(other)
    with pytest.raises(TaskDefinitionError, match=r"goes above @app\.task"):
        app.recurring("* * * * *")(lambda: None)  # type: ignore[arg-type]
    with pytest.raises(TaskDefinitionError, match="invalid cron '61 \\* \\* \\* \\*'"):
        app.recurring("61 * * * *")
    with pytest.raises(TaskDefinitionError, match="unknown time zone 'Mars/Olympus'"):
        app.recurring("* * * * *", tz="Mars/Olympus")
    with pytest.raises(TaskDefinitionError, match="overlap"):
        app.recurring("* * * * *", overlap="sometimes")
    with pytest.raises(TaskDefinitionError, match="already has a recurring schedule named 'nightly'"):
        app.recurring("0 4 * * *", args=[1])(nightly)
    with pytest.raises(TaskDefinitionError, match="missing a required argument: 'n'"):
        app.recurring("0 4 * * *", name="n2")(nightly)
    with pytest.raises(TaskDefinitionError, match="argument 'n': expected int"):
        app.recurring("0 4 * * *", name="n3", args=["x"])(nightly)
    with pytest.raises(ValueError, match="unexpected task field 'start_in'"):
        app.recurring("0 4 * * *", start_in=5)
    assert len(app.recurring_schedules) == 1


async def test_calls_run_in_process_dispatched_by_name() -> None:
    app = make_app()
    add = app.tasks[ADD]
    greet = app.tasks["shop.greet"]
    reserve = app.tasks["shop.reserve"]
    async with app.scheduler() as sched:
        assert isinstance(sched, cronoq.Scheduler) and sched.pools == ["default"]
        assert await (await add.submit(1)) == 3
        assert await (await add.submit(1, y=5)) == 6
        assert await (await greet.submit("bob")) == "hi bob from True attempt 1 shop.greet"
        at = dt.datetime(2024, 1, 1, tzinfo=dt.UTC)
        out = await (await reserve.submit(Item(sku="a", qty=2), at, key="mine", priority=7))
        assert out == Item(sku="a@2024-01-01T00:00:00+00:00:mine:7", qty=4)
        # a task argument named key/priority does not clash with the scheduling options
        h = await reserve.options(key="idem-1", priority="low").submit({"sku": "b", "qty": 1}, at.isoformat())
        assert (await h).qty == 2
        dup = await reserve.options(key="idem-1").submit({"sku": "c", "qty": 1}, at)
        assert dup.duplicate and dup.id == h.id
        tid = await add.enqueue(10, 20)
        assert isinstance(tid, int)
        assert await (await sched.handle(tid)) == 30  # type: ignore[misc]
        # the wire payload is plain JSON with the task name as kind
        h2 = await sched.submit({"args": [4], "kwargs": {"y": 1}}, kind=add.name)
        assert await h2 == 5


async def test_bad_calls_fail_before_anything_is_submitted() -> None:
    app = make_app()
    add = app.tasks[ADD]
    reserve = app.tasks["shop.reserve"]
    async with app.scheduler() as sched:
        cases: list[tuple[Any, str]] = [
            (lambda: add.submit("x"), "argument 'x': expected int, got 'x'"),
            (lambda: add.submit(), "missing a required argument: 'x'"),
            (lambda: add.submit(1, 2, 3), "too many positional arguments: it takes 2 (x, y), got 3"),
            (lambda: add.submit(1, z=3), "unexpected keyword argument 'z'"),
            (lambda: add.enqueue(1, y={1, 2}), "argument 'y': a value of type set is not JSON-serializable"),
            (lambda: add.submit(float("nan")), "argument 'x': nan is not JSON-serializable (JSON has no NaN"),
            (
                lambda: reserve.submit({"sku": 1}, "now"),
                "task 'shop.reserve', argument 'item': sku: Input should",
            ),
        ]
        for call, message in cases:
            with pytest.raises(SubmitError) as ei:
                await call()
            assert ei.value.code == "invalid" and isinstance(ei.value, ValueError)
            assert message in ei.value.message, ei.value.message
        with pytest.raises(ValueError, match="unexpected task field 'kind'"):
            add.options(kind="other")
        with pytest.raises(ValueError, match="deadline_in"):
            add.options(deadline_in=-1)
        with pytest.raises(SubmitError, match="argument 'x'"):
            await app.submit_batch([add.spec(1), add.spec("bad")])
        assert (await sched.snapshot()).totals["submitted"] == 0


async def test_worker_side_errors_are_permanent() -> None:
    app = make_app()
    async with app.scheduler() as sched:
        h = await sched.submit({"args": [1]}, kind="shop.unknown")
        with pytest.raises(
            TaskFailed, match=r"failed: unknown task 'shop.unknown' \(serves: shop.greet, shop.reserve"
        ):
            await h
        for payload, message in [
            ({"args": [1]}, "argument 'who': expected str, got 1"),
            ("text", "the payload must be a JSON object"),
            ({"args": {}}, "payload args must be a list"),
            ({"args": [], "x": 1}, "unexpected payload keys ['x']"),
            ({"args": []}, "missing a required argument: 'who'"),
        ]:
            h = await sched.submit(payload, kind="shop.greet", retry=RetryPolicy(max_attempts=3))
            with pytest.raises(TaskFailed) as ei:
                await h
            assert ei.value.status == "failed" and message in ei.value.message, ei.value.message
        assert (await sched.snapshot()).totals["retries"] == 0


async def test_returning_a_non_json_value_fails_the_attempt() -> None:
    app = App("a")

    @app.task(name="bad")
    async def bad() -> Any:
        return {1, 2}

    async with app.scheduler():
        with pytest.raises(TaskFailed, match="return value: a value of type set is not JSON-serializable"):
            await (await bad.submit())


async def test_retries_and_context() -> None:
    app = App("a")
    seen: list[int] = []

    @app.task(name="flaky", retry=RetryPolicy(max_attempts=3, initial_backoff=0.001))
    async def flaky(ctx: TaskContext, n: int) -> dict[str, int]:
        seen.append(ctx.attempt)
        if ctx.attempt < 3:
            raise Retryable("not yet")
        return {"n": n, "attempt": ctx.attempt}

    @app.task(name="doomed")
    def doomed() -> None:
        raise Permanent("no way")

    async with app.scheduler():
        assert await (await flaky.submit(7)) == {"n": 7, "attempt": 3}
        assert seen == [1, 2, 3]
        with pytest.raises(TaskFailed, match="no way"):
            await (await doomed.submit())


async def test_a_task_calling_sys_exit_fails_and_the_app_serves_on() -> None:
    """``sys.exit()`` in a named task (async, or plain in a thread) fails its attempt,
    retryably, with "SystemExit: 3"; the scheduler goes on (docs/reference/behaviour.md#reliability)."""
    app = App("a")
    seen: list[tuple[str, int]] = []

    @app.task(name="exits_async", retry=RetryPolicy(max_attempts=2, initial_backoff=0))
    async def exits_async(ctx: TaskContext, code: int) -> int:
        seen.append(("async", ctx.attempt))
        if code:
            sys.exit(code)
        return 0

    @app.task(name="exits_sync", retry=RetryPolicy(max_attempts=2, initial_backoff=0))
    def exits_sync(ctx: TaskContext, code: int) -> int:
        seen.append(("sync", ctx.attempt))
        if code:
            sys.exit(code)
        return 0

    async with app.scheduler():
        for task in (exits_async, exits_sync):
            with pytest.raises(TaskFailed) as ei:
                await asyncio.wait_for(await task.submit(3), 10)
            assert (ei.value.status, ei.value.message) == ("dead_lettered", "SystemExit: 3")
            assert await asyncio.wait_for(await task.submit(0), 10) == 0
    assert seen == [("async", 1), ("async", 2), ("async", 1), ("sync", 1), ("sync", 2), ("sync", 1)]


async def test_arguments_are_values_as_through_a_server() -> None:
    # in process the payload is not serialized: the layer copies containers, or a caller
    # reusing its list and an attempt consuming its argument would lose work (a remote
    # worker decodes fresh JSON every attempt), and a tuple would stay a tuple only here
    app = App("a")
    got: list[tuple[int, list[str]]] = []

    @app.task(name="batch")
    async def batch(items: list[str]) -> int:
        return len(items)

    @app.task(name="consume", retry=RetryPolicy(max_attempts=2, initial_backoff=0.001, jitter=False))
    async def consume(ctx: TaskContext, todo: list[str], point: tuple[int, ...]) -> tuple[str, ...]:
        got.append((ctx.attempt, list(todo)))
        done = []
        while todo:
            done.append(todo.pop())
            if ctx.attempt == 1:
                raise Retryable("crashed after the first item")
        return (type(point).__name__, *done)

    @app.task(name="keep")
    async def keep(items: list[str]) -> list[str]:
        return items

    one_slot = app.pool("default", min=1, max=1, autoscale=False)
    async with app.scheduler([one_slot]):
        buffer: list[str] = []
        handles = []
        for word in "abcdef":
            buffer.append(word)
            if len(buffer) == 3:
                handles.append(await batch.submit(buffer))
                buffer.clear()  # reused at once: the submitted tasks have not run yet
        assert [await h for h in handles] == [3, 3]
        assert await (await consume.submit(["x", "y", "z"], (1, 2))) == ("tuple", "z", "y", "x")
        assert got == [(1, ["x", "y", "z"]), (2, ["x", "y", "z"])]  # the retry got it whole
        kept = ["k"]
        h = await keep.submit(kept)
        first = await h
        first.append("mutated")
        assert await h == ["k"] and kept == ["k"]


async def test_specs_batch_and_dependencies() -> None:
    app = make_app()
    add = app.tasks[ADD]
    async with app.scheduler():
        first = add.options(key="first").spec(1)
        second = add.options(deps=[Dep("first")]).spec(2, y=3)
        assert isinstance(first, cronoq.Task) and isinstance(first, NamedTask)
        h1, h2 = await app.submit_batch([first, second])
        assert (await h1, await h2) == (3, 5)
        h3 = await add.options(after=h1.id).submit(0)
        assert await h3 == 2
        with pytest.raises(ValueError, match=r"t\.spec"):
            await app.submit_batch([cronoq.Task(1)])  # type: ignore[list-item]


async def test_targets_bind_and_precedence() -> None:
    app = make_app()
    add = app.tasks[ADD]
    with pytest.raises(
        SchedulerError, match=r"app 'shop' has nowhere to send tasks.*app.scheduler.*app.bind\(client\)"
    ):
        await add.submit(1)
    with pytest.raises(SchedulerError):
        await app.submit_batch([add.spec(1)])
    plain = cronoq.Scheduler([app.pool("default")])
    async with plain:
        app.bind(plain)
        assert await (await add.submit(1)) == 3
        async with app.scheduler() as inner:
            h = await add.submit(2)
            assert await h == 4
            assert await inner.handle(h.id) is not None
        assert (await plain.snapshot()).totals["submitted"] == 1
        app.bind(None)
    with pytest.raises(ValueError, match="bind takes"):
        app.bind(42)


async def test_pools_from_task_fields_and_explicit_pools() -> None:
    app = App("a")

    @app.task(name="io", pool="io")
    async def io() -> str:
        return "io"

    @app.task(name="cpu")
    async def cpu() -> str:
        return "cpu"

    assert [p.name for p in app.make_pools()] == ["default", "io"]
    async with app.scheduler([app.pool("default", max=2), "io"]) as sched:
        assert sched.pools == ["default", "io"]
        assert await (await io.submit()) == "io"
        assert await (await cpu.submit()) == "cpu"
        assert (await sched.snapshot()).pool("io").succeeded == 1  # type: ignore[union-attr]
    with pytest.raises(ValueError, match="pool names or Pool objects"):
        app.make_pools([3])  # type: ignore[list-item]


async def test_recurring_schedules_are_created_when_the_scheduler_starts() -> None:
    app = App("a")

    @app.recurring("*/5 * * * *", name="five", kwargs={"n": 1}, priority="low")
    @app.task(name="tick")
    def tick(n: int) -> int:
        return n

    async with app.scheduler() as sched:
        (info,) = await sched.list_recurring()
        assert info.name == "five"


async def test_durable_store_round_trip(tmp_path: Path) -> None:
    app = make_app()
    reserve = app.tasks["shop.reserve"]
    store = cronoq.SqliteStore(str(tmp_path / "q.db"))
    async with app.scheduler(store=store):
        at = dt.datetime(2024, 1, 1, tzinfo=dt.UTC)
        out = await (await reserve.submit(Item(sku="z", qty=1), at))
        assert out == Item(sku="z@2024-01-01T00:00:00+00:00:k:0", qty=2)


async def test_converted_handle_surface() -> None:
    app = make_app()
    reserve = app.tasks["shop.reserve"]
    async with app.scheduler():
        h = await reserve.submit(Item(sku="a", qty=1), dt.datetime(2024, 1, 1, tzinfo=dt.UTC))
        assert isinstance(h, cronoq.TaskHandle)
        out = await asyncio.wait_for(h.result(), 10)
        assert isinstance(out, Item) and h.done()
        assert not h.cancel()
        assert "ConvertedHandle" in repr(h)


async def test_a_kind_set_at_decoration_is_what_workers_dispatch_by() -> None:
    app = App("a")

    @app.task(name="a.resize", kind="resize-v2")
    async def resize(size: int) -> str:
        return f"{size}px"

    assert resize.kind == "resize-v2" and app.tasks["a.resize"] is resize
    async with app.scheduler() as sched:
        h = await resize.submit(128)
        assert await h == "128px"
        assert await (await sched.submit({"args": [64]}, kind="resize-v2")) == "64px"
        with pytest.raises(TaskFailed, match=r"unknown task 'a\.resize'"):
            await (await sched.submit({"args": [1]}, kind="a.resize"))
