"""``lease.progress`` (worker protocol version 5, docs/how-to/progress.md#remote-workers) against
the fake server: sent only in a version-5 session, coalesced per lease (newest wins, a trailing
report), checked like ``ctx.progress``, dropped once the lease ended."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from test_worker_fake import running

import cronoq
from cronoq.client import Lease, Worker
from cronoq.client.worker import PROGRESS_INTERVAL_S


def flatten(msg: Any) -> list[Any]:
    if msg.WhichOneof("msg") == "batch":
        return list(msg.batch.messages)
    return [msg]


async def until_complete(conn: Any) -> list[Any]:
    """Every report up to and including the Complete, batches unpacked."""
    got: list[Any] = []
    while True:
        for m in flatten(await conn.recv()):
            if m.WhichOneof("msg") != "heartbeat":
                got.append(m)
            if m.WhichOneof("msg") == "complete":
                return got


async def test_progress_coalesced_newest_wins_in_a_v5_session(fake: Any) -> None:
    release = asyncio.Event()
    errors: list[str] = []

    async def handle(lease: Lease) -> object:
        for i in range(1, 51):
            await lease.progress(i, 50, f"item {i}")
        try:
            await lease.progress(51, 50)
        except ValueError as e:
            errors.append(str(e))
        await release.wait()
        return None

    async with running(Worker(fake.target, "p", handle, slots=1)):
        conn = await fake.next_conn()
        await conn.recv_kind("register")
        conn.register_ok(slots=1, version=5)
        conn.lease(1)
        first = await conn.recv_kind("progress")
        assert (first.lease, first.done, first.total, first.message) == (1, 1.0, 50.0, "item 1")
        trailing = await conn.recv_kind("progress", timeout=PROGRESS_INTERVAL_S + 5)
        assert (trailing.done, trailing.message) == (50.0, "item 50")  # the newest, once
        release.set()
        rest = await until_complete(conn)
        assert [m.WhichOneof("msg") for m in rest] == ["complete"]
    assert errors and "must not exceed total" in errors[0]


async def test_no_progress_sent_to_an_older_server(fake: Any) -> None:
    async def handle(lease: Lease) -> object:
        await lease.progress(1, 2)
        lease.report_progress(2, 2)
        return "ok"

    for version in (3, 4):
        async with running(Worker(fake.target, "p", handle, slots=1)):
            conn = await fake.next_conn()
            await conn.recv_kind("register")
            conn.register_ok(slots=1, version=version)
            conn.lease(1)
            got = await until_complete(conn)
            assert [m.WhichOneof("msg") for m in got] == ["complete"]


async def test_held_progress_dropped_when_the_lease_ends(fake: Any) -> None:
    async def handle(lease: Lease) -> object:
        await lease.progress(1)
        await lease.progress(2)  # held for the trailing report...
        return None  # ...but the lease ends first

    async with running(Worker(fake.target, "p", handle, slots=1)):
        conn = await fake.next_conn()
        await conn.recv_kind("register")
        conn.register_ok(slots=1, version=5)
        conn.lease(1)
        got = await until_complete(conn)
        assert [(m.WhichOneof("msg"), m.progress.done) for m in got] == [("progress", 1.0), ("complete", 0.0)]
        with pytest.raises(asyncio.TimeoutError):
            await conn.recv(timeout=PROGRESS_INTERVAL_S * 2)


async def test_named_task_context_reports_through_its_lease(fake: Any) -> None:
    """A named task on a remote worker (``cronoq worker MODULE:APP``) calls ``ctx.progress``:
    the LeaseHandler's context sends it as the lease's progress."""
    app = cronoq.App("progress-test")

    @app.task(name="count")
    async def count(ctx: cronoq.TaskContext, n: int) -> int:
        for i in range(1, n + 1):
            ctx.progress(i, n)
        return n

    async with running(Worker(fake.target, "p", app.handler(), slots=1)):
        conn = await fake.next_conn()
        await conn.recv_kind("register")
        conn.register_ok(slots=1, version=5)
        conn.lease(1, payload=b'{"args": [3], "kwargs": {}}', kind="count", content_type="application/json")
        got = await until_complete(conn)
        # the first report at once; the two held behind it are dropped when the lease ends
        assert [m.WhichOneof("msg") for m in got] == ["progress", "complete"] and got[0].progress.done == 1
