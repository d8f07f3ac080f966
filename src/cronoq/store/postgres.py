"""PostgresStore: durable state in PostgreSQL with active-passive leadership
(docs/reference/behaviour.md#stores, docs/reference/behaviour.md#high-availability).

Driver: **asyncpg** (optional extra ``cronoq[postgres]``).  Chosen over psycopg 3 because it is
natively asyncio (no thread hop per query, fitting the runtime's single event loop), the
fastest Python PostgreSQL driver, and its ``executemany`` pipelines a whole group commit's
rows in one round trip; it ships binary wheels for every supported CPython.  It has no type
stubs, hence the ``type: ignore`` on its import.  It is imported only when a store opens.

Tables live in the configured schema (created on open): ``cronoq_meta``, ``cronoq_leader``
(``id=1, epoch, owner, since``), ``cronoq_tasks``, ``cronoq_schedules``, ``cronoq_paused``,
``cronoq_bulk_keys`` — the same rows as :mod:`cronoq.store.sqlite` — and the composite types
``cronoq_task_row_<digest>`` and ``cronoq_task_update_<digest>`` a commit sends its rows as
(the digest of their fields: each shape of row its own type).

Leadership: the leader holds the session advisory lock ``(hashtext('cronoq'),
hashtext(<schema>))`` on a dedicated connection.  Taking it bumps ``cronoq_leader.epoch``; a
standby polls ``pg_try_advisory_lock`` every ``lock_poll`` seconds, so it takes over as soon as
the leader's session ends (crash, network loss, :meth:`PostgresStore.release`, or
``lease_ttl`` seconds without a keep-alive reaching the database: the lock session runs with
``idle_session_timeout``, so a leader cut off by a silent network loses the lock on a known
schedule).  Statements time out after ``statement_timeout`` (server and client side) and
connecting after ``connect_timeout``: a blackholed database never hangs a caller.  A keep-alive
pings the lock connection every ``keepalive`` seconds; if that connection died, it reconnects
and re-takes the lock only if the epoch is still its own (nobody led in between), else — or
when it cannot reconnect at all (cut off from the database, which another instance may still
reach) — it reports the loss (``on_lost``) and the scheduler stands by.  Every commit runs
``SELECT epoch … FOR SHARE`` first in the same transaction: a takeover's ``UPDATE`` waits for
in-flight commits, and a commit after a takeover sees the new epoch and raises :class:`~cronoq.errors.Fenced`.
So does every history prune (``prune``): its statements read the references and then delete
what nothing refers to, and a new leader's commit must not land between them.

A commit of task rows only (submissions and status changes: the common case) is one statement,
one round trip: the check as a ``FOR SHARE`` CTE that the writes' conditions read first, the
inserts and updates from arrays of composite rows (``unnest``), the epoch returned
(``_rows_statement``); with ``copy_from`` new rows or more, a transaction whose new rows go by
binary ``COPY`` (``_commit_copy``).  A commit with anything else is a transaction of several
statements.
Under load each round trip is loop turns and a database wake-up: a per-task group commit of
five (BEGIN, the check, the inserts, the updates, COMMIT) took 3 ms (median) on the bench VM.
A commit runs in its caller's task (``base.bounded``): its statement goes out in the
committer's loop turn, not a turn later.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import math
import os
import re
import socket
import time
import uuid
from collections.abc import Callable, Sequence
from typing import Any

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
    stop_task,
)
from cronoq.store.codec import Codec

__all__ = ["PostgresStore"]

_log = logging.getLogger("cronoq.store.postgres")

#: ``cronoq_tasks``' indexes (name, columns and condition): the finished rows (a start's window,
#: pruning), keys, and the live rows a start reads
_TASK_INDEXES = (
    ("cronoq_tasks_finished", "(finished) WHERE finished IS NOT NULL"),
    ("cronoq_tasks_key", "(key, id) WHERE key IS NOT NULL"),
    ("cronoq_tasks_live", "(id) WHERE finished IS NULL"),
)

SCHEMA_VERSION = "1"
#: task rows read per round trip during recovery
LOAD_CHUNK = 64
MAX_EPOCH = (1 << 15) - 1
_SCHEMA_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,62}$")


#: PostgreSQL types of TASK_COLUMNS, and of a Batch.updates row
_TASK_TYPES = (
    *("bigint", "bigint", "bigint", "text", "text", "int", "text", "text", "bytea", "text", "int"),
    *("bigint", "bigint", "text", "bytea", "boolean"),
)
_UPDATE_TYPES = ("text", "int", "text", "bytea", "boolean", "bigint", "bigint", "bigint")


#: the fields of a Batch.updates row (``cronoq_task_update``)
_UPDATE_FIELDS = ("status", "attempt", "message", "output", "has_output", "started", "finished", "id")


def _type_name(base: str, fields: tuple[str, ...], types: tuple[str, ...]) -> str:
    """``base`` and a digest of the fields and their types: asyncpg fills a composite by
    position and the statements read it by name, so a version whose rows differ (another
    order, another field) must never find, keep and write through another version's type of
    the same name in a schema they share (a rolling upgrade): each shape has its own type."""
    return f"{base}_{hashlib.sha1(_fields_sql(fields, types).encode()).hexdigest()[:10]}"


def _fields_sql(fields: tuple[str, ...], types: tuple[str, ...]) -> str:
    """A composite type's body: ``field type, ...``."""
    return ", ".join(f"{f} {t}" for f, t in zip(fields, types, strict=True))


