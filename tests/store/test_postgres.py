"""PostgresStore against a real PostgreSQL (docs/reference/behaviour.md#stores,
docs/reference/behaviour.md#recovery, docs/reference/behaviour.md#fencing,
docs/reference/behaviour.md#high-availability).

Each test uses its own schema and drops it afterwards.  The server is taken from
``CRONOQ_TEST_PG_DSN`` (default ``postgresql://postgres@127.0.0.1:5432/test``); the tests
skip, saying why, only when it cannot be reached.
"""

from __future__ import annotations

import asyncio
import os
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest

from cronoq.engine.mutations import StatusChange, Submitted, TaskRecord
from cronoq.engine.time import NS
from cronoq.errors import Fenced, SchedulerError
from cronoq.store import PostgresStore
from cronoq.store.postgres import ROW_TYPE, UPDATE_TYPE
from services import missing_service

from . import contract
from .contract import codec

asyncpg = pytest.importorskip("asyncpg", reason="asyncpg is not installed (pip install 'cronoq[postgres]')")

DSN = os.environ.get("CRONOQ_TEST_PG_DSN", "postgresql://postgres@127.0.0.1:5432/test")
_reachable: str | None = None  # None: not probed yet; "" reachable; else the reason


async def _probe() -> str:
    global _reachable
    if _reachable is None:
        try:
            conn = await asyncpg.connect(DSN, timeout=3)
            await conn.close()
            _reachable = ""
        except Exception as e:
            _reachable = f"PostgreSQL unreachable at {DSN}: {type(e).__name__}: {e}"
    return _reachable


@pytest.fixture
async def schema() -> AsyncIterator[str]:
    why = await _probe()
    if why:
        missing_service("PostgreSQL", why)
    name = f"cronoq_t_{uuid.uuid4().hex[:12]}"
    yield name
    conn = await asyncpg.connect(DSN)
    try:
        await conn.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')
    finally:
        await conn.close()


@pytest.fixture
def make(schema: str) -> Any:
    def factory(**kw: Any) -> PostgresStore:
        kw.setdefault("lock_poll", 0.05)
        kw.setdefault("keepalive", 0.2)
        return PostgresStore(DSN, schema=schema, **kw)

    return factory


async def sql(query: str, *args: Any) -> Any:
    conn = await asyncpg.connect(DSN)
    try:
        return await conn.execute(query, *args)
    finally:
        await conn.close()


async def test_round_trip_every_mutation_kind(make: Any) -> None:
    await contract.check_round_trip(make)


@pytest.fixture
def make_copy(make: Any) -> Any:
    """Stores that write every new task row with COPY (``copy_from`` 1), counting those commits."""
    copies: list[int] = []

    def factory(**kw: Any) -> PostgresStore:
        s = make(**kw)
        s.copy_from = 1
        write = s._commit_copy

        async def counted(conn: Any, batch: Any, epoch: int) -> None:
            copies.append(len(batch.inserts))
            await write(conn, batch, epoch)

        s._commit_copy = counted  # type: ignore[method-assign]
        return s

    factory.copies = copies  # type: ignore[attr-defined]
    return factory


async def test_round_trip_with_copy(make_copy: Any) -> None:
    """New rows sent with COPY (alone, and beside updates in the same commit) read back as the
    one statement's do; the contract's re-commit of a stored task (a retried commit that had
    reached the database) makes COPY fail on the primary key and falls back to the upsert."""
    await contract.check_round_trip(make_copy)
    assert len(make_copy.copies) >= 3


async def test_copy_commit_is_fenced(make_copy: Any) -> None:
    await contract.check_standby_takes_over_on_release(make_copy)
    assert make_copy.copies


