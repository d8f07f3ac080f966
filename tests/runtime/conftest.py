"""Shared helpers for the in-process runtime tests (docs/reference/behaviour.md#python-api)."""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest

from cronoq import Pool, SqliteStore

T = TypeVar("T")

#: Safety net for every wait in these tests: generous, never used to sequence anything.
SAFETY = 10.0


async def wait(aw: Awaitable[T], timeout: float = SAFETY) -> T:
    """Await ``aw`` with a generous safety timeout (a hang fails the test instead of CI)."""
    return await asyncio.wait_for(aw, timeout)


async def settle(turns: int = 20) -> None:
    """Give the loop a few turns (used only before asserting that something did NOT happen)."""
    for _ in range(turns):
        await asyncio.sleep(0)


async def echo(ctx: Any, payload: Any) -> Any:
    return payload


def pool(name: str = "default", executor: Any = echo, **kw: Any) -> Pool:
    """A pool with a fixed capacity (autoscaling off unless asked for) so tests are deterministic."""
    kw.setdefault("autoscale", False)
    return Pool(name, executor, **kw)


class Gate:
    """An async executor whose attempts block until released, recording what ran.

    ``started[payload]`` is set when an attempt of ``payload`` begins; ``release(payload)``
    lets it return ``payload``; ``release_all()`` opens every gate (now and later).
    """

    def __init__(self) -> None:
        self.order: list[Any] = []
        self.contexts: dict[Any, Any] = {}
        self.cancelled: list[Any] = []
        self._started: dict[Any, asyncio.Event] = {}
        self._gates: dict[Any, asyncio.Event] = {}
        self._all = False

    def _ev(self, d: dict[Any, asyncio.Event], p: Any) -> asyncio.Event:
        ev = d.get(p)
        if ev is None:
            ev = d[p] = asyncio.Event()
        return ev

    def started(self, p: Any) -> asyncio.Event:
        return self._ev(self._started, p)

    def release(self, p: Any) -> None:
        self._ev(self._gates, p).set()

    def release_all(self) -> None:
        self._all = True
        for ev in self._gates.values():
            ev.set()

    async def __call__(self, ctx: Any, payload: Any) -> Any:
        self.order.append(payload)
        self.contexts[payload] = ctx
        self._ev(self._started, payload).set()
        gate = self._ev(self._gates, payload)
        if self._all:
            gate.set()
        try:
            await gate.wait()
        except asyncio.CancelledError:
            self.cancelled.append(payload)
            raise
        return payload


@pytest.fixture
def gate() -> Gate:
    return Gate()


DSN = os.environ.get("CRONOQ_TEST_PG_DSN", "postgresql://postgres@127.0.0.1:5432/test")


@pytest.fixture(params=["sqlite", "postgres"])
async def make_store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Callable[[], Any]]:
    """A factory of the same durable store, SQLite then PostgreSQL (a fresh schema, dropped
    after the test; skipped where PostgreSQL is unreachable)."""
    if request.param == "sqlite":
        yield lambda: SqliteStore(tmp_path / "opts.db")
        return
    asyncpg = pytest.importorskip("asyncpg", reason="asyncpg is not installed")
    from cronoq.store import PostgresStore

    try:
        conn = await asyncpg.connect(DSN, timeout=3)
    except Exception as e:
        pytest.skip(f"PostgreSQL unreachable at {DSN}: {type(e).__name__}: {e}")
    schema = f"cronoq_t_{uuid.uuid4().hex[:12]}"
    try:
        yield lambda: PostgresStore(DSN, schema=schema, lock_poll=0.05)
    finally:
        await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        await conn.close()
