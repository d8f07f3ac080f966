"""``cronoq_lifespan`` with a FastAPI app driven by its ``TestClient`` against a real
``cronoq serve`` and a real ``cronoq worker web_tasks:app`` subprocess."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.server.procs import ServerProc, start_worker, stop_worker
from web_tasks import app as tasks_app
from web_tasks import greet

from cronoq import SchedulerError
from cronoq.client import Client
from cronoq.contrib.asgi import cronoq_lifespan

fastapi = pytest.importorskip("fastapi")
from fastapi.testclient import TestClient  # noqa: E402

HERE = Path(__file__).resolve().parent


@pytest.fixture(scope="module")
def worker(server: ServerProc, tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    log = tmp_path_factory.mktemp("web") / "worker.log"
    argv = [sys.executable, "-m", "cronoq.cli", "worker", "web_tasks:app", "--pool", "web", "--slots", "4"]
    proc = start_worker(log, [*argv, "--app-dir", str(HERE), "--server", server.grpc])
    try:
        yield
    finally:
        stop_worker(proc, log)


def make_api(server: ServerProc, events: list[str]) -> Any:
    @contextlib.asynccontextmanager
    async def own(api: Any) -> AsyncIterator[dict[str, str]]:
        events.append("own enter")
        yield {"greeting": "hi"}
        events.append("own exit")

    api = fastapi.FastAPI(lifespan=cronoq_lifespan(tasks_app, server=server.grpc, then=own))

    @api.post("/greet/{name}")
    async def greet_async(name: str, request: fastapi.Request) -> dict[str, Any]:
        handle = await greet.submit(name)
        assert isinstance(request.state.cronoq, Client)
        return {"id": handle.id, "result": await handle, "own": request.state.greeting}

    @api.post("/greet-sync/{name}")
    def greet_sync(name: str) -> dict[str, Any]:  # a def endpoint: runs in a worker thread
        handle = greet.submit_sync(name)
        return {"id": handle.id, "result": handle.result(timeout=30)}

    return api


def test_fastapi_submits_through_the_lifespan(server: ServerProc, worker: None) -> None:
    events: list[str] = []
    with TestClient(make_api(server, events)) as tc:
        assert events == ["own enter"]
        r = tc.post("/greet/ada")
        assert r.status_code == 200, r.text
        assert r.json()["result"] == "hello ada" and r.json()["own"] == "hi"
        r = tc.post("/greet-sync/bob")
        assert r.status_code == 200, r.text
        assert r.json()["result"] == "hello bob"
    assert events == ["own enter", "own exit"]
    with pytest.raises(SchedulerError):  # unbound again once the web app stopped
        greet.submit_sync("carol")


def test_bad_arguments() -> None:
    with pytest.raises(ValueError, match="server"):
        cronoq_lifespan(tasks_app, server="")
    with pytest.raises(ValueError, match=r"cronoq\.App"):
        cronoq_lifespan(["not an app"], server="127.0.0.1:1")  # type: ignore[list-item]
