"""``@app.lifespan`` and ``ctx.state``: under the test kit (the real scheduler on virtual time)
and a real ``cronoq worker MODULE:APP`` subprocess; call hooks around task functions."""

from __future__ import annotations

import contextlib
import sys
import threading
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

import cronoq
from cronoq import TaskContext
from cronoq.tasks.convert import TaskDefinitionError
from cronoq.testing import eager, run

HERE = Path(__file__).resolve().parent


def _app_with_lifespan(log: list[str]) -> tuple[cronoq.App, cronoq.TaskDefinition[[], object]]:
    app = cronoq.App("ls")

    @app.lifespan
    @contextlib.asynccontextmanager
    async def resources() -> AsyncIterator[dict[str, int]]:
        log.append("enter")
        yield {"answer": 42}
        log.append("exit")

    @app.task(name="ls.read")
    async def read(ctx: TaskContext) -> object:
        return ctx.state["answer"]

    return app, read


async def test_state_under_the_test_kit_entered_once() -> None:
    log: list[str] = []
    app, read = _app_with_lifespan(log)
    async with run(app):
        assert app.state == {"answer": 42}
        handles = [await read.submit() for _ in range(5)]
        assert [await h for h in handles] == [42] * 5
        async with app.scheduler(["other"]) as nested:  # a second scheduler in the process shares it
            assert nested.state == {"answer": 42}
        assert log == ["enter"]
    assert log == ["enter", "exit"]
    assert app.state is None


async def test_a_failing_lifespan_fails_the_start() -> None:
    app = cronoq.App("bad")

    @app.lifespan
    async def broken() -> AsyncIterator[None]:
        raise RuntimeError("database unreachable")
        yield

    with pytest.raises(RuntimeError, match="database unreachable"):
        async with run(app):
            pass
    assert app.state is None


async def test_without_a_lifespan_state_is_none() -> None:
    app = cronoq.App("plain")

    @app.task(name="plain.read")
    async def read(ctx: TaskContext) -> object:
        return ctx.state

    async with run(app):
        assert await (await read.submit()) is None


async def test_eager_tasks_see_the_running_lifespan() -> None:
    app, read = _app_with_lifespan([])
    async with app.lifespan_context() as state:
        assert state == {"answer": 42}
        with eager(app):
            assert await (await read.submit()) == 42


def test_bad_lifespans_are_refused_at_decoration() -> None:
    app = cronoq.App("refuse")

    with pytest.raises(TaskDefinitionError, match="async context manager"):

        @app.lifespan
        async def not_a_cm() -> None:
            pass

    @app.lifespan
    async def first() -> AsyncIterator[None]:
        yield

    with pytest.raises(TaskDefinitionError, match="already has a lifespan"):

        @app.lifespan
        async def second() -> AsyncIterator[None]:
            yield


class _Hook:
    def __init__(self) -> None:
        self.threads: list[tuple[str, int]] = []

    @contextlib.contextmanager
    def sync_context(self) -> Iterator[None]:
        self.threads.append(("sync", threading.get_ident()))
        yield

    @contextlib.asynccontextmanager
    async def async_context(self) -> AsyncIterator[None]:
        self.threads.append(("async", threading.get_ident()))
        yield


async def test_call_hooks_run_where_the_function_runs() -> None:
    app = cronoq.App("hooks")
    hook = _Hook()
    app.add_call_hook(hook)

    @app.task(name="hooks.plain")
    def plain() -> int:
        return threading.get_ident()

    @app.task(name="hooks.coro")
    async def coro() -> int:
        return threading.get_ident()

    async with run(app):
        plain_thread = await (await plain.submit())
        coro_thread = await (await coro.submit())
    assert hook.threads == [("sync", plain_thread), ("async", coro_thread)]
    assert plain_thread != coro_thread  # the plain function ran in a pool thread, inside the hook
    with pytest.raises(ValueError, match="sync_context"):
        app.add_call_hook(object())  # type: ignore[arg-type]


@pytest.fixture
def worker_log(tmp_path: Path) -> Path:
    return tmp_path / "lifespan.log"


def test_a_real_worker_enters_the_lifespan_once(tmp_path: Path, worker_log: Path) -> None:
    from tests.server.procs import child_env, start_server, start_worker, stop_worker

    from cronoq.client import BlockingClient

    sp = start_server(tmp_path, '[[pools]]\nname = "default"\nmax = 4\n', name="ls")
    env = dict(child_env(), LIFESPAN_LOG=str(worker_log))
    argv = [
        sys.executable,
        "-m",
        "cronoq.cli",
        "worker",
        "lifespan_app:app",
        "--pool",
        "default",
        "--slots",
        "4",
    ]
    worker = start_worker(tmp_path / "w.log", [*argv, "--app-dir", str(HERE), "--server", sp.grpc], env=env)
    try:
        with BlockingClient(sp.grpc) as client:
            subs = [client.submit({"args": [], "kwargs": {}}, kind="lifespan.which") for _ in range(6)]
            subs.append(client.submit({"args": [], "kwargs": {}}, kind="lifespan.which_sync"))
            outs = [client.wait(s.id, timeout=30).json() for s in subs]
        assert outs[:6] == [["db-pool", worker.pid]] * 6
        assert outs[6] == "db-pool"
        assert worker_log.read_text() == f"enter {worker.pid}\n"
    finally:
        stop_worker(worker, tmp_path / "w.log")
        assert sp.terminate() == 0
    assert worker_log.read_text() == f"enter {worker.pid}\nexit {worker.pid}\n"


def test_one_app_runs_on_successive_loops() -> None:
    """Each asyncio.run (a test, a script) is a new loop: the lifespan enters anew on each."""
    import asyncio

    log: list[str] = []
    app, read = _app_with_lifespan(log)

    async def once() -> object:
        async with run(app):
            return await (await read.submit())

    assert [asyncio.run(once()) for _ in range(2)] == [42, 42]
    assert log == ["enter", "exit", "enter", "exit"]


async def test_concurrent_starts_enter_once() -> None:
    import asyncio

    log: list[str] = []
    app, _ = _app_with_lifespan(log)
    a, b = app.scheduler(["a"]), app.scheduler(["b"])
    await asyncio.gather(a.start(), b.start())
    assert log == ["enter"] and a.state is b.state
    await a.shutdown()
    assert log == ["enter"]  # b still runs
    await b.shutdown()
    assert log == ["enter", "exit"]