#: the composite types a commit sends its rows as (``_rows_statement``)
ROW_TYPE = _type_name("cronoq_task_row", TASK_COLUMNS, _TASK_TYPES)
UPDATE_TYPE = _type_name("cronoq_task_update", _UPDATE_FIELDS, _UPDATE_TYPES)


def _row_types_sql(q: str) -> str:
    """The composite types a commit's statement sends its rows as, created with the tables (a
    DO block: CREATE TYPE has no IF NOT EXISTS): :data:`ROW_TYPE` (TASK_COLUMNS) and
    :data:`UPDATE_TYPE` (a Batch.updates row)."""
    out = []
    for name, fields, types in (
        (ROW_TYPE, TASK_COLUMNS, _TASK_TYPES),
        (UPDATE_TYPE, _UPDATE_FIELDS, _UPDATE_TYPES),
    ):
        out.append(
            f"DO $$ BEGIN IF to_regtype('{q}.{name}') IS NULL THEN "
            f"CREATE TYPE {q}.{name} AS ({_fields_sql(fields, types)}); END IF; END $$;"
        )
    return "\n".join(out)


def _rows_statement(q: str) -> str:
    """One statement that commits a batch of task rows (``$1`` the epoch, ``$2`` the inserts
    as an array of ``cronoq_task_row``, ``$3`` the updates as an array of
    ``cronoq_task_update``: asyncpg encodes a list of tuples as such an array at a third to a
    half of the CPU of one array per column, and PostgreSQL decodes it for less too).

    It is a transaction of its own: the leader row is read ``FOR SHARE`` first (the writes'
    condition needs it), which waits for a takeover's update of the epoch as the transaction
    of several statements did, and nothing is written unless its epoch is ``$1``; the epoch
    and owner come back for the caller to check.  One round trip where that transaction took
    five (BEGIN, the check, the inserts, the updates, COMMIT)."""
    cols = ", ".join(TASK_COLUMNS)
    return (
        f"WITH l AS (SELECT epoch, owner FROM {q}.cronoq_leader WHERE id = 1 FOR SHARE), "
        f"ins AS (INSERT INTO {q}.cronoq_tasks ({cols}) SELECT * FROM unnest($2::{q}.{ROW_TYPE}[]) "
        "WHERE (SELECT epoch FROM l) = $1 ON CONFLICT (id) DO UPDATE SET "
        + ", ".join(f"{c} = excluded.{c}" for c in TASK_COLUMNS if c != "id")
        + "), "
        + _updates_cte(q, 3)
        + " SELECT epoch, owner FROM l"
    )


def _updates_cte(q: str, param: int) -> str:
    """The CTE ``upd`` of a commit's statement: the updates from the array ``$param`` (of
    ``cronoq_task_update``), written if the leader row ``l`` has the epoch ``$1``."""
    return (
        f"upd AS (UPDATE {q}.cronoq_tasks t SET status = u.status, attempt = u.attempt, "
        "message = u.message, output = u.output, has_output = u.has_output, "
        "started = COALESCE(t.started, u.started), finished = u.finished "
        f"FROM unnest(${param}::{q}.{UPDATE_TYPE}[]) u "
        "WHERE t.id = u.id AND (SELECT epoch FROM l) = $1)"
    )


def _check_updates_statement(q: str) -> str:
    """``_rows_statement`` without its inserts: the leader row read ``FOR SHARE``, the updates
    (``$2``) written if the epoch is ``$1``, the epoch and owner returned
    (``PostgresStore._commit_copy``, inside its transaction)."""
    return (
        f"WITH l AS (SELECT epoch, owner FROM {q}.cronoq_leader WHERE id = 1 FOR SHARE), "
        + _updates_cte(q, 2)
        + " SELECT epoch, owner FROM l"
    )


def _import_asyncpg() -> Any:
    try:
        import asyncpg  # type: ignore[import-untyped]
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise SchedulerError("PostgresStore needs the asyncpg driver: pip install 'cronoq[postgres]'") from e
    return asyncpg


def _positive(name: str, v: float) -> float:
    if not isinstance(v, int | float) or not math.isfinite(v) or v <= 0:
        raise ValueError(f"{name} must be a finite, positive number of seconds (got {v!r})")
    return float(v)


