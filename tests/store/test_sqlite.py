"""SqliteStore against real SQLite files (docs/reference/behaviour.md#stores,
docs/reference/behaviour.md#recovery, docs/reference/behaviour.md#fencing)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import pathlib
import random
import sqlite3
import stat
import subprocess
import threading
import time
import types
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from cronoq.engine.mutations import StatusChange, Submitted, TaskRecord
from cronoq.errors import Fenced, SchedulerError
from cronoq.store import SqliteStore, TransientStoreError
from cronoq.store.base import CommitDeadline

from . import contract
from .contract import codec


@pytest.fixture
def db(tmp_path: pathlib.Path) -> pathlib.Path:
    return tmp_path / "cronoq.db"


@pytest.fixture
def make(db: pathlib.Path) -> Any:
    def factory(**kw: Any) -> SqliteStore:
        kw.setdefault("lease_ttl", 2.0)
        kw.setdefault("lease_renew", 0.5)
        kw.setdefault("lock_poll", 0.05)
        return SqliteStore(db, **kw)

    return factory


def raw(db: pathlib.Path) -> sqlite3.Connection:
    return sqlite3.connect(db, isolation_level=None)


async def test_round_trip_every_mutation_kind(make: Any) -> None:
    await contract.check_round_trip(make)


async def test_bulk_request_keys(make: Any) -> None:
    await contract.check_bulk_keys(make)


async def test_unencodable_output_is_not_fatal(make: Any) -> None:
    await contract.check_unencodable_output(make)


async def test_a_message_with_lone_surrogates_is_stored(make: Any) -> None:
    await contract.check_message_with_surrogates(make)


async def test_commit_before_open_is_an_error(make: Any) -> None:
    await contract.check_commit_requires_open(make)


async def test_recovery_through_core(make: Any) -> None:
    await contract.check_recovery_through_core(make)


async def test_recurring_chain_across_restart(make: Any) -> None:
    await contract.check_recurring_chain_across_restart(make)


async def test_quarantine_of_undecodable_rows(make: Any, db: pathlib.Path) -> None:
    async def corrupt(tid: int, column: str, value: Any) -> None:
        with raw(db) as c:
            c.execute(f"UPDATE cronoq_tasks SET {column} = ? WHERE id = ?", (value, tid))

    await contract.check_quarantine(make, corrupt)


async def test_retention_pruning(make: Any) -> None:
    await contract.check_retention(make)


async def test_pruning_in_bounded_batches(make: Any) -> None:
    await contract.check_prune_in_batches(make)


async def test_load_window(make: Any) -> None:
    await contract.check_load_window(make)


async def test_prune_keeps_references(make: Any) -> None:
    await contract.check_prune_keeps_references(make)


async def test_prune_reads_changed_definitions_again(make: Any) -> None:
    await contract.check_prune_reads_changed_definitions_again(make)


async def test_epochs_increase_across_acquires(make: Any) -> None:
    await contract.check_epochs_increase(make)


async def test_standby_takes_over_at_once_after_release(make: Any) -> None:
    await contract.check_standby_takes_over_on_release(make)


async def test_standby_takes_over_when_the_lease_lapses(make: Any) -> None:
    async def hang(store: SqliteStore) -> None:
        await store._stop_renewer()  # the leader stops renewing (hung or crashed)

    await contract.check_standby_takes_over_on_loss(make, hang, lease_ttl=0.6, lease_renew=0.2)


async def test_close_releases_leadership(make: Any) -> None:
    await contract.check_close_releases(make)


async def test_renewal_notices_a_lost_lease(make: Any, db: pathlib.Path) -> None:
    s, ep = await contract.leader(make, lease_ttl=1.0, lease_renew=0.05)
    lost = asyncio.Event()
    s.on_lost = lost.set
    try:
        with raw(db) as c:  # another instance took over behind its back
            c.execute("UPDATE cronoq_leader SET epoch = epoch + 1, owner = 'intruder', expires_at = 1e12")
        await asyncio.wait_for(lost.wait(), 5.0)
        assert not s.leading and not await s.is_leader()
        with pytest.raises(Fenced):
            await s.commit([Submitted(1, 1, 0, TaskRecord(pool="default"))], ep, codec)
    finally:
        await s.close()


async def test_commits_renew_the_lease(make: Any, db: pathlib.Path) -> None:
    s, ep = await contract.leader(make, lease_ttl=30.0, lease_renew=10.0)
    try:
        with raw(db) as c:
            before = c.execute("SELECT expires_at FROM cronoq_leader").fetchone()[0]
        await asyncio.sleep(0.05)
        await s.commit([Submitted(1, 1, 0, TaskRecord(pool="default"))], ep, codec)
        with raw(db) as c:
            after = c.execute("SELECT expires_at FROM cronoq_leader").fetchone()[0]
        assert after > before
    finally:
        await s.close()


async def test_file_is_private_wal_and_full_sync(make: Any, db: pathlib.Path) -> None:
    s, ep = await contract.leader(make)
    try:
        await s.commit([Submitted(1, 1, 0, TaskRecord(pool="default"))], ep, codec)
        assert stat.S_IMODE(os.stat(db).st_mode) == 0o600
        assert stat.S_IMODE(os.stat(f"{db}-wal").st_mode) == 0o600
        with raw(db) as c:
            assert c.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        sync = await s._call(lambda: s._db().execute("PRAGMA synchronous").fetchone()[0])
        assert sync == 2  # FULL
    finally:
        await s.close()
    s2 = SqliteStore(str(db), full_sync=False)  # str path too
    await s2.open()
    try:
        assert await s2._call(lambda: s2._db().execute("PRAGMA synchronous").fetchone()[0]) == 1  # NORMAL
    finally:
        await s2.close()


async def test_missing_directory_is_a_clear_error(tmp_path: pathlib.Path) -> None:
    s = SqliteStore(tmp_path / "nope" / "x.db")
    with pytest.raises(SchedulerError, match="does not exist"):
        await s.open()


async def test_corrupt_file_is_a_clear_error(db: pathlib.Path) -> None:
    db.write_bytes(b"this is not a sqlite database at all" * 200)
    s = SqliteStore(db)
    with pytest.raises(SchedulerError, match="corrupt or not a SQLite database"):
        await s.open()
    await s.close()


async def test_locked_file_is_a_clear_error(db: pathlib.Path) -> None:
    first = SqliteStore(db)
    await first.open()
    await first.close()
    holder = raw(db)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        s = SqliteStore(db)
        s.busy_timeout = 0.2
        with pytest.raises(TransientStoreError, match="locked"):
            await s.open()
    finally:
        holder.execute("ROLLBACK")
        holder.close()


@contextlib.contextmanager
def read_only(path: pathlib.Path) -> Iterator[None]:
    """Make ``path`` read-only for this process, root included: root ignores file modes (CI runs
    as root), so as root the file is made immutable (``chattr +i``, undone afterwards)."""
    mode = path.stat().st_mode
    path.chmod(0o400)
    immutable = os.geteuid() == 0
    if immutable:
        r = subprocess.run(["chattr", "+i", str(path)], capture_output=True, text=True, check=False)
        if r.returncode != 0:
            path.chmod(mode)
            pytest.skip(f"root ignores file modes and `chattr +i` failed here: {r.stderr.strip()}")
    try:
        yield
    finally:
        if immutable:
            subprocess.run(["chattr", "-i", str(path)], check=True)
        path.chmod(mode)


async def test_read_only_file_is_a_clear_error(db: pathlib.Path) -> None:
    s = SqliteStore(db)
    await s.open()
    await s.close()
    with read_only(db):
        with pytest.raises(OSError):  # the premise: this process cannot write it
            db.open("ab").close()
        with pytest.raises(SchedulerError, match="read-only"):
            await SqliteStore(db).open()


def test_argument_validation(db: pathlib.Path) -> None:
    with pytest.raises(ValueError, match="lease_ttl"):
        SqliteStore(db, lease_ttl=0)
    with pytest.raises(ValueError, match="shorter"):
        SqliteStore(db, lease_ttl=1.0, lease_renew=2.0)
    with pytest.raises(ValueError, match="retention"):
        SqliteStore(db, retention=-1)
    with pytest.raises(TypeError):
        SqliteStore(123)  # type: ignore[arg-type]


async def test_store_jobs_run_on_one_dedicated_thread(make: Any) -> None:
    import threading

    s, ep = await contract.leader(make)
    try:
        names = {await s._call(lambda: threading.current_thread().name) for _ in range(5)}
        assert len(names) == 1 and next(iter(names)).startswith("cronoq-sqlite")
        assert threading.current_thread().name not in names
        await s.commit([StatusChange(1, "running", 1, 0)], ep, codec)  # unknown id: ignored
    finally:
        await s.close()


def _commit_threads(s: SqliteStore) -> list[str]:
    """The names of the threads ``s``'s commits write on, in order (a spy on ``_write_batch``)."""
    names: list[str] = []
    real = s._write_batch

    def spy(*args: Any) -> None:
        names.append(threading.current_thread().name)
        real(*args)

    s._write_batch = spy  # type: ignore[method-assign]
    return names


