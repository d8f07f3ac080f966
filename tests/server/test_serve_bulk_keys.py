"""A bulk replay retried after a SIGKILL of ``cronoq serve`` replays nothing twice
(issue #35, 1): the request key's progress is in the store, the retry finishes the
interrupted call and says so (``resumed``), its counts include what was done before."""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import time
from pathlib import Path

import grpc

from .procs import Raw, pb, start_server

POOLS = '[[pools]]\nname = "idle"\n'
N = 2500  # three pages of engine.bulk.PAGE


def _db(path: Path, sql: str) -> list[tuple[object, ...]]:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5)
    try:
        return conn.execute(sql).fetchall()
    except sqlite3.OperationalError:  # (the table does not exist yet)
        return []
    finally:
        conn.close()


def _replays(path: Path) -> int:
    rows = _db(path, "SELECT COUNT(*) FROM cronoq_tasks WHERE spec LIKE '%cronoq.replay_of%'")
    return int(rows[0][0]) if rows else 0  # type: ignore[call-overload]


async def _prepare(target: str) -> None:
    raw = Raw(target)
    try:
        for i in range(0, N, 1000):
            specs = [pb.TaskSpec(pool="idle") for _ in range(min(1000, N - i))]
            await raw.tasks.SubmitMany(pb.SubmitManyRequest(tasks=specs))
        filt = pb.TaskFilter(pools=["idle"])
        res = await raw.tasks.CancelWhere(pb.BulkRequest(filter=filt))
        assert res.acted == N
    finally:
        await raw.close()


async def test_a_keyed_bulk_replay_cut_by_sigkill_is_finished_by_its_retry(tmp_path: Path) -> None:
    sp = start_server(tmp_path, POOLS, name="bulk")
    db = sp.db_path
    filt = pb.TaskFilter(pools=["idle"], statuses=[pb.TASK_STATUS_CANCELLED])
    req = pb.BulkRequest(filter=filt, request_key="night")
    try:
        await _prepare(sp.grpc)
        raw = Raw(sp.grpc)
        call = asyncio.ensure_future(raw.tasks.ReplayWhere(req))
        # kill the server as soon as the key's first page is durable, before it is done
        deadline = time.monotonic() + 30
        while not _db(db, "SELECT done FROM cronoq_bulk_keys WHERE key = 'night' AND done = 0"):
            assert time.monotonic() < deadline and not call.done(), sp.log()
            await asyncio.sleep(0.005)
        sp.kill()
        with contextlib.suppress(grpc.aio.AioRpcError):
            await call  # (cut off, as a client would see it)
        await raw.close()
        before = _replays(db)
        assert 0 < before < N, before  # interrupted mid-way
    finally:
        sp.kill()
    conn = sqlite3.connect(db)
    with conn:  # the dead leader's lease lapses now rather than lease_ttl later
        conn.execute("UPDATE cronoq_leader SET expires_at = 0")
    conn.close()
    sp = start_server(tmp_path, POOLS, name="bulk", db_path=db)
    try:
        raw = Raw(sp.grpc)
        res = await raw.tasks.ReplayWhere(req)
        assert (res.matched, res.acted, res.resumed) == (N, N, True)
        again = await raw.tasks.ReplayWhere(req)  # finished: answered as it was
        assert (again.matched, again.acted) == (N, N)
        other = await raw.tasks.ReplayWhere(pb.BulkRequest(filter=req.filter, request_key="other"))
        assert (other.matched, other.acted) == (0, 0)  # every one already has a replay
        await raw.close()
    finally:
        assert sp.terminate() == 0, sp.log()
    assert _replays(db) == N  # each task replayed exactly once