async def test_copy_commit_of_a_takeover_writes_nothing(make_copy: Any, schema: str) -> None:
    """A takeover's epoch update committed while the COPY commit runs: the commit (whose
    check reads the leader row before its COPY) is fenced and none of its rows, new or
    updated, is in the table."""
    a, ea = await contract.leader(make_copy)
    try:
        await a.commit([Submitted(1, 1, 0, TaskRecord(pool="default"))], ea, codec)
        await sql(f'UPDATE "{schema}".cronoq_leader SET epoch = epoch + 1 WHERE id = 1')
        with pytest.raises(Fenced):
            await a.commit(
                [Submitted(i, i, 0, TaskRecord(pool="default")) for i in range(2, 6)]
                + [StatusChange(1, "running", 1, 5)],
                ea,
                codec,
            )
        conn = await asyncpg.connect(DSN)
        try:
            rows = await conn.fetch(f'SELECT id, status FROM "{schema}".cronoq_tasks ORDER BY id')
        finally:
            await conn.close()
        assert [(r[0], r[1]) for r in rows] == [(1, "submitted")]
    finally:
        await a.close()


async def test_row_types_are_added_to_an_existing_schema(make: Any, schema: str) -> None:
    """A schema made before the commit's row types existed (an older version's) gets them on
    open, and its commits go through."""
    s, ep = await contract.leader(make)
    await s.close()
    await sql(f'DROP TYPE "{schema}".{ROW_TYPE}, "{schema}".{UPDATE_TYPE}')
    s, ep = await contract.leader(make)
    try:
        await s.commit([Submitted(1, 1, 0, TaskRecord(pool="default"))], ep, codec)
        await s.commit([StatusChange(1, "running", 1, 5)], ep, codec)
        assert [(t.id, t.status) for t in (await s.load(codec)).tasks] == [(1, "running")]
    finally:
        await s.close()


async def test_another_shape_of_row_type_is_not_used(make: Any, schema: str) -> None:
    """A type of the old name and another field order (a version whose rows differ, sharing the
    schema) is neither kept nor written through: a running mark sets ``started``, not
    ``finished`` (with one type per name the swapped fields made a live task look finished)."""
    s, ep = await contract.leader(make)
    await s.close()
    await sql(f'DROP TYPE IF EXISTS "{schema}".cronoq_task_update')
    await sql(
        f'CREATE TYPE "{schema}".cronoq_task_update AS (status text, attempt int, message text, '
        "output bytea, has_output boolean, finished bigint, started bigint, id bigint)"
    )
    s, ep = await contract.leader(make)
    try:
        await s.commit([Submitted(1, 1, 0, TaskRecord(pool="default"))], ep, codec)
        await s.commit([StatusChange(1, "running", 1, 500)], ep, codec)
        conn = await asyncpg.connect(DSN)
        try:
            row = await conn.fetchrow(f'SELECT status, started, finished FROM "{schema}".cronoq_tasks')
        finally:
            await conn.close()
        assert tuple(row) == ("running", 500, None)
    finally:
        await s.close()


async def test_rows_are_written_field_by_field(make: Any, schema: str) -> None:
    """A commit's rows go as arrays of composite rows: each row lands whole, its NULLs and
    values in their own columns (a column NULL in every row beside mixed ones)."""
    s, ep = await contract.leader(make)
    try:
        await s.commit([Submitted(i, i, 100 + i, TaskRecord(pool="default")) for i in (1, 2, 3)], ep, codec)
        await s.commit(
            [
                StatusChange(1, "running", 1, 200),
                StatusChange(2, "running", 1, 201),
                StatusChange(3, "failed", 2, 202, "boom"),
            ],
            ep,
            codec,
        )
        conn = await asyncpg.connect(DSN)
        try:
            rows = await conn.fetch(
                "SELECT id, arrival, pool, key, payload, status, attempt, started, finished, message, "
                f'output, has_output FROM "{schema}".cronoq_tasks ORDER BY id'
            )
        finally:
            await conn.close()
        assert [tuple(r) for r in rows] == [
            (1, 101, "default", None, None, "running", 1, 200, None, None, None, False),
            (2, 102, "default", None, None, "running", 1, 201, None, None, None, False),
            (3, 103, "default", None, None, "failed", 2, None, 202, "boom", None, False),
        ]
    finally:
        await s.close()


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


async def test_quarantine_of_undecodable_rows(make: Any, schema: str) -> None:
    async def corrupt(tid: int, column: str, value: Any) -> None:
        await sql(f'UPDATE "{schema}".cronoq_tasks SET {column} = $1 WHERE id = $2', value, tid)

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


