"""Store failures as clients see them: UNAVAILABLE / 503, retryable, without store details.

* A commit the store refuses (here a real one: the SQLite write lock held elsewhere until the
  store's busy timeout, which it reports as a failure) answers 503 ``unavailable`` with a
  message naming no path (it was 500 ``internal error: SchedulerError`` with the file's path).
* A commit that does not finish within ``store.commit_timeout_s`` makes the leader step down:
  its waiters get 503 / UNAVAILABLE at once (they waited out the whole outage before), it stops
  answering ready, and it leads again once the store answers.
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
from pathlib import Path

import grpc

from cronoq.errors import SchedulerError
from cronoq.server import grpc_api
from cronoq.store.base import CommitDeadline

from .test_http_support import serve


def _base(db: Path, extra: str = "") -> str:
    return f'[store]\nkind = "sqlite"\npath = "{db}"\n{extra}\n[[pools]]\nname = "default"\n'


def test_store_errors_map_to_unavailable_without_detail() -> None:
    for e in (
        SchedulerError("SQLite store '/secret/path/cronoq.db': database or disk is full"),
        CommitDeadline("SQLite store: commit did not finish within 1 s; stepping down"),
    ):
        code, message = grpc_api._status(e)
        assert code == grpc.StatusCode.UNAVAILABLE
        assert "/secret" not in message and "retry" in message


async def test_commit_past_its_deadline_steps_down_and_fails_waiters(tmp_path: Path) -> None:
    db = tmp_path / "db"
    async with serve(base=_base(db, "commit_timeout_s = 0.5")) as (app, c):
        assert (await c.post("/v1/tasks", json={"key": "before"})).status_code == 200
        other = sqlite3.connect(db, timeout=0, isolation_level=None)
        other.execute("BEGIN IMMEDIATE")  # a hung writer: every commit of the leader now waits
        try:
            t0 = time.monotonic()
            r = await c.post("/v1/tasks", json={"key": "during"})
            took = time.monotonic() - t0
            assert (r.status_code, r.json()["code"]) == (503, "unavailable"), r.text
            assert str(tmp_path) not in r.text
            assert took < 3.0, took  # the deadline (0.5 s), not SQLite's busy timeout (5 s) or more
            assert (await c.get("/readyz")).status_code == 503
        finally:
            other.execute("ROLLBACK")
            other.close()
        # the store answers again: this server leads again and serves
        for _ in range(200):
            if (await c.get("/readyz")).status_code == 200:
                break
            await asyncio.sleep(0.05)
        r = await c.post("/v1/tasks", json={"key": "after"})
        assert r.status_code == 200, r.text
        assert (await c.post("/v1/tasks", json={"key": "before"})).json()["duplicate"] is True
        assert app.leading


def _tasks_table_away(db: Path) -> None:
    """Make the store's reads of its history fail for real: its tasks table renamed away by
    another connection (a read then fails with ``no such table``)."""
    other = sqlite3.connect(db, isolation_level=None)
    try:
        other.execute("ALTER TABLE cronoq_tasks RENAME TO cronoq_tasks_away")
    finally:
        other.close()


async def test_a_failed_read_of_the_history_is_not_called_a_commit(tmp_path: Path) -> None:
    """A lookup the engine misses reads the store's history; when that read fails the answer is
    503 ``unavailable`` "the store could not be read: retry" (nothing was changed), naming no
    path, for ``GET /v1/tasks/{ref}`` by id and by key and for ``/result``."""
    db = tmp_path / "db"
    async with serve(base=_base(db)) as (app, c):
        _tasks_table_away(db)
        for path in ("/v1/tasks/12345", "/v1/tasks/some-key", "/v1/tasks/12345/result?timeout=0"):
            r = await c.get(path)
            assert (r.status_code, r.json()["code"]) == (503, "unavailable"), (path, r.text)
            assert r.json()["error"] == "the store could not be read: retry", (path, r.text)
            assert str(tmp_path) not in r.text
        assert app.leading  # (a failed read is no reason to step down)


async def test_grpc_get_of_an_unreadable_history_is_a_read_failure(tmp_path: Path) -> None:
    """``cronoq get ID`` (gRPC ``Get``) on a real ``cronoq serve`` whose store fails the read."""
    from cronoq.client import Client, ClientError

    from .procs import start_server

    sp = start_server(tmp_path, '[[pools]]\nname = "default"\n', name="unreadable")
    try:
        _tasks_table_away(sp.db_path)
        async with Client(sp.grpc, failover_wait=0) as c:
            try:
                await c.get(12345)
            except ClientError as e:
                assert (e.code, e.message) == ("unavailable", "the store could not be read: retry")
            else:
                raise AssertionError("Get answered from a table that is gone")
    finally:
        assert sp.terminate() == 0, sp.log()


async def test_a_replay_whose_payload_cannot_be_read_is_a_read_failure(tmp_path: Path) -> None:
    """A replay reads the task's payload back from the store (the engine dropped it when the
    task ended): when that read fails the answer is the read's, "the store could not be read:
    retry" (nothing was changed), not "could not commit this change"."""
    db = tmp_path / "db"
    async with serve(base=_base(db)) as (app, c):
        r = await c.post("/v1/tasks", json={"key": "k", "payload": {"n": 1}})
        assert r.status_code == 200, r.text
        tid = r.json()["id"]
        assert (await c.post(f"/v1/tasks/{tid}/cancel")).status_code == 200
        _tasks_table_away(db)
        r = await c.post(f"/v1/tasks/{tid}/replay")
        assert (r.status_code, r.json()["code"]) == (503, "unavailable"), r.text
        assert r.json()["error"] == "the store could not be read: retry", r.text
        assert str(tmp_path) not in r.text
        assert app.leading
