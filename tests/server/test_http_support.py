"""Helpers of the HTTP front-end tests: in-process ServerApp, fake worker, SSE driver."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import httpx

from cronoq.server.app import ServerApp
from cronoq.server.config import loads_config
from cronoq.server.http_api import create_http_app
from cronoq.server.workers import LeaseMsg, WorkerSession

CLIENT = "client-token-0123456789"
WORKER = "worker-token-0123456789"
METRICS = "metrics-token-012345678"
ADMIN = "admin-token-01234567890"
SCOPED = "scoped-token-0123456789"
TENANT = "tenant-token-0123456789"

BASE = """
[store]
kind = "memory"

[[pools]]
name = "default"

[[pools]]
name = "other"
"""

TOKENS = f"""
[[auth.tokens]]
token = "{CLIENT}"
role = "client"

[[auth.tokens]]
token = "{WORKER}"
role = "worker"

[[auth.tokens]]
token = "{METRICS}"
role = "metrics"

[[auth.tokens]]
token = "{ADMIN}"
role = "admin"

[[auth.tokens]]
token = "{SCOPED}"
role = "client"
pools = ["other"]

[[auth.tokens]]
token = "{TENANT}"
role = "client"
tenant = "acme"
"""


def bearer(token: str) -> dict[str, str]:
    return {"authorization": f"Bearer {token}"}


def make_app(extra: str = "", *, base: str = BASE) -> ServerApp:
    return ServerApp(loads_config(base + extra, env={}))


@contextlib.asynccontextmanager
async def serve(
    extra: str = "",
    *,
    base: str = BASE,
    lead: bool = True,
    metrics_only: bool = False,
    listen_addr: str | None = None,
    host: str = "127.0.0.1:7071",
) -> AsyncIterator[tuple[ServerApp, httpx.AsyncClient]]:
    """A ServerApp (memory store) led in this loop, and an httpx client on its ASGI app."""
    app = make_app(extra, base=base)
    if lead:
        await app.lead()
    web = create_http_app(app, metrics_only=metrics_only, listen_addr=listen_addr)
    transport = httpx.ASGITransport(app=web)
    try:
        async with httpx.AsyncClient(transport=transport, base_url=f"http://{host}") as client:
            yield app, client
    finally:
        if not app.stopping:
            await app.stop()


Outcome = tuple[Any, ...] | None
LeaseHandler = Callable[[LeaseMsg], Awaitable[Outcome] | Outcome]


class FakeWorker:
    """A worker session registered on the registry; answers leases like a remote worker.

    The handler returns ``("complete", bytes, content_type)``, ``("fail", message,
    permanent)``, ``("nack", reason)`` or None (hold the lease until :meth:`finish`).
    Without a handler, every lease completes with its payload echoed.
    """

    def __init__(
        self,
        app: ServerApp,
        pool: str = "default",
        slots: int = 4,
        labels: dict[str, str] | None = None,
        handler: LeaseHandler | None = None,
    ) -> None:
        self.app = app
        self.handler = handler
        self.session: WorkerSession = app.registry.register(pool, "fake", labels or {}, slots)
        self.leases: list[LeaseMsg] = []
        self.held: dict[int, LeaseMsg] = {}
        self.got_lease = asyncio.Event()
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        s = self.session
        while True:
            msg = await s.outbox.get()
            if msg is None:
                return
            if not isinstance(msg, LeaseMsg):
                continue
            self.leases.append(msg)
            self.got_lease.set()
            out: Any
            if self.handler is None:
                out = ("complete", msg.payload, msg.content_type)
            else:
                out = self.handler(msg)
                if asyncio.iscoroutine(out):
                    out = await out
            self._answer(msg, out)

    def _answer(self, msg: LeaseMsg, out: Outcome) -> None:
        s = self.session
        if out is None:
            self.held[msg.lease] = msg
        elif out[0] == "complete":
            s.complete(msg.lease, out[1], out[2])
        elif out[0] == "fail":
            s.fail(msg.lease, out[1], out[2], None)
        elif out[0] == "nack":
            s.nack(msg.lease, out[1])
        else:  # pragma: no cover
            raise AssertionError(out)

    def finish(self, lease: int, out: Outcome) -> None:
        msg = self.held.pop(lease)
        self._answer(msg, out)

    async def wait_lease(self, n: int = 1, timeout: float = 5.0) -> LeaseMsg:
        async def until() -> None:
            while len(self.leases) < n:
                self.got_lease.clear()
                await self.got_lease.wait()

        await asyncio.wait_for(until(), timeout)
        return self.leases[n - 1]

    async def close(self) -> None:
        self.app.registry.disconnect(self.session, "test over")
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task


class SSE:
    """Drives a streaming GET through the ASGI app directly (httpx's ASGITransport buffers
    whole responses, which never ends for an event stream)."""

    def __init__(self, web: Any, path: str, query: str = "", headers: dict[str, str] | None = None) -> None:
        hdrs = {"host": "127.0.0.1:7071", **(headers or {})}
        self.scope = {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": "GET",
            "scheme": "http",
            "path": path,
            "raw_path": path.encode(),
            "query_string": query.encode(),
            "root_path": "",
            "headers": [(k.lower().encode(), v.encode()) for k, v in hdrs.items()],
            "client": ("127.0.0.1", 50000),
            "server": ("127.0.0.1", 7071),
        }
        self.web = web
        self.messages: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self._disconnect = asyncio.Event()
        self._sent_body = False
        self.status = 0
        self.headers: dict[str, str] = {}
        self.buffer = b""
        self.done = False

    async def _receive(self) -> dict[str, Any]:
        if not self._sent_body:
            self._sent_body = True
            return {"type": "http.request", "body": b"", "more_body": False}
        await self._disconnect.wait()
        return {"type": "http.disconnect"}

    async def _send(self, message: dict[str, Any]) -> None:
        await self.messages.put(message)

    async def __aenter__(self) -> SSE:
        self.task = asyncio.get_running_loop().create_task(self.web(self.scope, self._receive, self._send))
        start = await asyncio.wait_for(self.messages.get(), 5)
        assert start["type"] == "http.response.start"
        self.status = start["status"]
        self.headers = {k.decode(): v.decode() for k, v in start["headers"]}
        return self

    async def read_until(self, needle: bytes, timeout: float = 5.0) -> bytes:
        """Read body chunks until ``needle`` appears; return everything read so far."""

        async def loop() -> None:
            while needle not in self.buffer:
                m = await self.messages.get()
                if m["type"] == "http.response.body":
                    self.buffer += m.get("body", b"")
                    if not m.get("more_body", False):
                        self.done = True
                        return

        await asyncio.wait_for(loop(), timeout)
        return self.buffer

    def events(self) -> list[tuple[str, Any]]:
        out = []
        for block in self.buffer.decode().split("\n\n"):
            lines = block.split("\n")
            ev = [x[len("event: ") :] for x in lines if x.startswith("event: ")]
            data = [x[len("data: ") :] for x in lines if x.startswith("data: ")]
            if ev and data:
                out.append((ev[0], json.loads("\n".join(data))))
        return out

    async def __aexit__(self, *exc: Any) -> None:
        self._disconnect.set()
        try:
            await asyncio.wait_for(self.task, 5)
        except (TimeoutError, asyncio.CancelledError):
            self.task.cancel()