async def test_standby_takes_over_when_the_leader_session_ends(make: Any) -> None:
    async def crash(store: PostgresStore) -> None:
        await store._stop_keeper()  # the process is gone: nobody reconnects
        store._lock_conn.terminate()  # its session ends, PostgreSQL frees the advisory lock

    await contract.check_standby_takes_over_on_loss(make, crash)


async def test_killed_lock_session_is_noticed(make: Any, schema: str) -> None:
    """The lock session is killed server-side while a standby waits: the standby wins the lock,
    the old leader's keep-alive reports the loss and its commits are fenced."""
    a, ea = await contract.leader(make)
    lost = asyncio.Event()
    a.on_lost = lost.set
    b = await contract.opened(make, lock_poll=0.01)
    try:
        waiting = asyncio.ensure_future(b.acquire())
        await asyncio.sleep(0.1)
        pid = a._lock_conn.get_server_pid()
        await sql("SELECT pg_terminate_backend($1)", pid)
        eb = await asyncio.wait_for(waiting, 10)
        assert eb > ea
        await asyncio.wait_for(lost.wait(), 10)
        assert not await a.is_leader() and await b.is_leader()
    finally:
        await a.close()
        await b.close()


async def test_keepalive_keeps_the_term_when_nobody_took_over(make: Any) -> None:
    a, ea = await contract.leader(make)
    try:
        await sql("SELECT pg_terminate_backend($1)", a._lock_conn.get_server_pid())
        # the keep-alive notices, reconnects and re-takes the lock; it never steps down meanwhile
        deadline = time.monotonic() + 20  # a safety net only: on a loaded host this takes a while
        while not await a.is_leader():
            assert a.leading, "stepped down although nobody took over"
            assert time.monotonic() < deadline, "the keep-alive did not re-take the lock"
            await asyncio.sleep(0.02)
        assert a.leading and a.epoch == ea
        await a.commit([Submitted(1, 1, 0, TaskRecord(pool="default"))], ea, codec)
    finally:
        await a.close()


async def test_data_connection_loss_is_transient_and_recovers(make: Any) -> None:
    from cronoq.store import TransientStoreError

    a, ea = await contract.leader(make)
    try:
        await a.commit([Submitted(1, 1, 0, TaskRecord(pool="default"))], ea, codec)
        await sql("SELECT pg_terminate_backend($1)", a._conn.get_server_pid())
        try:  # either the loss is noticed first (reconnect at once) or the commit fails transiently
            await a.commit([Submitted(2, 2, 0, TaskRecord(pool="default"))], ea, codec)
        except TransientStoreError:
            await a.commit([Submitted(2, 2, 0, TaskRecord(pool="default"))], ea, codec)  # reconnects
        assert [t.id for t in (await a.load(codec)).tasks] == [1, 2]
    finally:
        await a.close()


async def test_close_releases_leadership(make: Any) -> None:
    await contract.check_close_releases(make)


async def test_schemas_are_independent(make: Any, schema: str) -> None:
    other = schema + "_b"
    a, _ = await contract.leader(make)
    b = PostgresStore(DSN, schema=other)
    try:
        await b.open()
        assert await asyncio.wait_for(b.acquire(wait=False), 10) == 1  # its own lock and epochs
    finally:
        await a.close()
        await b.close()
        await sql(f'DROP SCHEMA IF EXISTS "{other}" CASCADE')


async def test_unreachable_server_is_a_clear_error() -> None:
    s = PostgresStore("postgresql://postgres@127.0.0.1:1/test", connect_timeout=2.0)
    with pytest.raises(SchedulerError, match="cannot connect"):
        await s.open()


def test_schema_name_is_validated() -> None:
    with pytest.raises(ValueError, match="identifier"):
        PostgresStore(DSN, schema='x"; DROP TABLE y; --')


async def test_pause_and_replay_survive_restart(make: Any) -> None:
    await contract.check_pause_and_replay_survive_restart(make)


