"""The HTTP/JSON API over real sockets: uvicorn in the test's loop (real streaming, chunked
bodies), and one smoke test against a real ``cronoq serve`` process (tests/server/procs.py)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import shutil
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("starlette")
uvicorn = pytest.importorskip("uvicorn")
httpx = pytest.importorskip("httpx")

from cronoq.server.http_api import create_http_app  # noqa: E402

from .procs import http_call  # noqa: E402
from .test_http_support import FakeWorker, make_app  # noqa: E402


@contextlib.asynccontextmanager
async def uvicorn_server(extra: str = "") -> AsyncIterator[tuple[Any, str]]:
    app = make_app(extra)
    await app.lead()
    server = uvicorn.Server(
        uvicorn.Config(create_http_app(app), host="127.0.0.1", port=0, log_level="warning", lifespan="off")
    )
    server.install_signal_handlers = lambda: None
    task = asyncio.get_running_loop().create_task(server.serve())
    try:
        while not server.started:
            if task.done():
                task.result()
            await asyncio.sleep(0.01)
        port = server.servers[0].sockets[0].getsockname()[1]
        yield app, f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        await asyncio.wait_for(task, 15)
        await app.stop()


class SSEReader:
    """Reads SSE blocks from one streaming httpx response (one iterator for its lifetime)."""

    def __init__(self, resp: Any) -> None:
        self.it = resp.aiter_text()
        self.buf = ""
        self.comments: list[str] = []

    async def events(self, want: int, timeout: float = 10.0) -> list[tuple[str, Any]]:
        out: list[tuple[str, Any]] = []

        async def loop() -> None:
            while True:
                while "\n\n" in self.buf:
                    block, self.buf = self.buf.split("\n\n", 1)
                    lines = block.split("\n")
                    self.comments += [x for x in lines if x.startswith(":")]
                    ev = [x[7:] for x in lines if x.startswith("event: ")]
                    data = [x[6:] for x in lines if x.startswith("data: ")]
                    if ev and data:
                        out.append((ev[0], json.loads("\n".join(data))))
                        if len(out) >= want:
                            return
                if want == 0 and self.comments:
                    return
                self.buf += await self.it.__anext__()

        await asyncio.wait_for(loop(), timeout)
        return out


async def test_real_http_sse_and_chunked_limit() -> None:
    async with (
        uvicorn_server("[limits]\nmax_http_body_bytes = 2048\n") as (app, url),
        httpx.AsyncClient(base_url=url, timeout=10) as c,
    ):
        async with c.stream("GET", "/v1/events", params={"all_transitions": "true"}) as resp:
            assert resp.status_code == 200
            assert resp.headers["content-type"].startswith("text/event-stream")
            sse = SSEReader(resp)
            await sse.events(0)
            assert sse.comments[0] == ": live"
            tid = (await c.post("/v1/tasks", json={"payload": {"n": 1}})).json()["id"]
            w = FakeWorker(app)
            events = await sse.events(3)
            while events[-1][1]["status"] != "succeeded":
                events += await sse.events(1)
            assert all(e == "status" and d["id"] == tid for e, d in events)
            await w.close()

        async def chunks() -> AsyncIterator[bytes]:
            for _ in range(20):
                yield b" " * 256

        r = await c.post("/v1/tasks", content=chunks(), headers={"content-type": "application/json"})
        assert r.status_code == 413 and r.json()["code"] == "resource_exhausted"
        r = await c.get("/v1/tasks", headers={"host": "attacker.example:80"})
        assert r.status_code == 403 and r.json()["code"] == "permission_denied"
        assert (await c.get("/healthz")).status_code == 200


async def test_real_http_sse_streams_share_one_subscription_until_they_disconnect(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from cronoq.server import sse

    unsubscribed = asyncio.Event()
    close = sse.EventHub.close

    def close_and_tell(hub: Any) -> None:
        close(hub)
        unsubscribed.set()

    monkeypatch.setattr(sse.EventHub, "close", close_and_tell)
    params = {"all_transitions": "true"}
    async with uvicorn_server() as (app, url), httpx.AsyncClient(base_url=url, timeout=10) as c:
        async with c.stream("GET", "/v1/events", params=params) as a:
            ra = SSEReader(a)
            await ra.events(0)
            async with c.stream("GET", "/v1/events", params=params) as b:
                rb = SSEReader(b)
                await rb.events(0)
                assert len(app.sched._streams) == 1  # one scheduler subscription for both
                await c.post("/v1/tasks", json={"key": "one"})
                assert [(d["key"], d["status"]) for _, d in await rb.events(2)] == [
                    ("one", "blocked"),
                    ("one", "ready"),
                ]
            # `b` went away; `a` goes on
            await c.post("/v1/tasks", json={"key": "two"})
            got = [(d["key"], d["status"]) for _, d in await ra.events(4)]
            assert got == [("one", "blocked"), ("one", "ready"), ("two", "blocked"), ("two", "ready")]
            assert not unsubscribed.is_set()
        await asyncio.wait_for(unsubscribed.wait(), 10)  # the last stream left
        assert not app.sched._streams


async def test_real_process_smoke(tmp_path: Path) -> None:
    try:
        from .procs import start_server
    except ImportError:  # pragma: no cover - the runner's test helpers are not there
        pytest.skip("tests/server/procs.py is not available")
    sp = start_server(tmp_path, '[[pools]]\nname = "default"\n', name="http-smoke")
    try:
        assert sp.http and sp.http != "-", sp.log()
        async with httpx.AsyncClient(base_url=f"http://{sp.http}", timeout=10) as c:
            assert (await c.get("/healthz")).status_code == 200
            for _ in range(100):
                if (await c.get("/readyz")).status_code == 200:
                    break
                await asyncio.sleep(0.1)
            assert (await c.get("/readyz")).status_code == 200
            async with c.stream("GET", "/v1/events") as resp:
                assert resp.status_code == 200
                sse = SSEReader(resp)
                await sse.events(0)
                r = await c.post("/v1/tasks", json={"key": "smoke", "payload": [1, 2]})
                assert r.status_code == 200, r.text
                tid = r.json()["id"]
                info = (await c.get("/v1/tasks/smoke")).json()
                assert info["id"] == tid and info["status"] == "ready"
                assert (await c.post(f"/v1/tasks/{tid}/cancel")).json() == {"cancelled": True}
                events = await sse.events(1)
                assert events[0][1]["id"] == tid and events[0][1]["status"] == "cancelled"
            r = await c.get(f"/v1/tasks/{tid}/result")
            assert r.json()["status"] == "cancelled"
            metrics = await c.get("/metrics")
            assert metrics.status_code == 200 and "cronoq_leader 1.0" in metrics.text
            assert (await c.get("/openapi.json")).json()["openapi"].startswith("3.")
            assert (await c.get("/v1/snapshot")).json()["totals"]["cancelled"] == 1
            r = await c.get("/v1/tasks", headers={"host": "evil.example"})
            assert r.status_code == 403
    finally:
        assert sp.terminate() == 0, sp.log()


async def test_real_process_urllib_and_curl_bodies_and_cross_site(tmp_path: Path) -> None:
    """A real ``cronoq serve``: a body must be declared JSON (urllib's and ``curl -d``'s form
    default are 415, nothing created); without auth a browser's cross-site POST is 403."""
    try:
        from .procs import start_server
    except ImportError:  # pragma: no cover - the runner's test helpers are not there
        pytest.skip("tests/server/procs.py is not available")
    sp = start_server(tmp_path, '[[pools]]\nname = "default"\n\n[[pools]]\nname = "idle"\n', name="http-ct")
    try:
        base = f"http://{sp.http}"

        def scenario() -> None:
            json_ct = {"content-type": "application/json"}
            status, body = http_call(
                f"{base}/v1/tasks", b'{"key": "u0", "pool": "idle"}'
            )  # urllib's form type
            assert status == 415 and body["code"] == "invalid_argument", body
            assert "content-type: application/json" in body["error"], body
            assert http_call(f"{base}/v1/tasks/u0")[0] == 404  # nothing created
            status, body = http_call(
                f"{base}/v1/tasks", b'{"key": "u1", "pool": "idle", "after": []}', json_ct
            )
            assert status == 200, body
            tid = body["id"]
            assert isinstance(tid, str)
            status, body = http_call(
                f"{base}/v1/tasks", b'{"key": "u2", "pool": "idle", "after": "u1"}', json_ct
            )
            assert status == 200, body
            status, body = http_call(f"{base}/v1/tasks/u2")
            assert status == 200 and body["status"] == "blocked", body
            status, body = http_call(f"{base}/v1/tasks", b"key=u3", json_ct)
            assert status == 400 and body["code"] == "invalid_argument", body
            # a web page's "simple" cross-site POST (form body, foreign Origin) is refused ...
            evil = {"Origin": "http://evil.example", "Content-Type": "text/plain"}
            status, body = http_call(f"{base}/v1/tasks/{tid}/cancel", b"", evil)
            assert status == 403 and body["code"] == "permission_denied", body
            status, body = http_call(f"{base}/v1/tasks/u1", None, {"Origin": "http://evil.example"})
            assert status == 200 and body["status"] == "ready", body
            # ... the same page's own origin, and programs without an Origin, are not
            own = {"Origin": base}
            status, body = http_call(f"{base}/v1/tasks/{tid}/cancel", b"", own)
            assert (status, body) == (200, {"cancelled": True})
            if shutil.which("curl"):
                curl = ["curl", "-s", "-d", '{"key": "c1", "tags": {"n": 1}}', f"{base}/v1/tasks"]
                out = subprocess.run(curl, capture_output=True, text=True, timeout=30, check=True)
                assert json.loads(out.stdout)["code"] == "invalid_argument", out.stdout  # (415)
                curl[2:2] = ["-H", "content-type: application/json"]
                out = subprocess.run(curl, capture_output=True, text=True, timeout=30, check=True)
                assert json.loads(out.stdout)["duplicate"] is False, out.stdout

        await asyncio.to_thread(scenario)
    finally:
        assert sp.terminate() == 0, sp.log()