async def test_small_commits_run_inline_big_ones_on_the_store_thread(make: Any, db: pathlib.Path) -> None:
    # a small commit skips the hand-off to the store's thread (store/sqlite.py commit()); a big
    # one does not stall the event loop: it still goes to that thread
    s, ep = await contract.leader(make)
    threads = _commit_threads(s)
    rec = TaskRecord(pool="default")
    try:
        await s.commit([Submitted(1, 1, 0, rec), StatusChange(1, "running", 1, 5)], ep, codec)
        await s.commit([Submitted(i, i, 0, rec) for i in range(2, 2 + s.inline_below)], ep, codec)
        assert threads[0] == threading.current_thread().name
        assert threads[1].startswith("cronoq-sqlite")
        with raw(db) as c:  # both committed, seen by another connection
            assert c.execute("SELECT count(*) FROM cronoq_tasks").fetchone()[0] == 1 + s.inline_below
            assert c.execute("SELECT status FROM cronoq_tasks WHERE id = 1").fetchone()[0] == "running"
        # the inline commit's BEGIN does not wait for a lock (busy timeout 0); the store's
        # thread puts the timeout back before its next job, whose statements wait as before
        waits = round(s.busy_timeout * 1000)
        await s.commit([StatusChange(1, "succeeded", 1, 6)], ep, codec)
        assert s._db().execute("PRAGMA busy_timeout").fetchone()[0] == 0
        assert await s._call(lambda: s._db().execute("PRAGMA busy_timeout").fetchone()[0]) == waits
        await s.commit([StatusChange(2, "running", 1, 7)], ep, codec)  # (inline again)
        assert await s._call(lambda: s._db().execute("PRAGMA busy_timeout").fetchone()[0]) == waits
    finally:
        await s.close()