async def test_paused_table_is_added_to_an_existing_schema(make: Any, schema: str) -> None:
    """A schema written before the table existed gets it on open (additive migration)."""
    s = make()
    await s.open()
    await s.close()
    await sql(f'DROP TABLE "{schema}".cronoq_paused')
    await contract.check_pause_and_replay_survive_restart(make)


async def test_sharded_ids_round_trip(make: Any) -> None:
    await contract.check_sharded_ids(make)


async def test_store_of_another_shard_refused(make: Any) -> None:
    await contract.check_store_of_another_shard_refused(make)


# An index added to a table an older version made, without stopping writes: a rolling upgrade
# opens the new version while a leader of the old one writes to the same table.

INSERT = (
    'INSERT INTO "{s}".cronoq_tasks (id, seq, arrival, pool, kind, priority, spec, status, attempt) '
    "VALUES ($1, $1, 0, 'default', 'k', 0, '{{}}', 'pending', 0)"
)


async def _index_valid(conn: Any, schema: str) -> bool | None:
    v: bool | None = await conn.fetchval(
        "SELECT i.indisvalid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
        "JOIN pg_namespace n ON n.oid = c.relnamespace "
        "WHERE n.nspname = $1 AND c.relname = 'cronoq_tasks_live'",
        schema,
    )
    return v


async def _older_schema(make: Any, schema: str, conn: Any) -> None:
    """The tables as an older version left them: no ``cronoq_tasks_live``."""
    store = make()
    await store.open()
    await store.close()
    assert await _index_valid(conn, schema) is True  # a new table gets it at once
    await conn.execute(f'DROP INDEX "{schema}".cronoq_tasks_live')
    await conn.execute(INSERT.format(s=schema), 1)


