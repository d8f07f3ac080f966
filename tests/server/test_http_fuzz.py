"""Property-based fuzzing of the HTTP/JSON API from its own OpenAPI document (schemathesis).

A real uvicorn server runs the HTTP app on 127.0.0.1 (ephemeral port) in a thread with its own
event loop, where the ServerApp (memory store) leads and a fake worker completes every lease.
Every operation of ``/openapi.json`` gets a bounded number of generated requests (valid and
invalid); no request may produce a 5xx other than the documented 504 of a timed-out wait
(``limits.max_wait_s`` is tiny, so waits end quickly).  SSE (``/v1/events``) is left out: a
stream never ends by itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("starlette")
uvicorn = pytest.importorskip("uvicorn")
schemathesis = pytest.importorskip("schemathesis")

from hypothesis import HealthCheck, settings  # noqa: E402

from cronoq.server.http_api import create_http_app  # noqa: E402
from cronoq.server.openapi import openapi_document  # noqa: E402

from .test_http_support import FakeWorker, make_app  # noqa: E402

EXTRA = """
[limits]
max_wait_s = 0.2
max_http_body_bytes = 65536

[[resources]]
name = "db"
kind = "semaphore"
permits = 2
"""

schema = schemathesis.openapi.from_dict(openapi_document(None))
schema.config.generation.update(
    modes=list(schemathesis.GenerationMode),
    max_examples=6,
    database="none",
)


class _ServerThread:
    """uvicorn + a led ServerApp on a private loop in a daemon thread."""

    def __init__(self) -> None:
        self.ready = threading.Event()
        self.port = 0
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, name="http-fuzz-server", daemon=True)
        self.server: Any = None
        self.loop: asyncio.AbstractEventLoop | None = None

    def _run(self) -> None:
        try:
            asyncio.run(self._main())
        except BaseException as e:  # pragma: no cover - reported by the fixture
            self.error = e
            self.ready.set()

    async def _main(self) -> None:
        self.loop = asyncio.get_running_loop()
        app = make_app(EXTRA)
        await app.lead()
        worker = FakeWorker(app, slots=8)
        web = create_http_app(app)
        config = uvicorn.Config(web, host="127.0.0.1", port=0, log_level="warning", lifespan="off")
        self.server = uvicorn.Server(config)
        self.server.install_signal_handlers = lambda: None  # not the main thread
        task = asyncio.get_running_loop().create_task(self.server.serve())
        while not self.server.started:
            if task.done():
                task.result()
            await asyncio.sleep(0.01)
        self.port = self.server.servers[0].sockets[0].getsockname()[1]
        self.ready.set()
        try:
            await task
        finally:
            await worker.close()
            await app.stop()

    def stop(self) -> None:
        if self.server is not None and self.loop is not None:
            self.loop.call_soon_threadsafe(setattr, self.server, "should_exit", True)
        self.thread.join(30)


@pytest.fixture(scope="module")
def base_url() -> Iterator[str]:
    srv = _ServerThread()
    srv.thread.start()
    assert srv.ready.wait(30), "fuzz server did not start"
    if srv.error is not None:
        raise srv.error
    try:
        yield f"http://127.0.0.1:{srv.port}"
    finally:
        srv.stop()


@schema.exclude(path="/v1/events").parametrize()
@settings(
    max_examples=6,
    deadline=None,
    suppress_health_check=list(HealthCheck),
    database=None,
)
def test_no_server_errors(case: Any, base_url: str) -> None:
    with contextlib.suppress(Exception):
        # hypothesis may hand over header values that `requests` refuses to send
        case.headers = {k: v for k, v in (case.headers or {}).items() if k.lower() != "host"}
    response = case.call(base_url=base_url, timeout=10)
    status = response.status_code
    assert status < 500 or status in (504,), (
        f"{case.method} {case.formatted_path} → {status}: {response.text[:500]}"
    )
    ct = response.headers.get("content-type", "")
    ct = ct[0] if isinstance(ct, list) and ct else ct
    if status >= 400 and isinstance(ct, str) and ct.startswith("application/json"):
        body = response.json()
        assert isinstance(body, dict) and "error" in body and "code" in body, body