class PostgresStore:
    """A durable store in one PostgreSQL schema; several processes may share it (one leads)."""

    durable = True
    #: a commit of task rows with at least this many new ones writes them with a binary COPY
    #: (``_commit_copy``); fewer: one statement (``_rows_statement``)
    copy_from = 256

    def __init__(
        self,
        dsn: str,
        *,
        schema: str = "public",
        retention: float = 3600.0,
        lock_poll: float = 0.2,  # one pg_try_advisory_lock per poll: cheap; bounds failover time
        keepalive: float = 2.0,
        connect_timeout: float = 10.0,
        lease_ttl: float = 10.0,
        statement_timeout: float = 30.0,
        commit_timeout: float | None = None,
        shard: str | None = None,
    ) -> None:
        if not isinstance(schema, str) or not _SCHEMA_NAME.match(schema):
            raise ValueError(f"schema must be a plain SQL identifier (got {schema!r})")
        self.dsn = dsn
        self.schema = schema
        #: the shard this store belongs to (recorded in cronoq_meta; another one is refused)
        self.shard = shard
        self.retention = check_retention(retention)
        self.lock_poll = _positive("lock_poll", lock_poll)
        self.keepalive = _positive("keepalive", keepalive)
        self.connect_timeout = _positive("connect_timeout", connect_timeout)
        self.lease_ttl = _positive("lease_ttl", lease_ttl)
        if self.keepalive * 2 + 1 >= self.lease_ttl:
            raise ValueError(f"lease_ttl ({lease_ttl}) must exceed twice keepalive ({keepalive}) plus 1 s")
        self.statement_timeout = _positive("statement_timeout", statement_timeout)
        #: a commit taking longer raises CommitDeadline (base.bounded); None: unbounded
        self.commit_timeout = None if commit_timeout is None else _positive("commit_timeout", commit_timeout)
        #: monotonic instant the lease may lapse at (see ``base.lease_left``)
        self.lease_until = 0.0
        self.owner = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:12]}"
        self.on_lost: Callable[[], None] | None = None
        self._q = f'"{schema}"'
        self._epoch = 0
        self._leading = False
        self._opened = False
        self._conn: Any = None  # data connection (commits, loads, prunes)
        self._lock_conn: Any = None  # holds the advisory lock
        self._io = asyncio.Lock()  # one operation at a time on the data connection
        self._refs = RefsCache()  # (prunes: the live definitions' references, parsed once)
        self._keeper: asyncio.Task[None] | None = None
        q = self._q
        cols = ", ".join(TASK_COLUMNS)
        params = ", ".join(f"${i + 1}" for i in range(len(TASK_COLUMNS)))
        self._sql_insert = (
            f"INSERT INTO {q}.cronoq_tasks ({cols}) VALUES ({params}) ON CONFLICT (id) DO UPDATE SET "
            + ", ".join(f"{c} = excluded.{c}" for c in TASK_COLUMNS if c != "id")
        )
        self._sql_update = (
            f"UPDATE {q}.cronoq_tasks SET status = $1, attempt = $2, message = $3, output = $4, "
            "has_output = $5, started = COALESCE(started, $6), finished = $7 WHERE id = $8"
        )
        # a start's rows: the live ones (index cronoq_tasks_live) and the newest ones finished
        # within the window (cronoq_tasks_finished; LIMIT NULL: all), each part through its own
        # index, in no order (finish_recovered sorts them)
        self._sql_select = (
            f"SELECT {cols} FROM {q}.cronoq_tasks WHERE finished IS NULL UNION ALL ("
            f"SELECT {cols} FROM {q}.cronoq_tasks WHERE finished IS NOT NULL AND finished >= $1 "
            "ORDER BY finished DESC LIMIT $2)"
        )
        self._sql_rows = _rows_statement(q)
        self._sql_check_updates = _check_updates_statement(q)

    def __repr__(self) -> str:
        return f"PostgresStore(schema={self.schema!r})"

    @property
    def epoch(self) -> int:
        return self._epoch

    @property
    def leading(self) -> bool:
        return self._leading

    def _lock_key_sql(self) -> str:
        return "hashtext('cronoq'), hashtext($1)"

    # ------------------------------------------------------------------ connections

    async def _connect(self, *, lock: bool = False) -> Any:
        """A connection.  Every statement is bounded: ``statement_timeout`` on the server and
        as asyncpg's client-side ``command_timeout`` (a silent network never answers the
        server's cancel); the lock connection's session ends after ``lease_ttl`` without a
        ping (``idle_session_timeout``: the lease rule of ``base``)."""
        asyncpg = _import_asyncpg()
        settings = {"statement_timeout": str(round(self.statement_timeout * 1000))}
        if lock:
            settings["idle_session_timeout"] = str(round(self.lease_ttl * 1000))
        try:
            return await asyncpg.connect(
                self.dsn,
                timeout=self.connect_timeout,
                command_timeout=self.statement_timeout,
                server_settings=settings,
            )
        except (TimeoutError, OSError) as e:
            raise TransientStoreError(f"PostgresStore: cannot connect to the database: {e}") from e
        except asyncpg.PostgresError as e:
            raise SchedulerError(f"PostgresStore: cannot connect to the database: {e}") from e

    def _map_error(self, e: BaseException) -> SchedulerError:
        asyncpg = _import_asyncpg()
        if isinstance(e, SchedulerError):
            return e
        if not isinstance(e, asyncpg.PostgresError):
            # client-side: dropped connection, protocol state, timeout — reconnect and retry
            return TransientStoreError(f"PostgresStore: {type(e).__name__}: {e}")
        transient = (
            asyncpg.PostgresConnectionError,
            asyncpg.exceptions.SerializationError,
            asyncpg.exceptions.DeadlockDetectedError,
            asyncpg.exceptions.LockNotAvailableError,
            asyncpg.exceptions.CannotConnectNowError,
            asyncpg.exceptions.AdminShutdownError,
            asyncpg.exceptions.QueryCanceledError,
        )
        if isinstance(e, transient):
            return TransientStoreError(f"PostgresStore: {type(e).__name__}: {e}")
        return SchedulerError(f"PostgresStore: {type(e).__name__}: {e}")

    async def _data(self) -> Any:
        if not self._opened:
            raise SchedulerError("PostgresStore is not open; call `await store.open()`")
        conn = self._conn
        if conn is None or conn.is_closed():
            self._conn = conn = await self._connect()
        return conn

    async def _run(self, op: Callable[[Any], Any]) -> Any:
        """Run ``op(conn)`` on the data connection; map errors; drop a broken connection."""
        async with self._io:
            conn = await self._data()
            try:
                return await op(conn)
            except Fenced:
                raise
            except Exception as e:
                err = self._map_error(e)
                if isinstance(err, TransientStoreError) and conn is self._conn:
                    self._conn = None
                    with contextlib.suppress(Exception):
                        conn.terminate()
                raise err from e

    # ------------------------------------------------------------------ open / close

    async def open(self) -> None:
        if self._opened:
            return
        self._opened = True
        try:
            await self._run(self._create_schema)
        except BaseException:
            self._opened = False
            if self._conn is not None:
                with contextlib.suppress(Exception):
                    await self._conn.close()
                self._conn = None
            raise

    async def _create_schema(self, conn: Any) -> None:
        q = self._q
        async with conn.transaction():
            # serialize concurrent first opens (CREATE … IF NOT EXISTS races on the catalogs)
            await conn.execute(
                "SELECT pg_advisory_xact_lock(hashtext('cronoq.ddl'), hashtext($1))", self.schema
            )
            # a new table gets its indexes here (empty: instant); an existing one (perhaps being
            # written by a leader of an older version right now) gets the ones it lacks
            # afterwards, without stopping writes (``_ensure_indexes``): even a CREATE INDEX IF
            # NOT EXISTS of an index that exists first waits for a lock that blocks every write
            existed = await conn.fetchval("SELECT to_regclass($1) IS NOT NULL", f"{q}.cronoq_tasks")
            await conn.execute(f"CREATE SCHEMA IF NOT EXISTS {q}")
            await conn.execute(
                f"""
                CREATE TABLE IF NOT EXISTS {q}.cronoq_meta (k text PRIMARY KEY, v text NOT NULL);
                CREATE TABLE IF NOT EXISTS {q}.cronoq_leader (
                    id int PRIMARY KEY CHECK (id = 1),
                    epoch bigint NOT NULL,
                    owner text,
                    since timestamptz
                );
                INSERT INTO {q}.cronoq_leader (id, epoch) VALUES (1, 0) ON CONFLICT (id) DO NOTHING;
                CREATE TABLE IF NOT EXISTS {q}.cronoq_tasks (
                    id bigint PRIMARY KEY,
                    seq bigint NOT NULL,
                    arrival bigint NOT NULL,
                    pool text NOT NULL,
                    kind text NOT NULL,
                    priority int NOT NULL,
                    key text,
                    spec text NOT NULL,
                    payload bytea,
                    status text NOT NULL,
                    attempt int NOT NULL,
                    started bigint,
                    finished bigint,
                    message text,
                    output bytea,
                    has_output boolean NOT NULL DEFAULT false
                );
                CREATE TABLE IF NOT EXISTS {q}.cronoq_schedules (
                    name text PRIMARY KEY,
                    spec text NOT NULL,
                    payload bytea,
                    next bigint,
                    last bigint NOT NULL DEFAULT 0
                );
                CREATE TABLE IF NOT EXISTS {q}.cronoq_paused (
                    kind text NOT NULL,
                    name text NOT NULL,
                    PRIMARY KEY (kind, name)
                );
                CREATE TABLE IF NOT EXISTS {q}.cronoq_bulk_keys (
                    action text NOT NULL,
                    tenant text NOT NULL,
                    key text NOT NULL,
                    matched bigint NOT NULL,
                    acted bigint NOT NULL,
                    done boolean NOT NULL,
                    at bigint NOT NULL,
                    PRIMARY KEY (action, tenant, key)
                );
                """
                + _journal.pg_schema(q)
                + _row_types_sql(q)
            )
            if not existed:
                for name, body in _TASK_INDEXES:
                    await conn.execute(f"CREATE INDEX IF NOT EXISTS {name} ON {q}.cronoq_tasks {body}")
            v = await conn.fetchval(f"SELECT v FROM {q}.cronoq_meta WHERE k = 'schema'")
            if v is None:
                await conn.execute(
                    f"INSERT INTO {q}.cronoq_meta (k, v) VALUES ('schema', $1)", SCHEMA_VERSION
                )
            elif v != SCHEMA_VERSION:
                raise SchedulerError(
                    f"PostgresStore: schema {self.schema!r} has version {v}, "
                    f"this cronoq writes version {SCHEMA_VERSION}"
                )
            stored = await conn.fetchval(f"SELECT v FROM {q}.cronoq_meta WHERE k = 'shard'")
            if check_shard(f"PostgresStore: schema {self.schema!r}", stored, self.shard):
                await conn.execute(
                    f"INSERT INTO {q}.cronoq_meta (k, v) VALUES ('shard', $1) ON CONFLICT (k) DO NOTHING",
                    self.shard,
                )
        if existed:
            await self._ensure_indexes(conn)

    async def _ensure_indexes(self, conn: Any) -> None:
        """Build the ``cronoq_tasks`` indexes an existing table lacks (``cronoq_tasks_live``
        came with a later version), each ``CREATE INDEX CONCURRENTLY`` outside any transaction.

        A plain build holds a lock that stops every write for as long as it reads the table,
        and in a rolling upgrade a leader of the older version is writing to it.  One opener
        builds (a session advisory lock taken without waiting: the others go on, an index is an
        optimization); an invalid index left by a build that did not finish is dropped and
        built again.  A build that fails or outlasts ``statement_timeout`` is logged and
        dropped: the store works without it (a start then scans the table for its live rows)
        and the next open tries again.
        """
        q = self._q
        rows = await conn.fetch(
            "SELECT c.relname, i.indisvalid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
            "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1 AND c.relname = ANY($2)",
            self.schema,
            [name for name, _ in _TASK_INDEXES],
        )
        valid = {r[0]: r[1] for r in rows}
        todo = [(name, body) for name, body in _TASK_INDEXES if not valid.get(name)]
        if not todo:
            return
        lock = "(hashtext('cronoq.index'), hashtext($1))"
        if not await conn.fetchval(f"SELECT pg_try_advisory_lock{lock}", self.schema):
            return  # another instance is building them right now
        try:
            for name, body in todo:
                try:
                    if name in valid:  # invalid: a build that did not finish
                        await conn.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {q}.{name}")
                    await conn.execute(
                        f"CREATE INDEX CONCURRENTLY IF NOT EXISTS {name} ON {q}.cronoq_tasks {body}"
                    )
                except Exception as e:
                    _log.warning(
                        "PostgresStore: schema %r: could not build index %s (%s: %s); "
                        "the store works without it until an open builds it",
                        self.schema,
                        name,
                        type(e).__name__,
                        e,
                    )
                    with contextlib.suppress(Exception):
                        await conn.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {q}.{name}")
        finally:
            with contextlib.suppress(Exception):
                await conn.execute(f"SELECT pg_advisory_unlock{lock}", self.schema)

    async def close(self) -> None:
        if not self._opened:
            return
        try:
            if self._leading:
                with contextlib.suppress(SchedulerError):
                    await self.release()
            await self._stop_keeper()
            await self._drop_lock_conn()
            async with self._io:
                if self._conn is not None:
                    with contextlib.suppress(Exception):
                        async with asyncio.timeout(5.0):
                            await self._conn.close()
                    self._conn = None
        finally:
            self._opened = False
            self._leading = False

    # ------------------------------------------------------------------ leadership

    async def acquire(self, *, wait: bool = True) -> int:
        if not self._opened:
            raise SchedulerError("PostgresStore is not open; call `await store.open()`")
        await self._stop_keeper()
        while True:
            started = time.monotonic()
            try:
                epoch = await self._try_take()
            except TransientStoreError:
                await self._drop_lock_conn()
                if not wait:
                    raise
                epoch = None
            if epoch is not None:
                break
            if not wait:
                raise SchedulerError(f"PostgresStore: another instance leads schema {self.schema!r}")
            await asyncio.sleep(self.lock_poll)
        self._epoch = epoch
        self._leading = True
        self.lease_until = started + self.lease_ttl
        self._keeper = asyncio.get_running_loop().create_task(self._keep_loop(epoch))
        return epoch

    async def _try_take(self) -> int | None:
        if self._lock_conn is None or self._lock_conn.is_closed():
            self._lock_conn = await self._connect(lock=True)
        conn = self._lock_conn
        try:
            got = await conn.fetchval(f"SELECT pg_try_advisory_lock({self._lock_key_sql()})", self.schema)
            if not got:
                return None
            try:
                async with conn.transaction():
                    epoch = await conn.fetchval(
                        f"UPDATE {self._q}.cronoq_leader SET epoch = epoch + 1, owner = $1, since = now() "
                        "WHERE id = 1 RETURNING epoch",
                        self.owner,
                    )
                    if epoch > MAX_EPOCH:
                        raise SchedulerError(f"PostgresStore: fencing epochs exhausted ({epoch})")
            except BaseException:
                with contextlib.suppress(Exception):
                    await conn.execute(f"SELECT pg_advisory_unlock({self._lock_key_sql()})", self.schema)
                raise
            return int(epoch)
        except SchedulerError:
            raise
        except Exception as e:
            raise self._map_error(e) from e

    async def _drop_lock_conn(self) -> None:
        conn, self._lock_conn = self._lock_conn, None
        if conn is not None:
            with contextlib.suppress(Exception):
                async with asyncio.timeout(5.0):
                    await conn.close()
            with contextlib.suppress(Exception):
                conn.terminate()

    async def _lock_alive(self, epoch: int) -> bool:
        """Ping the lock session; after a dropped session, re-take the lock iff still our term."""
        conn = self._lock_conn
        try:
            if conn is not None and not conn.is_closed():
                async with asyncio.timeout(self.keepalive * 2 + 1):
                    await conn.fetchval("SELECT 1")
                return True
        except Exception:
            pass
        await self._drop_lock_conn()
        try:
            conn = self._lock_conn = await self._connect(lock=True)
            got = await conn.fetchval(f"SELECT pg_try_advisory_lock({self._lock_key_sql()})", self.schema)
            if not got:
                return False  # someone else holds it now
            cur = await conn.fetchval(f"SELECT epoch FROM {self._q}.cronoq_leader WHERE id = 1")
            if cur == epoch:
                return True  # nobody led in between: our term goes on
            await conn.execute(f"SELECT pg_advisory_unlock({self._lock_key_sql()})", self.schema)
            return False
        except Exception as e:
            # The lock session is gone and cannot be re-established: this process may be cut off
            # while another instance (which can still reach the database) takes the lock, so it
            # no longer leads. It could not commit anything anyway; it stands by until it can.
            _log.warning(
                "PostgresStore: lost the leader lock session of schema %r and cannot reconnect "
                "(%s: %s); stepping down",
                self.schema,
                type(e).__name__,
                e,
            )
            await self._drop_lock_conn()
            return False

    async def _keep_loop(self, epoch: int) -> None:
        async def alive() -> bool:
            ok = await self._lock_alive(epoch)
            if not ok:
                await self._drop_lock_conn()
            return ok

        await keep_leading(self, self.keepalive, alive)

    async def _stop_keeper(self) -> None:
        task, self._keeper = self._keeper, None
        await stop_task(task)

    async def is_leader(self) -> bool:
        if not self._leading:
            return False
        conn = self._lock_conn
        if conn is None or conn.is_closed():
            return False
        try:
            cur = await conn.fetchval(f"SELECT epoch FROM {self._q}.cronoq_leader WHERE id = 1")
        except Exception:
            return False
        return bool(cur == self._epoch)

    async def release(self) -> None:
        await self._stop_keeper()
        if not self._leading:
            await self._drop_lock_conn()
            return
        self._leading = False
        conn = self._lock_conn
        if conn is not None and not conn.is_closed():
            with contextlib.suppress(Exception):
                await conn.execute(
                    f"UPDATE {self._q}.cronoq_leader SET owner = NULL WHERE id = 1 AND epoch = $1",
                    self._epoch,
                )
                await conn.execute(f"SELECT pg_advisory_unlock({self._lock_key_sql()})", self.schema)
        await self._drop_lock_conn()

    # ------------------------------------------------------------------ data

    async def load(self, codec: Codec, window: float | None = None, limit: int | None = None) -> Recovered:
        """Live tasks, the newest ``limit`` (None: all) finished within ``window`` seconds (the
        engine's retention; None or longer than the store's: the store's) and the older
        finished ones the loaded state refers to (``_records.history_refs``), schedules,
        journals and the rest (base.py)."""
        cutoff = time.time_ns() - round(load_window(self.retention, window) * 1e9)
        q = self._q

        async def op(conn: Any) -> Recovered:
            rec = Recovered()
            async with conn.transaction(isolation="repeatable_read", readonly=True):
                # rows are decoded as they are read, a few at a time: the table's payloads are
                # never all in memory twice, as rows and as decoded payloads
                cur = await conn.cursor(self._sql_select, cutoff, None if limit is None else max(0, limit))
                while rows := await cur.fetch(LOAD_CHUNK):
                    add_task_rows(rec, rows, codec, cutoff)
                schedules = await conn.fetch(
                    f"SELECT name, spec, payload, next, last FROM {q}.cronoq_schedules ORDER BY name"
                )
                paused = await conn.fetch(f"SELECT kind, name FROM {q}.cronoq_paused ORDER BY kind, name")
                bulk_keys = await conn.fetch(
                    f"SELECT {', '.join(BULK_KEY_COLUMNS)} FROM {q}.cronoq_bulk_keys "
                    f"ORDER BY at DESC LIMIT {BULK_KEYS}"
                )
                journals = await conn.fetch(
                    f"SELECT task, idx, record, resumes FROM {q}.cronoq_journal ORDER BY task, idx"
                )
                signals = await conn.fetch(
                    f"SELECT name, payload, at FROM {q}.cronoq_signals WHERE at >= $1", cutoff
                )
                refs = history_refs(rec, schedules, journals)
                cols = ", ".join(TASK_COLUMNS)
                if refs.ids:
                    rows = await conn.fetch(
                        f"SELECT {cols} FROM {q}.cronoq_tasks WHERE id = ANY($1::bigint[]) "
                        "AND finished IS NOT NULL",
                        refs.ids,
                    )
                    add_task_rows(rec, rows, codec, 0)
                if refs.keys:
                    rows = await conn.fetch(
                        f"SELECT {cols} FROM {q}.cronoq_tasks WHERE key = ANY($1::text[]) "
                        "AND finished IS NOT NULL ORDER BY finished DESC, id DESC",
                        sorted(refs.keys),
                    )
                    add_task_rows(rec, key_history_rows(rows, refs.keys), codec, 0)
            return finish_recovered(rec, schedules, codec, paused, bulk_keys, journals, signals)

        result: Recovered = await self._run(op)
        return result

    async def commit(self, mutations: list[Mutation], epoch: int, codec: Codec) -> None:
        if not mutations:
            return
        batch = fold(mutations, codec)
        q = self._q
        if not (
            batch.schedule_ops
            or batch.pause_ops
            or batch.bulk_key_ops
            or batch.journal_ops
            or batch.signal_ops
        ):
            write = self._commit_copy if len(batch.inserts) >= self.copy_from else self._commit_rows
            await bounded(self, self._run(lambda conn: write(conn, batch, epoch)), "PostgresStore")
            return

        async def op(conn: Any) -> None:
            async with conn.transaction():
                row = await conn.fetchrow(
                    f"SELECT epoch, owner FROM {q}.cronoq_leader WHERE id = 1 FOR SHARE"
                )
                self._check_epoch(row, epoch)
                if batch.inserts:
                    await conn.executemany(self._sql_insert, batch.inserts)
                if batch.updates:
                    await conn.executemany(self._sql_update, batch.updates)
                for o in batch.schedule_ops:
                    if o[0] == "upsert":
                        await conn.execute(
                            f"INSERT INTO {q}.cronoq_schedules (name, spec, payload) "
                            "VALUES ($1, $2, $3) ON CONFLICT (name) DO UPDATE "
                            "SET spec = excluded.spec, payload = excluded.payload",
                            o[1],
                            o[2],
                            o[3],
                        )
                    elif o[0] == "remove":
                        await conn.execute(f"DELETE FROM {q}.cronoq_schedules WHERE name = $1", o[1])
                    else:
                        await conn.execute(
                            f"UPDATE {q}.cronoq_schedules SET next = $2, last = $3 WHERE name = $1",
                            o[1],
                            o[2],
                            o[3],
                        )
                for kind, name, paused in batch.pause_ops:
                    if paused:
                        await conn.execute(
                            f"INSERT INTO {q}.cronoq_paused (kind, name) VALUES ($1, $2) "
                            "ON CONFLICT DO NOTHING",
                            kind,
                            name,
                        )
                    else:
                        await conn.execute(
                            f"DELETE FROM {q}.cronoq_paused WHERE kind = $1 AND name = $2", kind, name
                        )
                if batch.bulk_key_ops:
                    await _write_bulk_keys(conn, q, batch.bulk_key_ops)
                if batch.journal_ops or batch.signal_ops:
                    await _journal.pg_write(conn, q, batch)

        await bounded(self, self._run(op), "PostgresStore")

    async def _commit_rows(self, conn: Any, batch: Batch, epoch: int) -> None:
        """A batch of task rows only (the common case) in one statement, one round trip: the
        fencing check, the inserts and the updates (see ``_rows_statement``)."""
        row = await conn.fetchrow(self._sql_rows, epoch, batch.inserts, batch.updates)
        self._check_epoch(row, epoch)

    async def _commit_copy(self, conn: Any, batch: Batch, epoch: int) -> None:
        """A batch of task rows with many new ones (a ``submit_batch``, a backlog): a
        transaction that checks the epoch and writes the updates (``FOR SHARE`` first, as
        ``_rows_statement``), then sends the new rows with a binary ``COPY``.  Five round
        trips where the one statement takes one, but PostgreSQL's bulk insert instead of
        ``INSERT … SELECT unnest(…) ON CONFLICT`` (``bench/pg_commit.py --parts copy``, load
        11, fold included): 1,000 new tasks took 22 against 35 ms and 3.4 against 4.0 us of the
        event loop's CPU per task, 256 8.0 against 12.0 ms and 5.0 against 5.6 us; 64 gained
        no time and cost more CPU (11.7 against 8.8 us).

        ``COPY`` has no ``ON CONFLICT``: a row already there (a retried commit that did reach
        the database before its connection failed) fails it with a unique violation, and the
        batch is then written again by ``_commit_rows``, whose upsert rewrites such rows
        exactly as a retry of it would."""
        asyncpg = _import_asyncpg()
        try:
            async with conn.transaction():
                row = await conn.fetchrow(self._sql_check_updates, epoch, batch.updates)
                self._check_epoch(row, epoch)
                await conn.copy_records_to_table(
                    "cronoq_tasks", records=batch.inserts, columns=TASK_COLUMNS, schema_name=self.schema
                )
        except asyncpg.UniqueViolationError:
            await self._commit_rows(conn, batch, epoch)

    def _check_epoch(self, row: Any, epoch: int) -> None:
        """Raise Fenced (and stop leading) unless the leader row read in the commit's
        transaction still carries ``epoch``."""
        if row is None or row[0] != epoch:
            self._leading = False
            raise Fenced(
                f"PostgresStore: fenced: epoch {epoch} is no longer current in schema "
                f"{self.schema!r} (now {None if row is None else row[0]}, "
                f"leader {None if row is None else row[1]!r})"
            )

    async def load_payload(self, task_id: int) -> bytes | None:
        """The stored payload bytes of task ``task_id`` (None: no such row or no payload), for
        a replay (docs/how-to/operations.md#replay)."""

        async def op(conn: Any) -> bytes | None:
            sql = f"SELECT payload FROM {self._q}.cronoq_tasks WHERE id = $1"
            v = await conn.fetchval(sql, db_id(task_id))
            return None if v is None else bytes(v)

        result: bytes | None = await self._run(op)
        return result

    async def load_finished(self, task_id: int, codec: Codec) -> RecoveredTerminal | None:
        """The finished task ``task_id`` as its row still records it (the store's history,
        kept for ``retention``: after the engine forgot it), or None."""

        async def op(conn: Any) -> RecoveredTerminal | None:
            cols = ", ".join(TASK_COLUMNS)
            row = await conn.fetchrow(
                f"SELECT {cols} FROM {self._q}.cronoq_tasks WHERE id = $1", db_id(task_id)
            )
            return finished_record(None if row is None else tuple(row), codec)

        result: RecoveredTerminal | None = await self._run(op)
        return result

    async def load_finished_key(self, key: str, tenant: str | None, codec: Codec) -> RecoveredTerminal | None:
        """The newest finished task of ``tenant`` with ``key`` the store's history keeps, or
        None (an index lookup: ``cronoq_tasks_key``).  A key with a NUL character is no stored
        key (the submission edges refuse one; text cannot hold it): None without a query."""
        if "\x00" in key:
            return None

        async def op(conn: Any) -> RecoveredTerminal | None:
            cols = ", ".join(TASK_COLUMNS)
            rows = await conn.fetch(
                f"SELECT {cols} FROM {self._q}.cronoq_tasks WHERE key = $1 AND finished IS NOT NULL "
                f"ORDER BY id DESC LIMIT {KEY_HISTORY_ROWS}",
                key,
            )
            return finished_by_key([tuple(r) for r in rows], tenant, codec)

        result: RecoveredTerminal | None = await self._run(op)
        return result

    async def load_finished_page(
        self, before_id: int, limit: int, codec: Codec, statuses: Sequence[str]
    ) -> list[RecoveredTerminal]:
        """Up to ``limit`` finished tasks of the store's history with ids below ``before_id``
        and one of ``statuses`` (or a replay: its original has one), newest first, without their
        outputs (a primary-key range: a bulk replay's page)."""

        async def op(conn: Any) -> list[RecoveredTerminal]:
            rows = await conn.fetch(
                f"SELECT {PAGE_COLUMNS} FROM {self._q}.cronoq_tasks WHERE id < $1 AND finished IS NOT NULL "
                "AND (status = ANY($2::text[]) OR spec LIKE '%\"cronoq.replay_of\"%') "
                "ORDER BY id DESC LIMIT $3",
                db_id(before_id),
                list(statuses),
                limit,
            )
            return finished_records([tuple(r) for r in rows], codec)

        result: list[RecoveredTerminal] = await self._run(op)
        return result

    async def prune(self, now_unix_ns: int, limit: int | None = None) -> int:
        """Delete the finished rows expired at ``now_unix_ns`` (the oldest first, at most
        ``limit``) except those live state still refers to (``_records.prune_refs``: what a
        load reads back whatever its age): the references are read in the same transaction
        (the live definitions parsed once each: ``_records.RefsCache``), then one DELETE
        skips them (a hashed anti-join against their ids).

        Fenced as a commit is: the transaction first reads the leader row ``FOR SHARE`` (with
        whether anything expired) and raises :class:`~cronoq.errors.Fenced`, deleting nothing
        and no longer leading, unless its epoch is this store's.  Its statements each read
        the latest commits (READ COMMITTED): without the lock a new leader's commit between
        them could refer to a row already read as unreferenced, which the DELETE would then
        remove.  With it a takeover's epoch update waits for the prune, and the only other
        writer meanwhile is this store, whose commits wait for the prune (``_io``)."""
        cutoff = now_unix_ns - round(self.retention * 1e9)
        epoch = self._epoch
        q = self._q
        t = f"{q}."

        async def op(conn: Any) -> int:
            async with conn.transaction():
                row = await conn.fetchrow(_PRUNE_CHECK.format(t=t), cutoff)
                self._check_epoch(row, epoch)
                if not row[2]:
                    return 0
                refs = prune_refs(
                    await conn.fetch(PRUNE_LIVE_DEPS.format(t=t)),
                    await conn.fetch(PRUNE_JOURNALS.format(t=t)),
                    await conn.fetch(PRUNE_LASTS.format(t=t)),
                    self._refs,
                )
                keep = refs.ids
                if refs.keys:
                    rows = await conn.fetch(_PRUNE_KEYS.format(t=t), sorted(refs.keys))
                    keep = sorted({*keep, *newest_holders(rows, refs.keys)})
                if limit is None:
                    status = await conn.execute(_PRUNE.format(t=t), cutoff, keep)
                else:
                    status = await conn.execute(_PRUNE_OLDEST.format(t=t), cutoff, keep, max(0, int(limit)))
            return int(status.split()[-1])

        return int(await self._run(op))