async def test_an_inline_commit_never_shares_the_connection(make: Any) -> None:
    # while the store's thread runs a job, a small commit queues behind it instead of running
    # inline on the same connection (the connection's lock, store/sqlite.py)
    s, ep = await contract.leader(make)
    threads = _commit_threads(s)
    started, release = threading.Event(), threading.Event()

    def job() -> int:
        started.set()
        release.wait(30)
        return int(s._db().execute("SELECT count(*) FROM cronoq_tasks").fetchone()[0])

    try:
        busy = asyncio.ensure_future(s._call(job))
        assert await asyncio.to_thread(started.wait, 30)
        commit = asyncio.ensure_future(s.commit([Submitted(1, 1, 0, TaskRecord(pool="default"))], ep, codec))
        await asyncio.sleep(0)  # one loop turn: the commit's first step ran (inline, or queued)
        assert not commit.done()
        release.set()
        assert await busy == 0  # the job ran with no commit in between
        await commit
        assert len(threads) == 1 and threads[0].startswith("cronoq-sqlite")
        assert await s._call(job) == 1
    finally:
        release.set()
        await s.close()


async def test_a_locked_database_sends_an_inline_commit_to_the_store_thread(
    make: Any, db: pathlib.Path
) -> None:
    # another connection holds the write lock: the small commit does not wait for it on the
    # event loop (SQLite's busy timeout is 5 s) but on the store's thread, within the deadline
    s, ep = await contract.leader(make, commit_timeout=0.3)
    holder = raw(db)
    try:
        holder.execute("BEGIN IMMEDIATE")
        t0 = time.monotonic()
        with pytest.raises(CommitDeadline):
            await s.commit([Submitted(1, 1, 0, TaskRecord(pool="default"))], ep, codec)
        assert time.monotonic() - t0 < 3.0  # the deadline, not the busy timeout
        assert not s.leading
    finally:
        holder.execute("ROLLBACK")
        holder.close()
        await s.close()


