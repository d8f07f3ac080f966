"""``cronoq serve`` with a diagnostic stand-in for the SQLite store's commit (a child of
``bench/server.py``, not a benchmark by itself; nothing here is reachable from a config file).

    python bench/_variant_serve.py VARIANT serve --config PATH

``VARIANT`` (``bench/server.py --stores`` names them ``sqlite-<VARIANT>``):

``real``
    The SQLite store as it is, with the commit counters below.
``exec``
    As ``real``, with every commit handed to the store's thread (``SqliteStore.inline_below``
    0: no small commit runs inline on the event loop's thread): the A side of that change.
``nogather``
    As ``real``, with the group commit's ``gather`` wait 0 (``runtime.durable.Committer``: a
    small commit right after the previous one does not wait the gather for more).
``nosync``
    As ``real``, with ``full_sync=False`` (WAL ``synchronous=NORMAL``: a commit does not flush
    the WAL; an application crash loses nothing, a power loss may): the flush's share of a
    figure on this disk.  A diagnostic, not a setting to deploy for speed.
``delay``
    The store's ``commit()`` only awaits ``asyncio.sleep(D)``: an acknowledgement delayed as long
    as a real commit's, with no thread and no database write (the gRPC / event-loop side of a
    delayed ack alone).
``thread``
    The store's ``commit()`` hands a ``time.sleep(D)`` to the store's own single-thread executor,
    as the real commit hands ``_commit_sync`` to it: the thread hand-off and the GIL traffic of a
    commit thread without its work.
``fold``
    As ``thread``, and the commit thread also builds the rows (``_records.fold``): the Python
    part of a commit's work without SQLite.

``pg-real``
    The PostgreSQL store as it is, with the commit counters below (``bench/server.py --stores``
    calls it ``postgres-real``).
``pg-nosync``
    As ``pg-real``, with ``synchronous_commit = off`` on the store's data connection: a commit
    returns without waiting for its WAL flush (fsync), the same statements otherwise
    (``postgres-nosync``): how much of the PostgreSQL store's gap is the flush's latency.  A
    diagnostic only: an acknowledged task could be lost in a database crash.
``pg-nocopy``
    As ``pg-real``, with every commit of task rows one statement (``PostgresStore.copy_from``
    out of reach: no binary COPY of many new rows): the A side of that change.
``pg-nogather``
    As ``pg-real``, without the group commit's gather wait (as ``nogather``).
``pg-arrays``
    As ``pg-real``, with the one statement's rows sent as one array per column (24 arrays, as
    before the composite row types ``cronoq_task_row`` and ``cronoq_task_update``): the A side
    of that change (the COPY path's updates stay composite).
``pg-base``
    ``pg-arrays`` and ``pg-nocopy`` at once: the store's commits as they were before issue
    #33's PostgreSQL changes of session 15 (one statement, one array per column).

``D`` is ``CRONOQ_BENCH_COMMIT_DELAY_MS`` (default 1.5 ms, about a real commit's latency under
the throughput group's load). Everything else (the lease, ``load()``, the queries) is the real
SQLite store's, so the server runs its durable paths (``Persist`` actions, the group commit, the
barriers before every acknowledgement) in every variant.

On SIGUSR2 the process prints ``COMMITSTATS <commits> <mutations> <seconds> <p50 ms> <p90 ms>
<size p50> <size p90> <ack ms> <backend s>`` to stderr (the server log): the store's commit calls so far, the
mutations they carried and the seconds they took, summed (each from the call to its return, on
the event loop); then, over the commits since the previous report, the median and 90th
percentile of a commit's latency and of its mutations, and the mean time a submission waited
for its commit (``Committer.barrier``, the acknowledgement's delay); last, for the PostgreSQL
variants, the CPU seconds so far of the database backends serving the store (0 for SQLite).
"""

from __future__ import annotations

import asyncio
import os
import signal
import statistics
import sys
import time
from typing import Any

from cronoq.runtime.durable import Committer
from cronoq.store import _records
from cronoq.store.sqlite import SqliteStore

