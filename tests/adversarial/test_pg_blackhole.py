"""PostgreSQL goes silent (a blackhole): callers get UNAVAILABLE within the commit deadline.

A loopback TCP proxy in the test stands between the server and PostgreSQL (skipped, with the
reason, when PostgreSQL is not reachable).  While it forwards, the server leads and serves.
Then it swallows every byte in both directions without closing anything — the network
silence that once kept submitters waiting 70 s and stopped step-down from finishing.  Now
a submission during the silence is answered 503 ``unavailable`` within about
``store.commit_timeout_s``, ``/readyz`` turns 503 and the server stays responsive; once the
proxy forwards again (cutting the stale connections) the server leads again, and every
acknowledged task is there.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from server.procs import start_server
from services import missing_service

PG = ("127.0.0.1", 5432)
DSN = "postgresql://postgres@127.0.0.1:{port}/test"


class Proxy:
    """A TCP proxy on a loopback port; ``silent = True`` drops all data, ``cut()`` resets."""

    def __init__(self) -> None:
        self.silent = False
        self.port = 0
        self.loop = asyncio.new_event_loop()
        self.conns: set[asyncio.StreamWriter] = set()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        server = self.loop.run_until_complete(asyncio.start_server(self._client, "127.0.0.1", 0))
        self.port = server.sockets[0].getsockname()[1]
        self._ready.set()
        self.loop.run_forever()
        server.close()

    async def _pipe(self, r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        with contextlib.suppress(Exception):
            while data := await r.read(65536):
                if not self.silent:
                    w.write(data)
                    await w.drain()
        w.close()

    async def _client(self, cr: asyncio.StreamReader, cw: asyncio.StreamWriter) -> None:
        try:
            ur, uw = await asyncio.open_connection(*PG)
        except OSError:
            cw.close()
            return
        self.conns.update((cw, uw))
        await asyncio.gather(self._pipe(cr, uw), self._pipe(ur, cw))
        self.conns.difference_update((cw, uw))

    def cut(self) -> None:
        def do() -> None:
            for w in list(self.conns):
                w.transport.abort()

        self.loop.call_soon_threadsafe(do)

    def __enter__(self) -> Proxy:
        self._thread.start()
        self._ready.wait(10)
        return self

    def __exit__(self, *exc: object) -> None:
        self.cut()
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)


@pytest.fixture
def proxy() -> Iterator[Proxy]:
    asyncpg = pytest.importorskip("asyncpg", reason="asyncpg is not installed")

    async def probe() -> None:
        conn = await asyncpg.connect(DSN.format(port=PG[1]), timeout=3)
        await conn.close()

    try:
        asyncio.run(probe())
    except Exception as e:
        missing_service("PostgreSQL", f"unreachable at {PG}: {type(e).__name__}: {e}")
    with Proxy() as p:
        yield p


def test_blackholed_database_is_unavailable_not_a_hang(tmp_path: Path, proxy: Proxy) -> None:
    schema = f"cronoq_bh_{uuid.uuid4().hex[:10]}"
    store = (
        f'kind = "postgres"\nurl = "{DSN.format(port=proxy.port)}"\nschema = "{schema}"\n'
        "commit_timeout_s = 2\nstatement_timeout_s = 3\nconnect_timeout_s = 2\n\n"
    )
    sp = start_server(tmp_path, '[[pools]]\nname = "default"\n', name="bh", store=store)
    try:
        with httpx.Client(base_url=f"http://{sp.http}", timeout=60) as c:
            acked = [c.post("/v1/tasks", json={"key": f"k{i}"}) for i in range(5)]
            assert all(r.status_code == 200 for r in acked)
            proxy.silent = True
            t0 = time.monotonic()
            r = c.post("/v1/tasks", json={"key": "during"})
            took = time.monotonic() - t0
            assert (r.status_code, r.json()["code"]) == (503, "unavailable"), r.text
            assert took < 8, took  # the commit deadline (2 s), not the outage
            assert c.get("/healthz").status_code == 200
            assert c.get("/readyz").status_code == 503
            proxy.silent = False
            proxy.cut()  # the stale sessions end; new connections go through
            end = time.monotonic() + 60
            while c.get("/readyz").status_code != 200:
                assert time.monotonic() < end, "the server did not lead again"
                time.sleep(0.1)
            for i in range(5):
                assert c.get(f"/v1/tasks/k{i}").status_code == 200
            assert c.post("/v1/tasks", json={"key": "after"}).status_code == 200
    finally:
        assert sp.terminate() == 0, sp.log()
        asyncio.run(_drop(schema))


async def _drop(schema: str) -> None:
    import asyncpg  # type: ignore[import-untyped]

    conn = await asyncpg.connect(DSN.format(port=PG[1]), timeout=10)
    try:
        await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    finally:
        await conn.close()