#: a prune (``{t}``: the schema and a dot): the fencing check, the leader row read ``FOR
#: SHARE`` first (the lock a takeover's update waits for, taken before any row of the table
#: is: the order commits take them in) with whether any row expired (the index on finished);
#: the holders of the keys live state refers to (``_records.prune_refs``); the delete, which
#: skips the ids to keep (``NOT IN`` a subquery: a hashed anti-join) and takes the oldest
#: first through the index on finished.  A batch deletes ``= ANY(ARRAY(...))`` of them: the
#: primary key's index, where ``IN (subquery)`` was planned as a hash semi-join over a scan of
#: the whole table (measured: 51 against 138 ms for 10,000 rows of 200,000)
_PRUNE_CHECK = (
    "SELECT epoch, owner, EXISTS (SELECT 1 FROM {t}cronoq_tasks WHERE finished IS NOT NULL "
    "AND finished < $1) FROM {t}cronoq_leader WHERE id = 1 FOR SHARE"
)
_PRUNE_KEYS = (
    "SELECT id, key, spec FROM {t}cronoq_tasks WHERE key = ANY($1::text[]) AND finished IS NOT NULL "
    "ORDER BY finished DESC, id DESC"
)
_PRUNE_KEEP = "id NOT IN (SELECT unnest($2::bigint[]))"
_PRUNE = "DELETE FROM {t}cronoq_tasks WHERE finished IS NOT NULL AND finished < $1 AND " + _PRUNE_KEEP
_PRUNE_OLDEST = (
    "DELETE FROM {t}cronoq_tasks WHERE id = ANY(ARRAY(SELECT id FROM {t}cronoq_tasks WHERE finished "
    f"IS NOT NULL AND finished < $1 AND {_PRUNE_KEEP} ORDER BY finished LIMIT $3))"
)


async def _write_bulk_keys(conn: Any, q: str, rows: list[tuple[str, str, str, int, int, bool, int]]) -> None:
    """Upsert bulk request keys' progress; keep the newest :data:`BULK_KEYS` of them."""
    await conn.executemany(
        f"INSERT INTO {q}.cronoq_bulk_keys ({', '.join(BULK_KEY_COLUMNS)}) "
        "VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (action, tenant, key) DO UPDATE "
        "SET matched = excluded.matched, acted = excluded.acted, done = excluded.done, at = excluded.at",
        rows,
    )
    await conn.execute(
        f"DELETE FROM {q}.cronoq_bulk_keys WHERE (action, tenant, key) NOT IN "
        f"(SELECT action, tenant, key FROM {q}.cronoq_bulk_keys ORDER BY at DESC LIMIT {BULK_KEYS})"
    )