VARIANTS = (
    "real",
    "exec",
    "nogather",
    "nosync",
    "delay",
    "thread",
    "fold",
    "pg-real",
    "pg-nosync",
    "pg-nocopy",
    "pg-nogather",
    "pg-arrays",
    "pg-base",
)


class _Stats:
    commits = 0
    mutations = 0
    seconds = 0.0
    #: since the last report: (seconds, mutations) per commit, and barrier waits in seconds
    recent: list[tuple[float, int]] = []  # noqa: RUF012
    barriers: list[float] = []  # noqa: RUF012
    #: the PostgreSQL backends (pids) serving the store's data connections
    backends: list[int] = []  # noqa: RUF012


def _count(t0: float, mutations: int) -> None:
    took = time.perf_counter() - t0
    _Stats.seconds += took
    _Stats.commits += 1
    _Stats.mutations += mutations
    _Stats.recent.append((took, mutations))


def _patch_barrier() -> None:
    barrier = Committer.barrier

    async def timed(self: Committer) -> None:
        t0 = time.perf_counter()
        try:
            await barrier(self)
        finally:
            _Stats.barriers.append(time.perf_counter() - t0)

    Committer.barrier = timed  # type: ignore[method-assign]


def _no_gather() -> None:
    init = Committer.__init__

    def no_gather(self: Committer, *args: Any, **kw: Any) -> None:
        init(self, *args, **kw)
        self.gather = 0.0

    Committer.__init__ = no_gather  # type: ignore[method-assign]


def _arrays_statement(store: Any) -> None:
    """``store``'s one-statement commit with one array per column, as before the composite
    row types (the ``pg-arrays`` variant)."""
    from cronoq.store import postgres

    tasks = (
        *("bigint", "bigint", "bigint", "text", "text", "int", "text", "text", "bytea", "text", "int"),
        *("bigint", "bigint", "text", "bytea", "boolean"),
    )
    updates = ("text", "int", "text", "bytea", "boolean", "bigint", "bigint", "bigint")
    cols = postgres.TASK_COLUMNS
    n = len(cols)

    def statement(q: str) -> str:
        ins_args = ", ".join(f"${i + 2}::{t}[]" for i, t in enumerate(tasks))
        upd_args = ", ".join(f"${i + 2 + n}::{t}[]" for i, t in enumerate(updates))
        return (
            f"WITH l AS (SELECT epoch, owner FROM {q}.cronoq_leader WHERE id = 1 FOR SHARE), "
            f"ins AS (INSERT INTO {q}.cronoq_tasks ({', '.join(cols)}) SELECT * FROM unnest({ins_args}) "
            "WHERE (SELECT epoch FROM l) = $1 ON CONFLICT (id) DO UPDATE SET "
            + ", ".join(f"{c} = excluded.{c}" for c in cols if c != "id")
            + "), "
            f"upd AS (UPDATE {q}.cronoq_tasks t SET status = u.status, attempt = u.attempt, "
            "message = u.message, output = u.output, has_output = u.has_output, "
            "started = COALESCE(t.started, u.started), finished = u.finished "
            f"FROM unnest({upd_args}) AS u(status, attempt, message, output, has_output, started, "
            "finished, id) WHERE t.id = u.id AND (SELECT epoch FROM l) = $1) "
            "SELECT epoch, owner FROM l"
        )

    async def commit_rows(self: Any, conn: Any, batch: Any, epoch: int) -> None:
        ins = [list(c) for c in zip(*batch.inserts, strict=True)] or [[]] * n
        upd = [list(c) for c in zip(*batch.updates, strict=True)] or [[]] * 8
        row = await conn.fetchrow(statement(self._q), epoch, *ins, *upd)
        self._check_epoch(row, epoch)

    store._commit_rows = commit_rows


