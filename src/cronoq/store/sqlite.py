"""SqliteStore: one SQLite file, WAL journal, leadership by a renewed lease row
(docs/reference/behaviour.md#stores).

One connection.  Loads, queries, prunes, the lease and big commits run on one dedicated thread
(a single-thread executor), so the event loop never waits for them; a small commit runs on the
event loop's thread when the dedicated one is idle (see :meth:`SqliteStore.commit`).  A lock
keeps the two threads from ever using the connection at once.  A commit folds its mutations
into one row write per task (``_records.fold``) and writes the rows of each shape several a
statement where that is cheaper than a step per row (``_write_rows``).

Tables (created on open):

* ``cronoq_meta(k, v)`` — schema version;
* ``cronoq_leader(id=1, epoch, owner, expires_at)`` — the lease row: the current term's fencing
  epoch, the owner id of the leader (NULL after a clean release) and when its lease lapses
  (Unix seconds, wall clock: every sharer is on one host);
* ``cronoq_tasks`` — one row per task (see :data:`cronoq.store._records.TASK_COLUMNS`),
  indexed on ``finished`` (the finished rows), ``key`` and the live rows' ids
  (``cronoq_tasks_live``, added by a later version the same way as ``cronoq_paused``): a start
  reads the live rows and a window of finished ones through them, never the whole history;
* ``cronoq_schedules(name, spec, payload, next, last)``;
* ``cronoq_paused(kind, name)`` — the paused pools and recurring schedules (added by a later
  version: ``CREATE TABLE IF NOT EXISTS`` adds it to an existing database on open);
* ``cronoq_bulk_keys(action, tenant, key, matched, acted, done, at)`` — the progress of the
  newest :data:`~cronoq.engine.mutations.BULK_KEYS` bulk request keys (added the same way;
  older ones are deleted by the commit that writes a newer one).

A standby polls the lease row every ``lock_poll`` seconds and takes it (bumping the epoch) when
it has lapsed or was released.  The leader renews it every ``lease_renew`` seconds; every commit
also renews it, in the same statement that checks the epoch (``UPDATE … WHERE epoch = ? AND
owner = ?``), inside ``BEGIN IMMEDIATE`` — the database write lock serializes it with a takeover.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import math
import os
import socket
import sqlite3
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from itertools import chain
from typing import Any, TypeVar

from cronoq.engine.mutations import BULK_KEYS, Mutation, Recovered, RecoveredTerminal
from cronoq.errors import Fenced, SchedulerError
from cronoq.store import _journal
from cronoq.store._records import (
    BULK_KEY_COLUMNS,
    KEY_HISTORY_ROWS,
    PAGE_COLUMNS,
    PRUNE_JOURNALS,
    PRUNE_LASTS,
    PRUNE_LIVE_DEPS,
    TASK_COLUMNS,
    Batch,
    RefsCache,
    add_task_rows,
    db_id,
    finish_recovered,
    finished_by_key,
    finished_record,
    finished_records,
    fold,
    history_refs,
    key_history_rows,
    newest_holders,
    prune_refs,
)
from cronoq.store.base import (
    TransientStoreError,
    bounded,
    check_retention,
    check_shard,
    keep_leading,
    load_window,
    stepped_down,
    stop_task,
)
from cronoq.store.codec import Codec

__all__ = ["SqliteStore"]

T = TypeVar("T")

SCHEMA_VERSION = "1"


def _identity_adapters() -> None:
    """Register identity adapters for ``None``, ``bytes`` and ``bool`` in :mod:`sqlite3` at a
    store's open (unless the process registered its own): the values bind exactly as before.

    sqlite3 binds int, float and str directly but runs every other parameter through its
    adaptation protocol; without an adapter registered for the type, that is a failed lookup
    of ``__adapt__`` and one of ``__conform__``, each raising and clearing an AttributeError
    (about 3,000 instructions a parameter, measured with callgrind on CPython 3.11).  A task
    row has half a dozen NULL or BLOB columns: a tenth of the instructions of a commit.  With an
    adapter the lookup finds it and calls it: C callables (``{}.get`` returns None for None,
    ``bytes`` returns an exact bytes object itself, ``int`` makes a bool the 0 or 1 sqlite3
    binds it as anyway)."""
    identity: tuple[tuple[type, Callable[[Any], Any]], ...] = (
        (type(None), {}.get),
        (bytes, bytes),
        (bool, int),
    )
    for tp, adapt in identity:
        if (tp, sqlite3.PrepareProtocol) not in sqlite3.adapters:
            sqlite3.register_adapter(tp, adapt)


#: Ids are ``(epoch << 48) | seq`` in a signed 64-bit integer column.
MAX_EPOCH = (1 << 15) - 1

_SCHEMA = """
CREATE TABLE IF NOT EXISTS cronoq_meta (k TEXT PRIMARY KEY, v TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS cronoq_leader (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    epoch INTEGER NOT NULL,
    owner TEXT,
    expires_at REAL NOT NULL
);
INSERT OR IGNORE INTO cronoq_leader (id, epoch, owner, expires_at) VALUES (1, 0, NULL, 0);
CREATE TABLE IF NOT EXISTS cronoq_tasks (
    id INTEGER PRIMARY KEY,
    seq INTEGER NOT NULL,
    arrival INTEGER NOT NULL,
    pool TEXT NOT NULL,
    kind TEXT NOT NULL,
    priority INTEGER NOT NULL,
    key TEXT,
    spec TEXT NOT NULL,
    payload BLOB,
    status TEXT NOT NULL,
    attempt INTEGER NOT NULL,
    started INTEGER,
    finished INTEGER,
    message TEXT,
    output BLOB,
    has_output INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS cronoq_tasks_finished ON cronoq_tasks (finished)
    WHERE finished IS NOT NULL;
CREATE INDEX IF NOT EXISTS cronoq_tasks_key ON cronoq_tasks (key) WHERE key IS NOT NULL;
CREATE INDEX IF NOT EXISTS cronoq_tasks_live ON cronoq_tasks (id) WHERE finished IS NULL;
CREATE TABLE IF NOT EXISTS cronoq_schedules (
    name TEXT PRIMARY KEY,
    spec TEXT NOT NULL,
    payload BLOB,
    next INTEGER,
    last INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS cronoq_paused (
    kind TEXT NOT NULL,
    name TEXT NOT NULL,
    PRIMARY KEY (kind, name)
);
CREATE TABLE IF NOT EXISTS cronoq_bulk_keys (
    action TEXT NOT NULL,
    tenant TEXT NOT NULL,
    key TEXT NOT NULL,
    matched INTEGER NOT NULL,
    acted INTEGER NOT NULL,
    done INTEGER NOT NULL,
    at INTEGER NOT NULL,
    PRIMARY KEY (action, tenant, key)
);
"""
_BULK_COLS = ", ".join(BULK_KEY_COLUMNS)
_BULK_UPSERT = (
    f"INSERT INTO cronoq_bulk_keys ({_BULK_COLS}) VALUES (?, ?, ?, ?, ?, ?, ?) "
    "ON CONFLICT (action, tenant, key) DO UPDATE SET matched = excluded.matched, "
    "acted = excluded.acted, done = excluded.done, at = excluded.at"
)
_BULK_PRUNE = (
    "DELETE FROM cronoq_bulk_keys WHERE rowid NOT IN "
    f"(SELECT rowid FROM cronoq_bulk_keys ORDER BY at DESC LIMIT {BULK_KEYS})"
)

_COLS = ", ".join(TASK_COLUMNS)
_UPSERT = "ON CONFLICT (id) DO UPDATE SET " + ", ".join(
    f"{c} = excluded.{c}" for c in TASK_COLUMNS if c != "id"
)
#: A start's rows: the live ones (index ``cronoq_tasks_live``), then the newest ones finished
#: within the window (``cronoq_tasks_finished``; LIMIT -1: all), in no id order
#: (``finish_recovered`` sorts them); two statements of one read transaction, cheaper to step
#: than their UNION ALL (the limit needs a subquery there)
_LOAD_LIVE = f"SELECT {_COLS} FROM cronoq_tasks WHERE finished IS NULL"
_LOAD_WINDOW = (
    f"SELECT {_COLS} FROM cronoq_tasks WHERE finished IS NOT NULL AND finished >= ? "
    "ORDER BY finished DESC LIMIT ?"
)
#: older finished rows the loaded state refers to (``_records.history_refs``): by id, and by key
_LOAD_IDS = (
    f"SELECT {_COLS} FROM cronoq_tasks WHERE id IN (SELECT value FROM json_each(?)) AND finished IS NOT NULL"
)
_LOAD_KEYS = (
    f"SELECT {_COLS} FROM cronoq_tasks WHERE key IN (SELECT value FROM json_each(?)) "
    "AND finished IS NOT NULL ORDER BY finished DESC, id DESC"
)
#: a prune: whether any row expired (the index on finished); what live state refers to
#: (``_records.prune_refs``) and the key holders among them; the delete, which skips the ids
#: to keep (a JSON array), the oldest first through the index on finished
_PRUNE_ANY = "SELECT 1 FROM cronoq_tasks WHERE finished IS NOT NULL AND finished < ? LIMIT 1"
_PRUNE_LIVE_DEPS = PRUNE_LIVE_DEPS.format(t="")
_PRUNE_JOURNALS = PRUNE_JOURNALS.format(t="")
_PRUNE_LASTS = PRUNE_LASTS.format(t="")
_PRUNE_KEYS = (
    "SELECT id, key, spec FROM cronoq_tasks WHERE key IN (SELECT value FROM json_each(?)) "
    "AND finished IS NOT NULL ORDER BY finished DESC, id DESC"
)
_PRUNE_KEEP = "id NOT IN (SELECT value FROM json_each(?))"
_PRUNE = f"DELETE FROM cronoq_tasks WHERE finished IS NOT NULL AND finished < ? AND {_PRUNE_KEEP}"
_PRUNE_OLDEST = (
    "DELETE FROM cronoq_tasks WHERE id IN (SELECT id FROM cronoq_tasks WHERE finished IS NOT NULL "
    f"AND finished < ? AND {_PRUNE_KEEP} ORDER BY finished LIMIT ?)"
)


def _update_sql(message: str, output: str, has_output: str) -> str:
    """A task row's status change; the three columns given as ``?`` or as literals."""
    return (
        f"UPDATE cronoq_tasks SET status = ?, attempt = ?, message = {message}, output = {output}, "
        f"has_output = {has_output}, started = COALESCE(started, ?), finished = ? WHERE id = ?"
    )


_INSERT = f"INSERT INTO cronoq_tasks ({_COLS}) VALUES ({', '.join('?' * len(TASK_COLUMNS))}) {_UPSERT}"
_UPDATE = _update_sql("?", "?", "?")
# The common rows again with their NULL columns written as literals: a row binds fewer
# parameters, and a None (like a bytes or bool value) costs sqlite3 an adapter lookup and call
# per parameter.  A new task that never ran (started, finished, message, output NULL):
_INSERT_NEW = (
    f"INSERT INTO cronoq_tasks ({_COLS}) VALUES ({', '.join('?' * 11)}, NULL, NULL, NULL, NULL, 0) {_UPSERT}"
)
#: a status change without a message, without an output (a start) or with one (an end):
#: status, attempt, (output,) started, finished, id
_UPDATE_BARE = _update_sql("NULL", "NULL", "0")
_UPDATE_OUTPUT = _update_sql("NULL", "?", "1")
#: a bare status change to a live status (a start, a retry without message) of a row still
#: live: ``finished`` is NULL before and after, so it is left out of the SET — a SET that
#: names ``finished`` makes SQLite rewrite the row's entry in every index on it or whose WHERE
#: names it (``cronoq_tasks_live``: a delete and an insert), about a third of the statement's
#: cost (``bench/sqlite_commit.py``).  status, attempt, started, id; the rows it missed (a
#: finished one: none the engine writes) go through ``_UPDATE_BARE`` (see ``_write_tasks``)
_UPDATE_LIVE = (
    "UPDATE cronoq_tasks SET status = ?, attempt = ?, message = NULL, output = NULL, has_output = 0, "
    "started = COALESCE(started, ?) WHERE id = ? AND finished IS NULL"
)


#: Rows a multi-row statement writes at most (``_write_rows``): 256 rows of the widest shape
#: bind 4,096 parameters, far below SQLite's bound of 32,766 (3.32 and later)
_CHUNK = 256


def _multi_rows() -> bool:
    """Whether this SQLite takes the multi-row statements (asked at the first write, not at
    import): ``UPDATE … FROM`` (3.33) and the parameters of ``_CHUNK`` rows of the widest shape
    (a library built with a lower bound than its default writes each row with its own step,
    ``executemany``, as an older one does)."""
    global _MULTI_ROWS
    if _MULTI_ROWS is None:
        ok = sqlite3.sqlite_version_info >= (3, 33, 0)
        if ok:
            probe = sqlite3.connect(":memory:")
            try:
                ok = probe.getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER) >= _CHUNK * len(TASK_COLUMNS)
            finally:
                probe.close()
        _MULTI_ROWS = ok
    return _MULTI_ROWS


_MULTI_ROWS: bool | None = None


def _insert_rows(row: str) -> Callable[[int], str]:
    """An INSERT of ``n`` rows of the placeholder group ``row``, upserted as ``_INSERT``."""
    return lambda n: f"INSERT INTO cronoq_tasks ({_COLS}) VALUES {', '.join([row] * n)} {_UPSERT}"


def _update_rows(width: int, sets: str, where: str = "") -> Callable[[int], str]:
    """An UPDATE of ``n`` rows of ``width`` parameters each (the task's id the last), joined
    to its VALUES list by id: ``sets`` names the list's columns ``v.column1``…"""
    row = f"({', '.join('?' * width)})"
    return lambda n: (
        f"UPDATE cronoq_tasks SET {sets} FROM (VALUES {', '.join([row] * n)}) AS v "
        f"WHERE cronoq_tasks.id = v.column{width}{where}"
    )


_STARTED = "started = COALESCE(cronoq_tasks.started, v.column{})"
#: the multi-row forms of the statements above (same parameters per row, in the same order):
#: statement text for ``n`` rows, by the single-row statement
_MANY_ROWS: dict[str, Callable[[int], str]] = {
    _INSERT_NEW: _insert_rows(f"({', '.join('?' * 11)}, NULL, NULL, NULL, NULL, 0)"),
    _INSERT: _insert_rows(f"({', '.join('?' * len(TASK_COLUMNS))})"),
    _UPDATE: _update_rows(
        8,
        "status = v.column1, attempt = v.column2, message = v.column3, output = v.column4, "
        f"has_output = v.column5, {_STARTED.format(6)}, finished = v.column7",
    ),
    _UPDATE_BARE: _update_rows(
        5,
        "status = v.column1, attempt = v.column2, message = NULL, output = NULL, has_output = 0, "
        f"{_STARTED.format(3)}, finished = v.column4",
    ),
    _UPDATE_OUTPUT: _update_rows(
        6,
        "status = v.column1, attempt = v.column2, message = NULL, output = v.column3, has_output = 1, "
        f"{_STARTED.format(4)}, finished = v.column5",
    ),
    _UPDATE_LIVE: _update_rows(
        4,
        f"status = v.column1, attempt = v.column2, message = NULL, output = NULL, has_output = 0, "
        f"{_STARTED.format(3)}",
        " AND cronoq_tasks.finished IS NULL",
    ),
}
#: the fewest rows a multi-row statement writes (the rest: ``executemany``): below these a
#: multi-row statement cost more CPU than the steps it saves (an ``UPDATE … FROM`` plans a
#: join over its VALUES list; measured in ``_write_rows``)
_LEAST_ROWS: dict[str, int] = {sql: 16 if sql.startswith("INSERT") else 32 for sql in _MANY_ROWS}


@functools.cache
def _many_text(sql: str, n: int) -> str:
    """The multi-row text of the single-row statement ``sql`` for ``n`` rows, made once."""
    return _MANY_ROWS[sql](n)


def _write_rows(conn: sqlite3.Connection, sql: str, rows: list[tuple[Any, ...]]) -> int:
    """Write ``rows`` with the statement ``sql`` (one of ``_MANY_ROWS``): the rows it changed.

    sqlite3's ``executemany`` steps the statement once per row, and around every step it
    releases the GIL and takes it back: a row's bookkeeping in the module, and, when another
    thread wants the GIL meanwhile (gRPC's, or the event loop's while the store's thread
    commits), a hand-off of the GIL per row.  A multi-row statement (``INSERT … VALUES (…),
    (…)``, ``UPDATE … FROM (VALUES …)``) writes its rows in one step, with the same B-tree
    work, and one GIL hand-off for up to ``_CHUNK`` rows; but it costs more to start (an
    UPDATE's join over its VALUES most), so it pays from ``_LEAST_ROWS`` rows on.  The rows go
    in chunks of powers of two (62 inserts: 32 + 16 and 14 through ``executemany``), so a
    statement shape has a handful of texts (sqlite3 caches the prepared statements by text).
    The statements' CPU per commit (medians of 1,200 commits of each, taken in turn, load 7-9;
    a commit of W submits, the previous W's ends and half their starts): W = 64 (a
    64-coroutine wave), 198 us against 259 with ``executemany``; W = 500, 1,870 against
    2,050; W = 4 and 16, 31 and 71 against 30 and 72 (48 and 78 with chunks down to 2 rows)."""
    least = _LEAST_ROWS[sql]
    if len(rows) < least or not _multi_rows():
        return int(conn.executemany(sql, rows).rowcount)
    changed = 0
    i, left = 0, len(rows)
    while left >= least:
        n = _CHUNK if left >= _CHUNK else 1 << (left.bit_length() - 1)
        changed += conn.execute(_many_text(sql, n), list(chain.from_iterable(rows[i : i + n]))).rowcount
        i += n
        left -= n
    if left:
        changed += conn.executemany(sql, rows[i:]).rowcount
    return changed


def _write_tasks(
    conn: sqlite3.Connection, inserts: list[tuple[Any, ...]], updates: list[tuple[Any, ...]]
) -> None:
    """Write fold's task rows (one per task: their order does not matter), the common shapes
    through the statements with NULL literals, the rest through the general ones, several
    rows a statement (``_write_rows``)."""
    fresh: list[tuple[Any, ...]] = []  # _INSERT_NEW's rows
    other: list[tuple[Any, ...]] = []  # _INSERT's
    for r in inserts:  # (columns: _records.TASK_COLUMNS)
        if r[11] is None and r[12] is None and r[13] is None and r[14] is None and not r[15]:
            fresh.append(r[:11])
        else:
            other.append(r)
    live: list[tuple[Any, ...]] = []  # _UPDATE_LIVE's rows
    bare: list[tuple[Any, ...]] = []  # _UPDATE_BARE's
    outs: list[tuple[Any, ...]] = []  # _UPDATE_OUTPUT's
    full: list[tuple[Any, ...]] = []  # _UPDATE's
    for u in updates:
        status, attempt, message, output, has_output, started, finished, tid = u
        if message is None and has_output:
            outs.append((status, attempt, output, started, finished, tid))
        elif message is None and output is None:
            if finished is None:
                live.append((status, attempt, started, tid))
            else:
                bare.append((status, attempt, started, finished, tid))
        else:
            full.append(u)
    # (inserts first: a row's update never meets its own insert, fold made them one write;
    # fold writes a task once, so no statement names an id twice)
    writes = (
        (_INSERT_NEW, fresh),
        (_INSERT, other),
        (_UPDATE_OUTPUT, outs),
        (_UPDATE_BARE, bare),
        (_UPDATE, full),
    )
    for sql, rows in writes:
        if rows:
            _write_rows(conn, sql, rows)
    if live and _write_rows(conn, _UPDATE_LIVE, live) != len(live):
        # a row it skipped (finished, or none): all of them again as _UPDATE_BARE writes
        # them (the same values again for the others: idempotent)
        _write_rows(conn, _UPDATE_BARE, [(s, a, st, None, i) for s, a, st, i in live])


def _positive(name: str, v: float) -> float:
    if not isinstance(v, int | float) or not math.isfinite(v) or v <= 0:
        raise ValueError(f"{name} must be a finite, positive number of seconds (got {v!r})")
    return float(v)


class SqliteStore:
    """A durable store in one SQLite file; several processes on one host may share it."""

    durable = True
    #: How long a statement waits for another connection's lock before failing (seconds).
    busy_timeout = 5.0
    #: A commit of fewer mutations than this runs on the calling (event-loop) thread when the
    #: store's thread is idle, instead of being handed to that thread; 0: never.  See
    #: :meth:`commit` for why.
    inline_below = 256
    #: An inline commit that took longer than this (seconds: a disk that stalls, a checkpoint)
    #: sends the commits of the next ``inline_pause`` seconds to the store's thread, so a slow
    #: disk blocks the event loop once, not at every commit while it stays slow; unless the
    #: next commit, on that thread, took less: then the slow one was the machine's load (the
    #: loop's thread preempted mid-commit), not the disk, and commits run inline again.
    inline_slow = 0.05
    inline_pause = 10.0

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        lease_ttl: float = 10.0,
        lease_renew: float = 2.0,
        lock_poll: float = 0.5,
        retention: float = 3600.0,
        full_sync: bool = True,
        commit_timeout: float | None = None,
        shard: str | None = None,
    ) -> None:
        if not isinstance(path, str | os.PathLike):
            raise TypeError(f"path must be a str or os.PathLike (got {type(path).__name__})")
        self.path = os.fspath(path)
        self.lease_ttl = _positive("lease_ttl", lease_ttl)
        self.lease_renew = _positive("lease_renew", lease_renew)
        if self.lease_renew >= self.lease_ttl:
            raise ValueError(f"lease_renew ({lease_renew}) must be shorter than lease_ttl ({lease_ttl})")
        self.lock_poll = _positive("lock_poll", lock_poll)
        self.retention = check_retention(retention)
        self.full_sync = bool(full_sync)
        #: the shard this store belongs to (recorded in cronoq_meta; another one is refused)
        self.shard = shard
        #: a commit taking longer raises CommitDeadline (base.bounded); None: unbounded
        self.commit_timeout = None if commit_timeout is None else _positive("commit_timeout", commit_timeout)
        self.owner = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:12]}"
        self.on_lost: Callable[[], None] | None = None
        self._epoch = 0
        self._leading = False
        self._conn: sqlite3.Connection | None = None
        self._refs = RefsCache()  # (prunes: the live definitions' references, parsed once)
        self._executor: ThreadPoolExecutor | None = None
        #: held by whichever thread uses the connection (the store's thread for every job, the
        #: event loop's for an inline commit): never two at once
        self._lock = threading.Lock()
        #: monotonic instant before which no commit runs inline (``inline_slow``)
        self._inline_after = 0.0
        #: the next commit on the store's thread tells whether the disk is slow (``inline_slow``)
        self._inline_probe = False
        #: the connection's busy timeout is 0, as an inline commit left it (``_begin_now``):
        #: the store's thread puts it back before its next job (``_locked``)
        self._busy_zero = False
        self._renewer: asyncio.Task[None] | None = None
        #: monotonic instant the lease may lapse at (see ``base.lease_left``)
        self.lease_until = 0.0

    def __repr__(self) -> str:
        return f"SqliteStore({self.path!r})"

    @property
    def epoch(self) -> int:
        return self._epoch

    @property
    def leading(self) -> bool:
        """Last known leadership (no I/O); see :meth:`is_leader` for a checked answer."""
        return self._leading

    # ------------------------------------------------------------------ thread plumbing

    def _submit(self, fn: Callable[..., T], *args: Any) -> asyncio.Future[T]:
        """``fn(*args)`` on the store's thread, holding the connection's lock: its future
        (sqlite3 errors as they are)."""
        if self._executor is None:
            raise SchedulerError(f"SQLite store {self.path!r} is not open; call `await store.open()`")
        return asyncio.get_running_loop().run_in_executor(self._executor, self._locked, fn, *args)

    def _locked(self, fn: Callable[..., T], *args: Any) -> T:
        with self._lock:
            if self._busy_zero:
                self._busy_zero = False
                if self._conn is not None:
                    self._conn.execute(f"PRAGMA busy_timeout = {round(self.busy_timeout * 1000)}")
            return fn(*args)

    async def _call(self, fn: Callable[..., T], *args: Any) -> T:
        fut = self._submit(fn, *args)
        try:
            return await fut
        except sqlite3.Error as e:
            raise self._error(e) from e

    def _error(self, e: sqlite3.Error) -> SchedulerError:
        msg = str(e)
        low = msg.lower()
        where = f"SQLite store {self.path!r}"
        if "locked" in low or "busy" in low:
            return TransientStoreError(
                f"{where}: database is locked by another connection (waited {self.busy_timeout:g} s)"
            )
        if "readonly" in low or "read-only" in low:
            return SchedulerError(f"{where}: the database is read-only ({msg})")
        if "not a database" in low or "malformed" in low or "corrupt" in low:
            return SchedulerError(f"{where}: the file is corrupt or not a SQLite database ({msg})")
        if "unable to open" in low:
            return SchedulerError(f"{where}: cannot open the database file ({msg})")
        if "disk i/o" in low:
            return TransientStoreError(f"{where}: disk I/O error ({msg})")
        return SchedulerError(f"{where}: {msg}")

    def _db(self) -> sqlite3.Connection:
        if self._conn is None:
            raise SchedulerError(f"SQLite store {self.path!r} is closed")
        return self._conn

    # ------------------------------------------------------------------ open / close

    async def open(self) -> None:
        if self._executor is not None:
            return
        self._check_path()
        _identity_adapters()  # (at a store's open, not at import: `import cronoq` changes nothing)
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="cronoq-sqlite")
        try:
            await self._call(self._open_sync)
        except BaseException:
            with contextlib.suppress(Exception):
                await self._call(self._close_sync)
            self._executor.shutdown(wait=False)
            self._executor = None
            raise

    def _check_path(self) -> None:
        path = self.path
        directory = os.path.dirname(os.path.abspath(path))
        if not os.path.isdir(directory):
            raise SchedulerError(f"SQLite store {path!r}: directory {directory!r} does not exist")
        if os.path.isdir(path):
            raise SchedulerError(f"SQLite store {path!r}: path is a directory")
        if os.path.exists(path):
            if not os.access(path, os.R_OK | os.W_OK):
                raise SchedulerError(f"SQLite store {path!r}: the file is read-only or not readable")
            return
        if not os.access(directory, os.W_OK | os.X_OK):
            raise SchedulerError(f"SQLite store {path!r}: directory {directory!r} is not writable")
        try:  # create it private (0600) before SQLite does; its -wal/-shm files copy the mode
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            return
        except OSError as e:
            raise SchedulerError(f"SQLite store {path!r}: cannot create the file ({e})") from e
        os.close(fd)

    def _open_sync(self) -> None:
        # (check_same_thread=False: an inline commit uses it from the loop's thread; the lock
        # keeps the two threads from ever using it at once)
        conn = sqlite3.connect(
            self.path, timeout=self.busy_timeout, isolation_level=None, check_same_thread=False
        )
        self._conn = conn
        self._busy_zero = False
        mode = conn.execute("PRAGMA journal_mode=WAL").fetchone()[0]
        if str(mode).lower() != "wal":
            raise SchedulerError(f"SQLite store {self.path!r}: cannot use WAL journal mode (got {mode!r})")
        conn.execute(f"PRAGMA synchronous={'FULL' if self.full_sync else 'NORMAL'}")
        conn.execute("PRAGMA foreign_keys=OFF")
        conn.execute("BEGIN IMMEDIATE")
        try:
            for stmt in (_SCHEMA + _journal.SQLITE_SCHEMA).split(";"):
                if stmt.strip():
                    conn.execute(stmt)
            row = conn.execute("SELECT v FROM cronoq_meta WHERE k = 'schema'").fetchone()
            if row is None:
                conn.execute("INSERT INTO cronoq_meta (k, v) VALUES ('schema', ?)", (SCHEMA_VERSION,))
            elif row[0] != SCHEMA_VERSION:
                raise SchedulerError(
                    f"SQLite store {self.path!r}: schema version {row[0]} is not supported "
                    f"(this cronoq writes version {SCHEMA_VERSION})"
                )
            row = conn.execute("SELECT v FROM cronoq_meta WHERE k = 'shard'").fetchone()
            if check_shard(f"SQLite store {self.path!r}", None if row is None else row[0], self.shard):
                conn.execute("INSERT INTO cronoq_meta (k, v) VALUES ('shard', ?)", (self.shard,))
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise

    def _close_sync(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    async def close(self) -> None:
        if self._executor is None:
            return
        try:
            if self._leading:
                with contextlib.suppress(SchedulerError):
                    await self.release()
            await self._stop_renewer()
            await self._call(self._close_sync)
        finally:
            self._executor.shutdown(wait=False)
            self._executor = None
            self._leading = False

    # ------------------------------------------------------------------ leadership

    async def acquire(self, *, wait: bool = True) -> int:
        await self._stop_renewer()
        while True:
            started = time.monotonic()
            try:
                epoch = await self._call(self._try_take_sync)
            except TransientStoreError:
                if not wait:
                    raise
                epoch = None
            if epoch is not None:
                break
            if not wait:
                raise SchedulerError(f"SQLite store {self.path!r}: another instance is the leader")
            await asyncio.sleep(self.lock_poll)
        self._epoch = epoch
        self._leading = True
        self.lease_until = started + self.lease_ttl
        self._renewer = asyncio.get_running_loop().create_task(self._renew_loop(epoch))
        return epoch

    def _try_take_sync(self) -> int | None:
        conn = self._db()
        conn.execute("BEGIN IMMEDIATE")
        try:
            epoch, owner, expires_at = conn.execute(
                "SELECT epoch, owner, expires_at FROM cronoq_leader WHERE id = 1"
            ).fetchone()
            now = time.time()
            if owner is not None and owner != self.owner and expires_at > now:
                conn.execute("ROLLBACK")
                return None
            new = epoch + 1
            if new > MAX_EPOCH:
                raise SchedulerError(f"SQLite store {self.path!r}: fencing epochs exhausted ({epoch})")
            conn.execute(
                "UPDATE cronoq_leader SET epoch = ?, owner = ?, expires_at = ? WHERE id = 1",
                (new, self.owner, now + self.lease_ttl),
            )
            conn.execute("COMMIT")
            return int(new)
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise

    def _renew_sync(self, epoch: int) -> bool:
        cur = self._db().execute(
            "UPDATE cronoq_leader SET expires_at = ? WHERE id = 1 AND epoch = ? AND owner = ?",
            (time.time() + self.lease_ttl, epoch, self.owner),
        )
        return cur.rowcount == 1

    async def _renew_loop(self, epoch: int) -> None:
        async def renewed() -> bool | None:
            try:
                return bool(await self._call(self._renew_sync, epoch))
            except TransientStoreError:
                return None  # busy: try again next round (commits renew too)
            except SchedulerError:
                return False

        await keep_leading(self, self.lease_renew, renewed)

    async def _stop_renewer(self) -> None:
        task, self._renewer = self._renewer, None
        await stop_task(task)

    def _is_leader_sync(self, epoch: int) -> bool:
        row = self._db().execute("SELECT epoch, owner, expires_at FROM cronoq_leader WHERE id = 1").fetchone()
        return row is not None and row[0] == epoch and row[1] == self.owner and row[2] > time.time()

    async def is_leader(self) -> bool:
        if not self._leading:
            return False
        return await self._call(self._is_leader_sync, self._epoch)

    def _release_sync(self, epoch: int) -> None:
        self._db().execute(
            "UPDATE cronoq_leader SET owner = NULL, expires_at = 0 WHERE id = 1 AND epoch = ? AND owner = ?",
            (epoch, self.owner),
        )

    async def release(self) -> None:
        await self._stop_renewer()
        if self._leading:
            self._leading = False
            await self._call(self._release_sync, self._epoch)

    # ------------------------------------------------------------------ data

    async def load(self, codec: Codec, window: float | None = None, limit: int | None = None) -> Recovered:
        """Live tasks, the newest ``limit`` (None: all) finished within ``window`` seconds (the
        engine's retention; None or longer than the store's: the store's) and the older
        finished ones the loaded state refers to (``_records.history_refs``), schedules,
        journals and the rest (base.py)."""
        cutoff = time.time_ns() - round(load_window(self.retention, window) * 1e9)
        return await self._call(self._load_sync, codec, cutoff, -1 if limit is None else max(0, limit))

    def _load_sync(self, codec: Codec, cutoff: int, limit: int) -> Recovered:
        conn = self._db()
        conn.execute("BEGIN")
        try:
            schedules = conn.execute(
                "SELECT name, spec, payload, next, last FROM cronoq_schedules ORDER BY name"
            ).fetchall()
            paused = conn.execute("SELECT kind, name FROM cronoq_paused ORDER BY kind, name").fetchall()
            bulk_keys = conn.execute(
                f"SELECT {_BULK_COLS} FROM cronoq_bulk_keys ORDER BY at DESC LIMIT {BULK_KEYS}"
            ).fetchall()
            journals = conn.execute(_journal.SQLITE_LOAD).fetchall()
            signals = conn.execute(_journal.SQLITE_LOAD_SIGNALS, (cutoff,)).fetchall()
            # rows are decoded as they are read (a cursor, not fetchall): the table's payloads
            # are never all in memory twice, as rows and as decoded payloads
            rec = Recovered()
            add_task_rows(rec, conn.execute(_LOAD_LIVE), codec, cutoff)
            add_task_rows(rec, conn.execute(_LOAD_WINDOW, (cutoff, limit)), codec, cutoff)
            refs = history_refs(rec, schedules, journals)
            if refs.ids:
                add_task_rows(rec, conn.execute(_LOAD_IDS, (json.dumps(refs.ids),)), codec, 0)
            if refs.keys:
                rows = conn.execute(_LOAD_KEYS, (json.dumps(sorted(refs.keys)),)).fetchall()
                add_task_rows(rec, key_history_rows(rows, refs.keys), codec, 0)
            return finish_recovered(rec, schedules, codec, paused, bulk_keys, journals, signals)
        finally:
            conn.execute("COMMIT")

    async def commit(self, mutations: list[Mutation], epoch: int, codec: Codec) -> None:
        """Write ``mutations`` in one transaction (see the Store protocol).

        A small commit (fewer than ``inline_below`` mutations) runs right here, on the event
        loop's thread, when the store's thread is idle (its lock is free): handing it to that
        thread costs more server CPU than the commit itself — the executor's queue and futex
        wake-ups, the loop's wake-up by ``call_soon_threadsafe``, and a GIL hand-off between
        the two threads at every statement (sqlite3 releases the GIL around each step, and the
        loop thread takes it).  ``bench/server.py --stores sqlite-exec,sqlite-real`` (every
        commit on the thread against this): per-task submits (about 10 mutations a commit)
        took about a fifth less server CPU per task inline (issue #33).  sqlite3 still releases
        the GIL during a step and the WAL's fsync, so gRPC's own threads run meanwhile; the
        loop waits for the commit, as every submitter of the batch does anyway
        (``runtime.durable``: one commit at a time), and the requests that arrive meanwhile
        make the next group.  64 coroutines' submits on one Client make commits of about 180
        mutations (a ``SubmitMany`` wave with the leases and completions that rode along,
        ``runtime.durable``'s ``defer``): inline they took about 7 % less server CPU per task,
        and the wave's commit half the wall time (no thread wake-up, no GIL hand-off at every
        statement; docs/architecture/durability.md#sqlite-commits-on-the-event-loop).  A
        bigger commit (a ``submit_batch`` of 1,000; a backlog) gained nothing inline and stays
        on the store's thread, not to stall the loop.

        An inline commit never waits for another connection's write lock (a standby's takeover
        attempt, a hung writer): it then goes to the store's thread, which waits up to
        ``busy_timeout`` within ``commit_timeout`` (``base.bounded``) as before.  One that took
        longer than ``commit_timeout`` (a stalled disk) steps down as a late one on the thread
        does: its waiters get :class:`CommitDeadline`, and the store stops leading.  One that
        took longer than ``inline_slow`` sends the next ``inline_pause`` seconds of commits to
        the thread: while the disk is slow the loop goes on serving (heartbeats, reads, the
        dashboard) and only the commit's waiters wait.  The first of them, if it took less
        than ``inline_slow`` (the slow one was the loop's thread preempted on a loaded
        machine, not the disk), ends the pause: on a machine at load 5 and more such false
        alarms sent every small commit to the thread for ten seconds at a time.  One that
        failed (a lock held past ``busy_timeout``) tells nothing of the disk: the next one
        probes instead."""
        if not mutations:
            return
        if (
            len(mutations) < self.inline_below
            and self._executor is not None
            and (started := time.monotonic()) >= self._inline_after
            and self._lock.acquire(blocking=False)
        ):
            try:
                done = self._commit_sync(mutations, epoch, codec, True)
            except sqlite3.Error as e:
                raise self._error(e) from e
            finally:
                self._lock.release()
                took = time.monotonic() - started
                if took > self.inline_slow:
                    self._inline_after = started + took + self.inline_pause
                    self._inline_probe = True
            if done:
                timeout = self.commit_timeout
                if timeout is not None and took > timeout:
                    raise stepped_down(self, "SQLite store", timeout)
                return
        # (the executor's future itself, not ``_call``'s coroutine: fewer loop turns per commit)
        probe, self._inline_probe = self._inline_probe, False
        sent = time.monotonic()
        fut = self._submit(self._commit_sync, mutations, epoch, codec)
        try:
            await bounded(self, fut, "SQLite store")
        except BaseException as e:
            # a commit that failed tells nothing of the disk: the next one on the thread probes
            self._inline_probe = self._inline_probe or probe
            if isinstance(e, sqlite3.Error):
                raise self._error(e) from e
            raise
        if probe and time.monotonic() - sent <= self.inline_slow:
            self._inline_after = 0.0  # the disk is not slow: inline again

    def _commit_sync(self, mutations: list[Mutation], epoch: int, codec: Codec, inline: bool = False) -> bool:
        """Write the commit (holding the connection's lock); False, with nothing done, if
        ``inline`` and another connection holds the database's write lock."""
        batch = fold(mutations, codec)
        conn = self._db()
        if not inline:
            conn.execute("BEGIN IMMEDIATE")
        elif not self._begin_now(conn):
            return False
        self._write_batch(conn, batch, epoch)
        return True

    def _begin_now(self, conn: sqlite3.Connection) -> bool:
        """``BEGIN IMMEDIATE`` without waiting for another connection's write lock: False if it
        is held.  The connection's busy timeout is 0 from the first inline commit on, until the
        store's thread takes its next job (``_locked`` puts it back, so every statement there
        waits as before): setting it for each inline commit and back cost two statements a
        commit, 3-4 us of the 60-70 of a small one (issue #33).  (Statements inside a
        transaction begun with the write lock do not wait for locks in WAL mode.)"""
        if not self._busy_zero:
            conn.execute("PRAGMA busy_timeout = 0")
            self._busy_zero = True
        try:
            conn.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as e:
            low = str(e).lower()
            if "locked" in low or "busy" in low:
                return False
            raise
        return True

    def _write_batch(self, conn: sqlite3.Connection, batch: Batch, epoch: int) -> None:
        """The statements of a commit, in the transaction just begun: COMMIT, or ROLLBACK."""
        try:
            cur = conn.execute(
                "UPDATE cronoq_leader SET expires_at = ? WHERE id = 1 AND epoch = ? AND owner = ?",
                (time.time() + self.lease_ttl, epoch, self.owner),
            )
            if cur.rowcount != 1:
                row = conn.execute("SELECT epoch, owner FROM cronoq_leader WHERE id = 1").fetchone()
                conn.execute("ROLLBACK")
                self._leading = False
                raise Fenced(
                    f"SQLite store {self.path!r}: fenced: epoch {epoch} is no longer current "
                    f"(store is at epoch {row[0]}, leader {row[1]!r})"
                )
            _write_tasks(conn, batch.inserts, batch.updates)
            for op in batch.schedule_ops:
                if op[0] == "upsert":
                    conn.execute(
                        "INSERT INTO cronoq_schedules (name, spec, payload) VALUES (?, ?, ?) "
                        "ON CONFLICT (name) DO UPDATE SET spec = excluded.spec, payload = excluded.payload",
                        op[1:],
                    )
                elif op[0] == "remove":
                    conn.execute("DELETE FROM cronoq_schedules WHERE name = ?", op[1:])
                else:
                    conn.execute(
                        "UPDATE cronoq_schedules SET next = ?, last = ? WHERE name = ?", (op[2], op[3], op[1])
                    )
            for kind, name, paused in batch.pause_ops:
                if paused:
                    conn.execute(
                        "INSERT OR IGNORE INTO cronoq_paused (kind, name) VALUES (?, ?)", (kind, name)
                    )
                else:
                    conn.execute("DELETE FROM cronoq_paused WHERE kind = ? AND name = ?", (kind, name))
            if batch.bulk_key_ops:
                conn.executemany(_BULK_UPSERT, batch.bulk_key_ops)
                conn.execute(_BULK_PRUNE)
            if batch.journal_ops or batch.signal_ops:
                _journal.sqlite_write(conn, batch)
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise

    async def load_payload(self, task_id: int) -> bytes | None:
        """The stored payload bytes of task ``task_id`` (None: no such row or no payload), for
        a replay (docs/how-to/operations.md#replay)."""
        return await self._call(self._load_payload_sync, task_id)

    def _load_payload_sync(self, task_id: int) -> bytes | None:
        sql = "SELECT payload FROM cronoq_tasks WHERE id = ?"
        row = self._db().execute(sql, (db_id(task_id),)).fetchone()
        return None if row is None or row[0] is None else bytes(row[0])

    async def load_finished(self, task_id: int, codec: Codec) -> RecoveredTerminal | None:
        """The finished task ``task_id`` as its row still records it (the store's history,
        kept for ``retention``: after the engine forgot it), or None."""
        return await self._call(self._load_finished_sync, task_id, codec)

    def _load_finished_sync(self, task_id: int, codec: Codec) -> RecoveredTerminal | None:
        row = (
            self._db().execute(f"SELECT {_COLS} FROM cronoq_tasks WHERE id = ?", (db_id(task_id),)).fetchone()
        )
        return finished_record(row, codec)

    async def load_finished_key(self, key: str, tenant: str | None, codec: Codec) -> RecoveredTerminal | None:
        """The newest finished task of ``tenant`` with ``key`` the store's history keeps, or
        None (an index lookup: ``cronoq_tasks_key``)."""
        return await self._call(self._load_finished_key_sync, key, tenant, codec)

    def _load_finished_key_sync(self, key: str, tenant: str | None, codec: Codec) -> RecoveredTerminal | None:
        sql = (
            f"SELECT {_COLS} FROM cronoq_tasks WHERE key = ? AND finished IS NOT NULL "
            f"ORDER BY id DESC LIMIT {KEY_HISTORY_ROWS}"
        )
        return finished_by_key(self._db().execute(sql, (key,)).fetchall(), tenant, codec)

    async def load_finished_page(
        self, before_id: int, limit: int, codec: Codec, statuses: Sequence[str]
    ) -> list[RecoveredTerminal]:
        """Up to ``limit`` finished tasks of the store's history with ids below ``before_id``
        and one of ``statuses`` (or a replay: its original has one), newest first, without their
        outputs (a primary-key range: a bulk replay's page)."""
        return await self._call(self._load_finished_page_sync, before_id, limit, codec, tuple(statuses))

    def _load_finished_page_sync(
        self, before_id: int, limit: int, codec: Codec, statuses: tuple[str, ...]
    ) -> list[RecoveredTerminal]:
        marks = ", ".join("?" * len(statuses))
        sql = (
            f"SELECT {PAGE_COLUMNS} FROM cronoq_tasks WHERE id < ? AND finished IS NOT NULL "
            f"AND (status IN ({marks}) OR spec LIKE '%\"cronoq.replay_of\"%') ORDER BY id DESC LIMIT ?"
        )
        rows = self._db().execute(sql, (db_id(before_id), *statuses, limit)).fetchall()
        return finished_records(rows, codec)

    async def prune(self, now_unix_ns: int, limit: int | None = None) -> int:
        cutoff = now_unix_ns - round(self.retention * 1e9)
        return await self._call(self._prune_sync, cutoff, limit)

    def _prune_sync(self, cutoff: int, limit: int | None) -> int:
        """Delete the expired finished rows (the oldest first, at most ``limit``) except those
        live state still refers to (``_records.prune_refs``: what a load reads back whatever
        its age), in one write transaction: the references are read (the live definitions
        parsed once each: ``_records.RefsCache``), then one DELETE skips them (an anti-join
        against their ids, a few thousand at most)."""
        conn = self._db()
        if conn.execute(_PRUNE_ANY, (cutoff,)).fetchone() is None:
            return 0  # (nothing expired: not even the write lock)
        conn.execute("BEGIN IMMEDIATE")
        try:
            refs = prune_refs(
                conn.execute(_PRUNE_LIVE_DEPS),
                conn.execute(_PRUNE_JOURNALS),
                conn.execute(_PRUNE_LASTS),
                self._refs,
            )
            keep = refs.ids
            if refs.keys:
                rows = conn.execute(_PRUNE_KEYS, (json.dumps(sorted(refs.keys)),))
                keep = sorted({*keep, *newest_holders(rows, refs.keys)})
            if limit is None:
                cur = conn.execute(_PRUNE, (cutoff, json.dumps(keep)))
            else:
                cur = conn.execute(_PRUNE_OLDEST, (cutoff, json.dumps(keep), max(0, int(limit))))
            conn.execute("COMMIT")
            return int(cur.rowcount)
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
