"""``BlockingClient`` and the blocking named-task calls against a real ``cronoq serve`` and a
real ``cronoq worker blocking_app:app`` subprocess, called from many threads at once."""

from __future__ import annotations

import inspect
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from blocking_app import app, double, fail
from tests.server.procs import ServerProc, serving_app

from cronoq import SchedulerError, TaskFailed
from cronoq.client import BlockingClient, Client, ClientError
from cronoq.errors import InvalidSubmission

HERE = Path(__file__).resolve().parent
CLI = [sys.executable, "-m", "cronoq.cli"]

SERVER_TOML = """
[[pools]]
name = "default"
max = 8
retry = {max_attempts = 1}

[[pools]]
name = "idle"
"""


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProc]:
    directory = tmp_path_factory.mktemp("blocking")
    with serving_app(
        directory, SERVER_TOML, name="blocking", app_ref="blocking_app:app", app_dir=HERE, slots=8
    ) as (sp, _):
        yield sp


@pytest.fixture
def client(server: ServerProc) -> Iterator[BlockingClient]:
    with BlockingClient(server.grpc) as c:
        app.bind(c)
        try:
            yield c
        finally:
            app.bind(None)


def _public(cls: type) -> dict[str, object]:
    return {n: v for n, v in vars(cls).items() if not n.startswith("_")}


def test_every_call_of_client_has_a_blocking_form() -> None:
    """Fails when Client gains a public method BlockingClient lacks (keep them in sync)."""
    missing = sorted(set(_public(Client)) - set(_public(BlockingClient)))
    assert not missing, f"BlockingClient lacks {missing}: add `name = blocking(Client.name)`"
    for name, fn in _public(Client).items():
        if inspect.iscoroutinefunction(fn):
            mine = getattr(BlockingClient, name)
            assert inspect.signature(mine) == inspect.signature(fn), name
            assert not inspect.iscoroutinefunction(mine), name
            if name != "close":  # (its own: it also stops the loop thread)
                assert mine.__doc__ == fn.__doc__, name

    # the constructor takes what Client's does (failover_wait included)
    assert list(inspect.signature(BlockingClient).parameters) == list(inspect.signature(Client).parameters)


def test_calls_from_many_threads(client: BlockingClient) -> None:
    def one(i: int) -> tuple[int, str]:
        sub = client.submit({"i": i}, pool="idle", key=f"many-{i}")
        return sub.id, client.get(sub.id).status

    with ThreadPoolExecutor(16) as ex:
        got = list(ex.map(one, range(64)))
    ids = [i for i, _ in got]
    assert len(set(ids)) == 64
    assert {s for _, s in got} == {"ready"}
    listed = list(client.iter_tasks(pools="idle", limit=10))
    assert {t.id for t in listed} == set(ids)
    assert client.cancel_where(pools=["idle"]).acted == 64
    assert client.list_tasks(pools="idle", statuses="ready").tasks == []


def test_wait_and_watch(client: BlockingClient) -> None:
    with client.watch(pools="default") as events:
        sub = client.submit({"args": [20], "kwargs": {}}, pool="default", kind="blocking.double")
        result = client.wait(sub.id, timeout=30)
        assert (result.status, result.json()) == ("succeeded", 40)
        event = events.next(timeout=30)
        assert (event.id, event.status) == (sub.id, "succeeded")


def test_named_tasks_submit_sync_from_threads(client: BlockingClient) -> None:
    def one(i: int) -> int:
        return double.submit_sync(i).result(timeout=30)

    with ThreadPoolExecutor(8) as ex:
        assert list(ex.map(one, range(32))) == [2 * i for i in range(32)]
    task_id = double.options(key="enq-1").enqueue_sync(5)
    assert client.wait(task_id, timeout=30).json() == 10


def test_named_task_failure_and_bad_arguments(client: BlockingClient) -> None:
    handle = fail.submit_sync("boom")
    with pytest.raises(TaskFailed) as e:
        handle.result(timeout=30)
    assert "boom" in e.value.message
    before = client.snapshot().totals.submitted
    with pytest.raises(InvalidSubmission):
        double.submit_sync("not an int")  # type: ignore[arg-type]
    assert client.snapshot().totals.submitted == before  # nothing was sent


def test_closed_client_and_unbound_app(server: ServerProc) -> None:
    c = BlockingClient(server.grpc)
    c.close()
    c.close()  # idempotent
    with pytest.raises(ClientError) as e:
        c.snapshot()
    assert e.value.code == "cancelled"
    with pytest.raises(SchedulerError, match=r"app\.bind"):
        double.submit_sync(1)


async def test_sync_calls_on_the_loop_thread_are_refused(server: ServerProc) -> None:
    async with Client(server.grpc) as c:
        app.bind(c)  # bound inside this loop: blocking calls must come from other threads
        try:
            with pytest.raises(SchedulerError, match="await"):
                double.submit_sync(1)
        finally:
            app.bind(None)


async def test_async_calls_from_another_loop_reach_the_blocking_clients(client: BlockingClient) -> None:
    """An async view (its own loop) awaiting a task of an app bound to a BlockingClient."""
    handle = await double.submit(21)
    assert await handle == 42
    assert client.wait(await double.enqueue(4), timeout=30).json() == 8
    [h] = await app.submit_batch([double.spec(5)])
    assert await h == 10


def test_lazy_start_and_a_forked_child_gets_its_own_loop(
    server: ServerProc, monkeypatch: pytest.MonkeyPatch
) -> None:
    import threading

    import cronoq.client.blocking as blocking_module

    before = {t.name for t in threading.enumerate()}
    c = BlockingClient(server.grpc)
    assert c.targets == [server.grpc]
    assert "cronoq-client" not in {t.name for t in threading.enumerate()} - before  # nothing started
    app.bind(c)
    try:
        assert double.submit_sync(1).id > 0
        first_loop = c.runner.loop
        real_pid = blocking_module.os.getpid()
        # as in a child forked after the first call: a new process id → a new loop and channel
        monkeypatch.setattr(blocking_module.os, "getpid", lambda: real_pid + 1)
        assert c.snapshot().pools
        assert c.runner.loop is not first_loop
        assert double.submit_sync(2).result(timeout=30) == 4  # the app's target follows it
    finally:
        app.bind(None)
        c.close()