async def _waiting_build(conn: Any, timeout: float = 10.0) -> None:
    """Until a statement building cronoq_tasks_live waits for a lock (observed, not slept)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        n = await conn.fetchval(
            "SELECT count(*) FROM pg_stat_activity WHERE query LIKE '%INDEX%cronoq_tasks_live%' "
            "AND wait_event_type = 'Lock' AND pid <> pg_backend_pid()"
        )
        if n:
            return
        await asyncio.sleep(0.02)
    pytest.fail("no index build started waiting behind the open transaction")


async def test_index_is_added_while_the_old_leader_writes(make: Any, schema: str) -> None:
    admin = await asyncpg.connect(DSN)
    writer = await asyncpg.connect(DSN)
    other = await asyncpg.connect(DSN)
    try:
        await _older_schema(make, schema, admin)
        # the old leader is mid-commit: its transaction holds a row lock on the table
        tx = writer.transaction()
        await tx.start()
        await writer.execute(f'UPDATE "{schema}".cronoq_tasks SET attempt = 1 WHERE id = 1')
        store = make()
        opening = asyncio.create_task(store.open())
        await _waiting_build(admin)
        # ... and while the build waits, more commits go through (a plain CREATE INDEX queues
        # a lock that every later write waits behind: this insert would time out)
        await other.execute("SET lock_timeout = '3s'")
        await other.execute(INSERT.format(s=schema), 2)
        assert not opening.done()
        await tx.commit()
        await asyncio.wait_for(opening, 20)
        assert await _index_valid(admin, schema) is True
        await store.close()
    finally:
        for c in (admin, writer, other):
            await c.close()


async def test_invalid_index_from_an_unfinished_build_is_rebuilt(make: Any, schema: str) -> None:
    admin = await asyncpg.connect(DSN)
    try:
        await _older_schema(make, schema, admin)
        await admin.execute(
            f'CREATE INDEX cronoq_tasks_live ON "{schema}".cronoq_tasks (id) WHERE finished IS NULL'
        )
        # what a CREATE INDEX CONCURRENTLY that was cancelled or timed out leaves behind
        await admin.execute(
            "UPDATE pg_index SET indisvalid = false "
            f"WHERE indexrelid = '\"{schema}\".cronoq_tasks_live'::regclass"
        )
        assert await _index_valid(admin, schema) is False
        store = make()
        await store.open()
        assert await _index_valid(admin, schema) is True
        await store.close()
    finally:
        await admin.close()


async def test_open_does_not_wait_for_another_instance_building(make: Any, schema: str) -> None:
    admin = await asyncpg.connect(DSN)
    try:
        await _older_schema(make, schema, admin)
        await admin.execute("SELECT pg_advisory_lock(hashtext('cronoq.index'), hashtext($1))", schema)
        store = make()
        await asyncio.wait_for(store.open(), 10)  # goes on: the other instance builds it
        assert await _index_valid(admin, schema) is None
        await store.close()
        await admin.execute("SELECT pg_advisory_unlock(hashtext('cronoq.index'), hashtext($1))", schema)
        store = make()
        await store.open()
        assert await _index_valid(admin, schema) is True
        await store.close()
    finally:
        await admin.close()


async def test_a_message_with_a_nul_is_stored(make: Any) -> None:
    """A task's message with a NUL character (PostgreSQL's text holds none) is stored with a
    replacement character: it failed the whole commit for good, and the leader stepped down."""
    s, ep = await contract.leader(make)
    try:
        now = contract.now_ns()
        await s.commit([Submitted(1, 1, now, TaskRecord(pool="default"))], ep, codec)
        await s.commit([StatusChange(1, "failed", 1, now, "bad\x00byte")], ep, codec)
        rec = await s.load(codec)
        assert [(t.id, t.status, t.message) for t in rec.terminal] == [(1, "failed", "bad\ufffdbyte")]
    finally:
        await s.close()


async def test_a_lookup_by_a_key_with_a_nul_finds_nothing(make: Any) -> None:
    """No stored key holds a NUL (the submission edges refuse one; text cannot): a lookup by
    such a key is None, not a query PostgreSQL fails (``Get``/``Wait`` of a client's key)."""
    s, ep = await contract.leader(make)
    try:
        now = contract.now_ns()
        await s.commit([Submitted(1, 1, now, TaskRecord(pool="default", key="k"))], ep, codec)
        await s.commit([StatusChange(1, "succeeded", 1, now, None, None, False)], ep, codec)
        assert await s.load_finished_key("k\x00", None, codec) is None
        found = await s.load_finished_key("k", None, codec)
        assert found is not None and found.id == 1
    finally:
        await s.close()


# ------------------------------------------------------------------ fenced prunes


def _finished(i: int, at: int) -> list[Any]:
    """A task ``i`` that finished at Unix ns ``at``."""
    return [Submitted(i, i, at - 1, TaskRecord(pool="default")), StatusChange(i, "succeeded", 1, at)]


async def _ids(schema: str) -> list[int]:
    conn = await asyncpg.connect(DSN)
    try:
        return [r[0] for r in await conn.fetch(f'SELECT id FROM "{schema}".cronoq_tasks ORDER BY id')]
    finally:
        await conn.close()


async def _lock_waiter(schema: str, pid: int | None = None) -> bool:
    """Whether a session (``pid``; None: one whose statement updates this schema's leader
    row) waits for a lock."""
    conn = await asyncpg.connect(DSN)
    try:
        if pid is not None:
            sql_ = "SELECT count(*) FROM pg_stat_activity WHERE pid = $1 AND wait_event_type = 'Lock'"
            return bool(await conn.fetchval(sql_, pid))
        sql_ = (
            "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
            "AND query LIKE 'UPDATE ' || $1 || '.cronoq_leader%'"
        )
        return bool(await conn.fetchval(sql_, f'"{schema}"'))
    finally:
        await conn.close()


async def _until(done: Any, *waits: asyncio.Future[Any]) -> None:
    """Poll ``done()`` until it holds or one of ``waits`` ended (a safety deadline only)."""
    deadline = time.monotonic() + 20
    while not await done() and not any(w.done() for w in waits):
        assert time.monotonic() < deadline, "neither happened"
        await asyncio.sleep(0.01)


async def _crash(store: PostgresStore) -> None:
    """The leader's lock session ends and nobody re-takes it (its data connection stays)."""
    await store._stop_keeper()
    store._lock_conn.terminate()


async def test_a_deposed_leaders_prune_deletes_nothing(make: Any, schema: str) -> None:
    """After a takeover the old leader's prune is fenced as its commits are: it deletes none
    of the expired rows (its own, or the new leader's) and stops leading; the new leader's
    prune deletes them."""
    a, ea = await contract.leader(make, retention=100.0)
    b = await contract.opened(make, retention=100.0)
    try:
        old = time.time_ns() - 500 * NS
        await a.commit(_finished(1, old), ea, codec)
        await _crash(a)
        eb = await asyncio.wait_for(b.acquire(), contract.SAFETY)
        assert eb > ea
        await b.commit([*_finished(2, old), Submitted(3, 3, old, TaskRecord(pool="default"))], eb, codec)
        with pytest.raises(Fenced):
            await a.prune(time.time_ns())
        assert not a.leading
        assert await _ids(schema) == [1, 2, 3]
        assert await b.prune(time.time_ns()) == 2  # the leader's prune: the live task stays
        assert await _ids(schema) == [3]
    finally:
        await a.close()
        await b.close()


async def test_a_takeover_waits_for_a_prune_in_flight(make: Any, schema: str) -> None:
    """A prune that has read what live state refers to and is deleting (here held up by
    another session's lock on an expired row) when the leader's lock session ends: the
    standby's epoch update waits until the prune has ended, so no commit of the new term can
    add a reference to a row the prune read as unreferenced before its DELETE."""
    a, ea = await contract.leader(make, retention=100.0)
    b = await contract.opened(make, retention=100.0, lock_poll=0.01)
    holder = await asyncpg.connect(DSN)
    try:
        old = time.time_ns() - 500 * NS
        await a.commit(_finished(1, old), ea, codec)
        hold = holder.transaction()
        await hold.start()
        await holder.execute(f'SELECT 1 FROM "{schema}".cronoq_tasks WHERE id = 1 FOR UPDATE')
        pruning = asyncio.ensure_future(a.prune(time.time_ns()))
        await _until(lambda: _lock_waiter(schema, a._conn.get_server_pid()), pruning)
        assert not pruning.done()
        await _crash(a)
        taking = asyncio.ensure_future(b.acquire())
        await _until(lambda: _lock_waiter(schema), taking)
        assert not taking.done(), "the standby took over while the old leader's prune was deleting"
        await hold.commit()
        assert await asyncio.wait_for(pruning, contract.SAFETY) == 1  # still its term: row 1 goes
        eb = await asyncio.wait_for(taking, contract.SAFETY)
        assert eb > ea
        with pytest.raises(Fenced):
            await a.prune(time.time_ns())
    finally:
        await holder.close()
        await a.close()
        await b.close()


async def test_a_prune_behind_a_takeover_is_fenced_without_deadlock(make: Any, schema: str) -> None:
    """A prune that starts while a takeover's epoch update is not yet committed waits for it
    holding no lock on a task row (the leader row comes first, as in a commit: the takeover's
    transaction can lock an expired row meanwhile), then is fenced and deletes nothing."""
    a, ea = await contract.leader(make, retention=100.0)
    taker = await asyncpg.connect(DSN)
    try:
        await a.commit(_finished(1, time.time_ns() - 500 * NS), ea, codec)
        take = taker.transaction()
        await take.start()
        await taker.execute(f'UPDATE "{schema}".cronoq_leader SET epoch = epoch + 1 WHERE id = 1')
        pruning = asyncio.ensure_future(a.prune(time.time_ns()))
        await _until(lambda: _lock_waiter(schema, a._conn.get_server_pid()), pruning)
        assert not pruning.done(), "the prune did not wait for the takeover"
        await taker.execute("SET LOCAL lock_timeout = '10s'")
        await taker.execute(f'SELECT 1 FROM "{schema}".cronoq_tasks WHERE id = 1 FOR UPDATE')
        await take.commit()
        with pytest.raises(Fenced):
            await asyncio.wait_for(pruning, contract.SAFETY)
        assert await _ids(schema) == [1]
    finally:
        await taker.close()
        await a.close()
