"""Named tasks end to end: a real ``cronoq serve``, a real ``cronoq worker named_app:app``
subprocess, and the app bound to a Client (plus the CLI's ``submit --task`` and ``tasks``)."""

from __future__ import annotations

import datetime as dt
import json
import subprocess
import sys
import urllib.request
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from cronoq import TaskFailed
from cronoq.client import Client

from .named_app import Order, add, app, echo, fanout, flaky, shape, ship
from .procs import ServerProc, child_env, serving_app

HERE = Path(__file__).resolve().parent

SERVER_TOML = """
[[pools]]
name = "default"
max = 4
retry = {max_attempts = 3, initial_backoff_s = 0.05, max_backoff_s = 0.1}
"""


CLI = (sys.executable, "-m", "cronoq.cli")


def _cli(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CLI, *args],
        capture_output=True,
        text=True,
        env=child_env(),
        timeout=timeout,
    )


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServerProc, subprocess.Popen[bytes]]]:
    directory = tmp_path_factory.mktemp("named")
    with serving_app(
        directory, SERVER_TOML, name="named", app_ref="named_app:app", app_dir=HERE, slots=4
    ) as (sp, worker):
        yield sp, worker


@pytest.fixture
async def client(server: tuple[ServerProc, subprocess.Popen[bytes]]) -> AsyncIterator[Client]:
    async with Client(server[0].grpc) as c:
        app.bind(c)
        try:
            yield c
        finally:
            app.bind(None)


async def test_calls_through_a_server_to_a_remote_worker(client: Client) -> None:
    h = await add.submit(41)
    assert await h == 42 and h.done()
    assert await (await add.submit(1, y=2)) == 3
    placed = dt.datetime(2026, 5, 1, 12, tzinfo=dt.UTC)
    shipped = await (await ship.submit(Order(id=7, placed=placed), days=3))
    assert shipped == placed + dt.timedelta(days=3) and isinstance(shipped, dt.datetime)
    assert await (await flaky.submit("hi")) == {"word": "hi", "attempt": 2, "kind": "named.flaky"}
    assert await (await echo.submit("123")) == "123"  # a str stays a str (JSON output)
    tid = await add.options(key="named-key-1").enqueue(5)
    info = await client.get(tid)
    assert info.kind == "named.add" and info.key == "named-key-1"
    h1, h2 = await app.submit_batch([add.options(key="b1").spec(1), add.options(after="b1").spec(2)])
    assert (await h1, await h2) == (2, 3)


async def test_tuples_arrive_and_come_back_as_tuples(client: Client) -> None:
    h = await shape.submit((1, 2))
    assert await h == ("tuple", "1", "2")  # not the lists JSON carried


async def test_a_task_submits_tasks_on_the_worker(client: Client) -> None:
    # the worker process bound its own copy of the app to the server: no "nowhere to send tasks"
    assert await (await fanout.submit(3)) == [1, 2, 3]


async def test_outputs_say_they_are_json_over_http(
    client: Client, server: tuple[ServerProc, subprocess.Popen[bytes]]
) -> None:
    h = await echo.submit("123")
    assert await h == "123"
    with urllib.request.urlopen(f"http://{server[0].http}/v1/tasks/{h.id}/result", timeout=10) as r:
        body = json.loads(r.read())
    assert body["content_type"] == "application/json" and body["output"] == "123", body


async def test_unknown_tasks_wait_and_bad_arguments_fail_permanently_on_the_worker(client: Client) -> None:
    # the worker registered the app's task kinds: a kind it does not serve is never leased to
    # it (a rolling deploy may bring a worker that does: docs/how-to/deploys.md)
    sub = await client.submit({"args": [1]}, kind="named.nope")
    info = await client.get(sub.id)
    assert (info.status, info.waiting) == ("ready", "no connected worker serves task 'named.nope'")
    assert await client.cancel(sub.id)
    sub = await client.submit({"args": ["x"]}, kind="named.add")
    r = await client.wait(sub.id, timeout=30)
    assert (r.status, r.message) == ("failed", "task 'named.add', argument 'x': expected int, got 'x'")
    info = await client.get(sub.id)
    assert info.attempt == 1  # permanent: not retried
    h = await add.options(retry=None).submit(1)
    assert await h == 2
    bad = await client.submit(b"\xff", kind="named.add")
    with pytest.raises(TaskFailed, match="the payload is not JSON"):
        from cronoq.tasks import RemoteHandle

        await RemoteHandle(client, bad.id, False, lambda v: v)