async def test_a_failed_inline_commit_surfaces_and_rolls_back(make: Any, db: pathlib.Path) -> None:
    # an inline commit's error is the store's error as on its thread, and leaves no transaction
    s, ep = await contract.leader(make)
    threads = _commit_threads(s)
    try:
        await s.commit([Submitted(1, 1, 0, TaskRecord(pool="default"))], ep, codec)
        with raw(db) as c:  # another instance took over
            c.execute("UPDATE cronoq_leader SET epoch = epoch + 1, owner = 'intruder', expires_at = 1e12")
        with pytest.raises(Fenced):
            await s.commit([Submitted(2, 2, 0, TaskRecord(pool="default"))], ep, codec)
        assert threads == [threading.current_thread().name] * 2
        assert not s._db().in_transaction
        with raw(db) as c:
            assert c.execute("SELECT id FROM cronoq_tasks").fetchall() == [(1,)]
    finally:
        await s.close()


async def test_an_inline_commit_past_the_deadline_steps_down(
    make: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a small commit that took longer than commit_timeout on the loop (a stalled disk) steps
    # down as a late one on the store's thread does (base.bounded)
    import cronoq.store.sqlite as sqlite_mod

    s, ep = await contract.leader(make, commit_timeout=0.5)
    lost: list[bool] = []
    s.on_lost = lambda: lost.append(True)
    clock = [time.monotonic()]
    monkeypatch.setattr(sqlite_mod, "time", types.SimpleNamespace(time=time.time, monotonic=lambda: clock[0]))
    real = s._write_batch

    def stalled(*args: Any) -> None:
        real(*args)
        clock[0] += 1.0  # the fsync took a second

    s._write_batch = stalled  # type: ignore[method-assign]
    try:
        with pytest.raises(CommitDeadline, match=r"within 0\.5 s"):
            await s.commit([Submitted(1, 1, 0, TaskRecord(pool="default"))], ep, codec)
        assert lost == [True] and not s.leading
    finally:
        monkeypatch.undo()
        await s.close()


class TimedWrites:
    """The store's commits on a fake monotonic clock: each write records the thread it ran on
    and moves the clock by ``stall`` seconds (how long the fsync took)."""

    def __init__(self, s: Any, monkeypatch: pytest.MonkeyPatch) -> None:
        import cronoq.store.sqlite as sqlite_mod

        self.clock = time.monotonic()
        self.stall = 0.2
        self.threads: list[str] = []
        monkeypatch.setattr(sqlite_mod, "time", types.SimpleNamespace(time=time.time, monotonic=self.now))
        real = s._write_batch

        def timed(*args: Any) -> None:
            self.threads.append(threading.current_thread().name)
            real(*args)
            self.clock += self.stall

        s._write_batch = timed

    def now(self) -> float:
        return self.clock


@contextlib.asynccontextmanager
async def slow_once(
    make: Any, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[tuple[Any, int, TimedWrites]]:
    """A leading store on ``TimedWrites``' clock whose first commit (task 1, inline) was slow;
    closed (and the clock put back) on exit."""
    s, ep = await contract.leader(make)
    w = TimedWrites(s, monkeypatch)
    try:
        await s.commit([Submitted(1, 1, 0, REC)], ep, codec)  # inline, and slow
        yield s, ep, w
    finally:
        monkeypatch.undo()
        await s.close()


REC = TaskRecord(pool="default")


async def test_a_slow_inline_commit_sends_the_next_ones_to_the_store_thread(
    make: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a disk that stalled one inline commit blocks the event loop once: for the next
    # inline_pause seconds small commits go to the store's thread, then inline again
    async with slow_once(make, monkeypatch) as (s, ep, w):
        await s.commit([Submitted(2, 2, 0, REC)], ep, codec)  # on the thread: slow too
        w.stall = 0.001
        w.clock += s.inline_pause - 0.25
        await s.commit([Submitted(3, 3, 0, REC)], ep, codec)
        loop_thread = threading.current_thread().name
        assert w.threads[0] == loop_thread
        assert w.threads[1].startswith("cronoq-sqlite") and w.threads[2].startswith("cronoq-sqlite")
        w.clock += 0.5  # the pause is over: inline again
        await s.commit([Submitted(4, 4, 0, REC)], ep, codec)
        assert w.threads[3] == loop_thread
        assert s.leading


async def test_a_slow_inline_commit_on_a_loaded_machine_pauses_nothing(
    make: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the loop's thread preempted mid-commit (not the disk): the next commit, on the store's
    # thread, is fast, and the ones after it run inline again at once
    async with slow_once(make, monkeypatch) as (s, ep, w):
        w.stall = 0.001
        await s.commit([Submitted(2, 2, 0, REC)], ep, codec)  # on the thread: fast
        await s.commit([Submitted(3, 3, 0, REC)], ep, codec)
        loop_thread = threading.current_thread().name
        assert w.threads[0] == loop_thread and w.threads[1].startswith("cronoq-sqlite")
        assert w.threads[2] == loop_thread  # no ten seconds on the thread
        assert s.leading


async def test_a_failed_probe_leaves_the_probe_to_the_next_commit(
    make: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the first commit on the store's thread after a slow inline one fails (another connection
    # holds the write lock past the busy timeout): it told nothing of the disk, so the next
    # one, fast, is the probe and ends the pause (it ran its full ten seconds before)
    async with slow_once(make, monkeypatch) as (s, ep, w):
        s.busy_timeout = 0.05  # (a real wait of the store's thread for the lock: not the fake clock)
        w.stall = 0.001
        other = sqlite3.connect(s.path, timeout=0, isolation_level=None)
        other.execute("BEGIN IMMEDIATE")
        try:
            with pytest.raises(TransientStoreError, match="locked"):
                await s.commit([Submitted(2, 2, 0, REC)], ep, codec)  # on the thread: fails
        finally:
            other.execute("ROLLBACK")
            other.close()
        await s.commit([Submitted(3, 3, 0, REC)], ep, codec)  # on the thread: fast, the probe
        await s.commit([Submitted(4, 4, 0, REC)], ep, codec)
        loop_thread = threading.current_thread().name
        assert w.threads[0] == loop_thread and w.threads[1].startswith("cronoq-sqlite")
        assert w.threads[2] == loop_thread  # the pause ended: inline again
        assert s.leading


async def test_a_lost_output_is_an_error_to_await_not_none(tmp_path: pathlib.Path) -> None:
    """A succeeded task whose output the store could not keep (the JSON codec cannot encode a
    set) comes back from recovery as succeeded; awaiting it raises TaskFailed (as in the
    published implementation) instead of giving a None the task never returned."""
    from cronoq import Pool, Scheduler, TaskFailed

    async def run(ctx: Any, p: Any) -> Any:
        return {1, 2} if p == "set" else p

    path = str(tmp_path / "out.db")
    async with Scheduler([Pool("default", run, autoscale=False)], store=SqliteStore(path)) as s:
        lost, kept, none = await s.submit("set"), await s.submit("x"), await s.submit(None)
        assert await lost == {1, 2}, "in memory the output is there"
        assert await kept == "x" and await none is None
    async with Scheduler([Pool("default", run, autoscale=False)], store=SqliteStore(path)) as s:
        assert await s.status(lost.id) == "succeeded"
        h = await s.handle(lost.id)
        assert h is not None
        with pytest.raises(TaskFailed) as ei:
            await h
        assert ei.value.status == "succeeded" and ei.value.task_id == lost.id
        lost_msg = f"task {lost.id} succeeded, but its output is no longer available"
        assert str(ei.value) == f"task {lost.id} ended as succeeded: {lost_msg}"
        h2, h3 = await s.handle(kept.id), await s.handle(none.id)
        assert h2 is not None and h3 is not None
        assert await h2 == "x" and await h3 is None, "a real None output stays None"


async def test_pause_and_replay_survive_restart(make: Any) -> None:
    await contract.check_pause_and_replay_survive_restart(make)


async def test_paused_table_is_added_to_an_existing_database(make: Any, db: pathlib.Path) -> None:
    """A database written before the table existed gets it on open (additive migration)."""
    s = make()
    await s.open()
    await s.close()
    conn = sqlite3.connect(db)
    conn.execute("DROP TABLE cronoq_paused")
    conn.commit()
    conn.close()
    await contract.check_pause_and_replay_survive_restart(make)


async def test_sharded_ids_round_trip(make: Any) -> None:
    await contract.check_sharded_ids(make)


async def test_store_of_another_shard_refused(make: Any) -> None:
    await contract.check_store_of_another_shard_refused(make)


async def test_values_bind_as_sqlite_types(make: Any, db: pathlib.Path) -> None:
    # the identity adapters (None, bytes, bool: store/sqlite.py) bind as sqlite3 would without them
    s, ep = await contract.leader(make)
    try:
        await s.commit([Submitted(1, 1, 0, TaskRecord(pool="default", payload=b"\x00p"))], ep, codec)
        await s.commit([StatusChange(1, "succeeded", 1, 5, None, {"ok": 1}, True)], ep, codec)
        with raw(db) as c:
            row = c.execute(
                "SELECT typeof(payload), payload, typeof(key), typeof(message), typeof(has_output), "
                "has_output, typeof(output) FROM cronoq_tasks"
            ).fetchone()
        assert row == ("blob", b"\x00p", "null", "null", "integer", 1, "blob")
    finally:
        await s.close()


async def test_each_row_shape_writes_its_columns(make: Any, db: pathlib.Path) -> None:
    # fold's rows go through statements with NULL literals when they fit them (store/sqlite.py
    # _write_tasks): every shape must write what the general statements write
    s, ep = await contract.leader(make)
    rec = TaskRecord(pool="default", payload=b"p")
    try:
        await s.commit([Submitted(i, i, 0, rec) for i in (1, 2, 3)], ep, codec)  # new rows
        await s.commit(
            [  # one insert that already ran (general), a start, a failure with a message
                Submitted(4, 4, 0, rec),
                StatusChange(4, "running", 1, 7),
                StatusChange(1, "running", 1, 8),
                StatusChange(2, "failed", 1, 9, "boom"),
            ],
            ep,
            codec,
        )
        await s.commit([StatusChange(1, "succeeded", 1, 10, None, {"x": 1}, True)], ep, codec)
        await s.commit([StatusChange(3, "running", 1, 11), StatusChange(3, "retrying", 1, 12)], ep, codec)
        with raw(db) as c:
            rows = c.execute(
                "SELECT id, status, attempt, started, finished, message, output, has_output, payload "
                "FROM cronoq_tasks ORDER BY id"
            ).fetchall()
        assert rows == [
            (1, "succeeded", 1, 8, 10, None, b'{"x":1}', 1, b"p"),
            (2, "failed", 1, None, 9, "boom", None, 0, b"p"),
            (3, "retrying", 1, 11, None, None, None, 0, b"p"),
            (4, "running", 1, 7, None, None, None, 0, b"p"),
        ]
    finally:
        await s.close()


def _rows_of_every_shape(n: int) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """fold-shaped rows (store/_records.py: inserts in TASK_COLUMNS order, updates as status,
    attempt, message, output, has_output, started, finished, id) of every shape _write_tasks
    tells apart, with NULLs, bytes (empty, NUL, every byte value), extreme ints and unicode;
    from n = 5 on, a bare start of a finished row among those of live ones."""
    big = 2**63 - 1
    blobs = [b"", b"\x00", bytes(range(256)), "ü€😀".encode()]
    texts = ["", "ü€😀 \x00 nul", "a'b\"c", "x" * 5000]
    inserts: list[tuple[Any, ...]] = []
    updates: list[tuple[Any, ...]] = []
    for i in range(n):
        tid = big - i if i % 3 == 0 else i + 1
        new = i % 4 != 0  # the NULL-literal shape, else the general one (ran before commit)
        key = None if i % 2 else texts[i % 4]
        ints = (-(2**63) + i, big - i) if i % 5 == 0 else (i, i * 7)
        payload = None if i % 7 == 0 else blobs[i % 4]
        head = (tid, ints[0], ints[1], texts[i % 4] or "p", "kind", -i, key, '{"s": "ü"}', payload)
        if new:
            inserts.append((*head, "pending", 0, None, None, None, None, 0))
        else:
            out = blobs[i % 4] if i % 8 == 0 else None
            # (some already finished: a bare start of one misses _UPDATE_LIVE, goes through the fallback)
            fin = big - 2 if i % 8 == 4 else None
            inserts.append((*head, "running", 2, big, fin, texts[i % 4], out, int(out is not None)))
        if i % 5 == 0:
            continue  # no update
        shape = i % 3
        started = None if i % 2 else big - i
        if shape == 0:  # an end with an output
            updates.append(("succeeded", 1, None, blobs[i % 4], 1, started, big, tid))
        elif shape == 1:  # a bare start
            updates.append(("running", 1, None, None, 0, started, None, tid))
        else:  # the general shape: a message, with or without an output
            out = None if i % 4 else blobs[i % 4]
            updates.append(("failed", 3, texts[i % 4], out, int(out is not None), started, big - 1, tid))
    return inserts, updates


@pytest.mark.parametrize("multi", [True, False])
@pytest.mark.parametrize("n", [1, 2, 3, 61, 62, 63, 1000])
async def test_row_shapes_store_what_the_general_statements_do(
    tmp_path: pathlib.Path, n: int, multi: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    # _write_tasks writes the common rows through statements with NULL literals (store/sqlite.py),
    # several rows a statement (or, multi False: an older SQLite, one a step): for every shape,
    # every stored value and its type must equal the general per-row statements'
    from cronoq.store import sqlite as mod

    monkeypatch.setattr(mod, "_MULTI_ROWS", multi and mod._multi_rows())

    dbs = []
    for name in ("many", "each"):
        s = SqliteStore(tmp_path / f"{name}.db")
        await s.open()
        await s.close()
        dbs.append(raw(tmp_path / f"{name}.db"))
    inserts, updates = _rows_of_every_shape(n)
    many, each = dbs
    try:
        for first, second in ((inserts, []), ([], updates), (inserts, updates)):
            many.execute("BEGIN")
            mod._write_tasks(many, first, second)
            many.execute("COMMIT")
            each.execute("BEGIN")
            each.executemany(mod._INSERT, first)
            each.executemany(mod._UPDATE, second)
            each.execute("COMMIT")
        cols = ", ".join(f"{c}, typeof({c})" for c in mod.TASK_COLUMNS)
        sql = f"SELECT {cols} FROM cronoq_tasks ORDER BY id"
        got, want = many.execute(sql).fetchall(), each.execute(sql).fetchall()
        assert len(want) == n
        assert got == want
    finally:
        for c in dbs:
            c.close()


def test_rows_are_written_several_a_statement(tmp_path: pathlib.Path) -> None:
    # store/sqlite.py _write_rows: 62 new rows are 2 statements (32 + 16 rows) and 14 steps, not
    # 62 steps, their 62 ends 1 statement (32) and 30 steps; 300 rows are 256 + 32 rows and 12
    # steps; 1 row is a step
    from cronoq.store import sqlite as mod

    if not mod._multi_rows():
        pytest.skip(f"SQLite {sqlite3.sqlite_version} has no UPDATE ... FROM: one row a step")
    s = SqliteStore(tmp_path / "m.db")
    asyncio.run(s.open())
    asyncio.run(s.close())
    c = raw(tmp_path / "m.db")
    seen: list[str] = []
    c.set_trace_callback(seen.append)
    try:
        cases = (
            (62, [32, 16] + [1] * 14, [32] + [1] * 30),
            (300, [256, 32] + [1] * 12, [256, 32] + [1] * 12),
            (1, [1], [1]),
        )
        for n, ins, ups in cases:
            base = c.execute("SELECT coalesce(max(id), 0) FROM cronoq_tasks").fetchone()[0]
            inserts = [(base + i + 1, i, i, "p", "k", 0, None, "{}", None, "pending", 0) for i in range(n)]
            inserts = [(*r, None, None, None, None, 0) for r in inserts]
            ends = [("succeeded", 1, None, b"o", 1, 5, 9, base + i + 1) for i in range(n)]
            seen.clear()
            c.execute("BEGIN")
            mod._write_tasks(c, inserts, ends)
            c.execute("COMMIT")
            # (the trace shows each statement with its values: a row per 'pending' or 'succeeded')
            assert [q.count("'pending'") for q in seen if q.startswith("INSERT")] == ins
            assert [q.count("'succeeded'") for q in seen if q.startswith("UPDATE")] == ups
        done = c.execute("SELECT count(*), sum(status = 'succeeded') FROM cronoq_tasks").fetchone()
        assert done == (363, 363)
    finally:
        c.close()


def _random_rows(rng: random.Random) -> tuple[list[tuple[Any, ...]], ...]:
    """A table's rows before a commit and the commit's insert and update rows, fold-shaped
    (one row per task: the lists' ids are distinct), of random shapes, sizes near the chunks'
    bounds, ids with the high bits; some updated rows finished, some missing."""
    big = 2**63 - 1
    sizes = [0, 1, 15, 16, 17, 31, 32, 33, 63, 64, 255, 256, 257, 300, 513]
    ni, nu = rng.choice(sizes), rng.choice(sizes)
    ids: set[int] = set()
    while len(ids) < ni + nu:
        ids.add(rng.choice([rng.randrange(1, 10**4), (rng.randrange(1, 2**15) << 48) | rng.randrange(10**4),
                            -rng.randrange(1, 10**4), big, -(2**63)]))  # fmt: skip
    order = sorted(ids)
    rng.shuffle(order)

    def insert(tid: int) -> tuple[Any, ...]:
        head = (tid, rng.randrange(-(2**63), 2**63), big, "p", "k", -1, rng.choice([None, "key"]), "{}",
                rng.choice([None, b"", b"\x00", bytes(range(256))]))  # fmt: skip
        if rng.random() < 0.6:
            return (*head, "pending", 0, None, None, None, None, False)
        out = rng.choice([None, b"", b"o"])
        fin, msg = rng.choice([None, None, 5, big]), rng.choice([None, "m"])
        return (*head, "running", 2, rng.choice([None, 3]), fin, msg, out, out is not None)

    def update(tid: int, live: bool) -> tuple[Any, ...]:
        started = rng.choice([None, 7, big, -(2**63)])
        shape = 0 if live else rng.randrange(4)
        if shape == 0:
            return ("running", 1, None, None, False, started, None, tid)
        if shape == 1:
            return ("cancelled", 2, None, None, False, started, big - 3, tid)
        if shape == 2:
            return ("succeeded", 1, None, rng.choice([b"", b"o"]), True, started, rng.choice([None, 9]), tid)
        out = rng.choice([None, b"o"])
        return ("failed", 3, rng.choice(["", "boom"]), out, out is not None, started, 9, tid)

    ins, ups = order[:ni], order[ni:]
    exist = rng.choice([1.0, 0.9])
    before = [insert(t) for t in ins if rng.random() < 0.3]
    before += [insert(t) for t in ups if rng.random() < exist]
    live = rng.random() < 0.4  # one shape only: _UPDATE_LIVE's chunks, its fallback when one missed
    return before, [insert(t) for t in ins], [update(t, live) for t in ups]


@pytest.mark.parametrize("seed", range(12))
def test_write_paths_agree_on_random_rows(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    # store/sqlite.py _write_tasks: the multi-row statements, the one-row-a-step ones (an older
    # SQLite) and the general per-row statements store the same values of the same types
    from cronoq.store import sqlite as mod

    if not mod._multi_rows():
        pytest.skip(f"SQLite {sqlite3.sqlite_version} has no UPDATE ... FROM: one row a step")
    rng = random.Random(seed)
    cols = ", ".join(f"{c}, typeof({c})" for c in mod.TASK_COLUMNS)
    for _ in range(4):
        before, inserts, updates = _random_rows(rng)
        tables = []
        for how in ("multi", "each", "general"):
            c = sqlite3.connect(":memory:", isolation_level=None)
            try:
                c.executescript(mod._SCHEMA)
                c.executemany(mod._INSERT, before)
                c.execute("BEGIN")
                if how == "general":
                    c.executemany(mod._INSERT, inserts)
                    c.executemany(mod._UPDATE, updates)
                else:
                    monkeypatch.setattr(mod, "_MULTI_ROWS", how == "multi")
                    mod._write_tasks(c, inserts, updates)
                c.execute("COMMIT")
                tables.append(c.execute(f"SELECT {cols} FROM cronoq_tasks ORDER BY id").fetchall())
            finally:
                c.close()
        assert tables[0] == tables[2]
        assert tables[1] == tables[2]