def _patch_pg(variant: str) -> None:
    from cronoq.store.postgres import PostgresStore

    real = PostgresStore.commit
    if variant == "pg-nocopy":
        PostgresStore.copy_from = 1 << 62
    elif variant == "pg-nogather":
        _no_gather()
    elif variant in ("pg-arrays", "pg-base"):
        _arrays_statement(PostgresStore)
        if variant == "pg-base":
            PostgresStore.copy_from = 1 << 62

    connect = PostgresStore._connect

    async def counted_connect(self: PostgresStore, *, lock: bool = False) -> Any:
        conn = await connect(self, lock=lock)
        if not lock:
            if variant == "pg-nosync":
                await conn.execute("SET synchronous_commit = off")
            _Stats.backends.append(int(await conn.fetchval("SELECT pg_backend_pid()")))
        return conn

    PostgresStore._connect = counted_connect  # type: ignore[method-assign]

    async def commit(self: PostgresStore, mutations: list[Any], epoch: int, codec: Any) -> None:
        t0 = time.perf_counter()
        await real(self, mutations, epoch, codec)
        _count(t0, len(mutations))

    PostgresStore.commit = commit  # type: ignore[method-assign]


def _patch(variant: str) -> None:
    _patch_barrier()
    if variant.startswith("pg-"):
        _patch_pg(variant)
        return
    delay = float(os.environ.get("CRONOQ_BENCH_COMMIT_DELAY_MS", "1.5")) / 1000.0
    real = SqliteStore.commit
    if variant == "exec":
        SqliteStore.inline_below = 0
        variant = "real"
    elif variant == "nogather":
        _no_gather()
        variant = "real"
    elif variant == "nosync":
        init = SqliteStore.__init__

        def no_sync(self: SqliteStore, *args: Any, **kw: Any) -> None:
            init(self, *args, **kw)
            self.full_sync = False  # (read when the connection opens: PRAGMA synchronous)

        SqliteStore.__init__ = no_sync  # type: ignore[method-assign]
        variant = "real"

    async def inner(self: SqliteStore, mutations: list[Any], epoch: int, codec: Any) -> None:
        if variant == "real":
            await real(self, mutations, epoch, codec)
        elif variant == "delay":
            await asyncio.sleep(delay)
        elif variant == "thread":
            await self._submit(time.sleep, delay)
        else:

            def work() -> None:
                _records.fold(mutations, codec)
                time.sleep(delay)

            await self._submit(work)

    async def commit(self: SqliteStore, mutations: list[Any], epoch: int, codec: Any) -> None:
        t0 = time.perf_counter()
        await inner(self, mutations, epoch, codec)
        _count(t0, len(mutations))

    SqliteStore.commit = commit  # type: ignore[method-assign]


def _pct(xs: list[float], q: float) -> float:
    if not xs:
        return 0.0
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def _backend_cpu() -> float:
    """CPU seconds so far of the database backends of the store's data connections (those
    still running: this machine's /proc, readable by the server's user or root)."""
    total = 0.0
    for pid in _Stats.backends:
        try:
            with open(f"/proc/{pid}/stat") as f:
                st = f.read()
        except OSError:
            continue
        fields = st[st.rindex(")") + 2 :].split()
        total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


def _report(signum: int, frame: object) -> None:
    lat = [t * 1000 for t, _ in _Stats.recent]
    size = [float(m) for _, m in _Stats.recent]
    ack = statistics.fmean(_Stats.barriers) * 1000 if _Stats.barriers else 0.0
    _Stats.recent, _Stats.barriers = [], []
    sys.stderr.write(
        f"COMMITSTATS {_Stats.commits} {_Stats.mutations} {_Stats.seconds:.6f} "
        f"{_pct(lat, 0.5):.3f} {_pct(lat, 0.9):.3f} {_pct(size, 0.5):.0f} {_pct(size, 0.9):.0f} "
        f"{ack:.3f} {_backend_cpu():.2f}\n"
    )
    sys.stderr.flush()


def main() -> None:
    variant = sys.argv[1]
    if variant not in VARIANTS:
        raise SystemExit(f"unknown variant {variant!r} (one of {', '.join(VARIANTS)})")
    _patch(variant)
    signal.signal(signal.SIGUSR2, _report)
    from cronoq.cli import main as cli_main

    cli_main(sys.argv[2:])


if __name__ == "__main__":
    main()