def test_cli_submit_task_and_tasks_listing(server: tuple[ServerProc, subprocess.Popen[bytes]]) -> None:
    grpc = server[0].grpc
    r = _cli("submit", "--task", "named.add", "--args", "[20]", "--kwargs", '{"y": 22}', "--wait", "--json",
             "--server", grpc)  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["result"]["output"] == 42
    r = _cli("submit", "--task", "named.add", "--args", '["a"]', "--wait", "--server", grpc)
    assert r.returncode == 5 and "expected int, got 'a'" in r.stdout + r.stderr
    # with --app the call is checked before anything is sent, and the task's fields apply
    app_opts = ("--app", "named_app:app", "--app-dir", str(HERE))
    r = _cli("submit", "--task", "named.add", "--args", '["a"]', *app_opts, "--server", grpc)
    assert r.returncode == 2 and "argument 'x': expected int, got 'a'" in r.stderr
    # a kind set at decoration is what the task carries (the worker serves that kind, not the name)
    waiting = ("--wait", "--wait-timeout", "20s", "--json", "--server", grpc)
    r = _cli("submit", "--task", "named.resize", "--args", "[64]", *app_opts, *waiting)
    assert r.returncode == 0, r.stdout + r.stderr
    assert json.loads(r.stdout)["result"]["output"] == "resized to 64"
    r = _cli(
        "submit", "--task", "named.nope", "--app", "named_app:app", "--app-dir", str(HERE), "--server", grpc
    )
    assert r.returncode == 2 and "app 'named' has no task 'named.nope'" in r.stderr
    for bad, message in [
        (["--args", "{}"], "must be a JSON array"),
        (["--kwargs", "[1]"], "must be a JSON object"),
        (["--args", "[1", "--kwargs", "{}"], "not JSON"),
        (["--kind", "k"], "--task takes"),
    ]:
        r = _cli("submit", "--task", "named.add", *bad, "--server", grpc)
        assert r.returncode == 2 and message in r.stderr, r.stderr  # fmt: skip
    r = _cli("submit", "--args", "[1]", "--server", grpc)
    assert r.returncode == 2 and "go with --task" in r.stderr

    r = _cli("tasks", "named_app:app", "--app-dir", str(HERE), "--json")
    assert r.returncode == 0, r.stderr
    listing = json.loads(r.stdout)
    assert listing["app"] == "named"
    by_name = {t["name"]: t for t in listing["tasks"]}
    assert by_name["named.add"]["signature"] == "(x: int, y: int = 1) -> int"
    assert by_name["named.nightly_sum"]["recurring"][0]["cron"] == "0 3 * * *"
    r = _cli("tasks", "named_app:app", "--app-dir", str(HERE))
    assert r.returncode == 0 and "named.flaky" in r.stdout and "named.nightly: 0 3 * * *" in r.stdout
    r = _cli("tasks", "named_app:nope", "--app-dir", str(HERE))
    assert r.returncode == 2 and "has no attribute 'nope'" in r.stderr
    r = _cli("tasks", "named_app:Order", "--app-dir", str(HERE))
    assert r.returncode == 2 and "is not a cronoq.App" in r.stderr
    for _ in range(2):  # idempotent
        r = _cli("tasks", "named_app:app", "--app-dir", str(HERE), "--apply-recurring", "--server", grpc)
        assert r.returncode == 0 and "applied 1 recurring schedule: named.nightly" in r.stderr, r.stderr


async def test_apply_recurring_from_the_client(client: Client) -> None:
    assert await app.apply_recurring(client) == ["named.nightly"]
    assert await app.apply_recurring(client) == ["named.nightly"]
    names = [s.name for s in await client.list_recurring()]
    assert names.count("named.nightly") == 1
