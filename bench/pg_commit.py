"""The PostgreSQL store's commit latency and CPU on this machine, and the flush under it (issue #33).

Two parts, on the test database (``--dsn``, default ``CRONOQ_BENCH_PG_URL`` or
``postgresql://postgres@127.0.0.1:5432/test``), in a schema of its own dropped at the end:

``idle``
    One client, one statement at a time, nothing else running on its event loop: the round trip
    of ``SELECT 1``, and a committed one-row ``INSERT`` (autocommit) with ``synchronous_commit``
    on (the default: the commit returns after its WAL flush, an ``fdatasync`` with this
    server's ``wal_sync_method``) and off (no wait for the flush).  Their difference is the
    flush's share of a commit; the server's settings that bear on it are printed first.

``store``
    ``PostgresStore.commit`` as the group commit calls it, for groups of ``--sizes`` tasks,
    each task written the way the engine writes it in three commits (its ``Submitted``, its
    ``running`` mark, its ``succeeded`` mark), synchronous_commit on and off: each commit's
    latency (median, 90th percentile) and CPU per task, of this thread (``fold``, asyncpg's
    encoding, the result) and of the database backend serving it (``/proc/<pid>/stat`` of
    ``pg_backend_pid()``: needs the same machine and the right to read it).

``copy``
    Commits of ``--sizes`` new tasks by the one statement and by COPY (``PostgresStore.
    copy_from``), alternated in ABBA order: latency and this thread's CPU per task.

    python bench/pg_commit.py --rounds 200 --sizes 1,10,100,1000
    python bench/pg_commit.py --parts copy --sizes 100,256,1000

With ``pg_test_fsync`` (PostgreSQL's own tool, ``/usr/lib/postgresql/*/bin/pg_test_fsync -f
FILE`` on the data directory's filesystem) this gives the flush's floor for the closed-loop
bound of ``docs/benchmarks.md``: a submission is acknowledged after the commit holding it.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time

try:  # the installed (editable) cronoq, or whatever PYTHONPATH points at; else this checkout
    import cronoq as _cronoq  # noqa: F401
except ImportError:  # pragma: no cover - not installed
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src"))
if os.path.dirname(os.path.abspath(__file__)) not in sys.path:
    sys.path.append(os.path.dirname(os.path.abspath(__file__)))  # (bench/sqlite_commit.py)

from cronoq.engine.mutations import Mutation
from cronoq.server.app import BlobCodec
from cronoq.store.postgres import PostgresStore

DSN = os.environ.get("CRONOQ_BENCH_PG_URL", "postgresql://postgres@127.0.0.1:5432/test")
SETTINGS = (
    "wal_sync_method",
    "synchronous_commit",
    "commit_delay",
    "commit_siblings",
    "fsync",
    "wal_buffers",
)


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def proc_cpu(pid: int) -> float:
    """CPU seconds (user + system) of process ``pid`` so far (0.0 if unreadable)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            st = f.read()
    except OSError:
        return 0.0
    fields = st[st.rindex(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def idle(dsn: str, schema: str, rounds: int) -> None:
    import asyncpg  # type: ignore[import-untyped]

    conn = await asyncpg.connect(dsn)
    try:
        for name in SETTINGS:
            print(f"  {name} = {await conn.fetchval(f'SHOW {name}')}")
        await conn.execute(f"CREATE TABLE {schema}.one (id bigint PRIMARY KEY, at bigint)")
        lat: dict[str, list[float]] = {}
        n = 0
        for r in range(rounds):
            for label, sql in (("SELECT 1", None), ("INSERT, synchronous_commit on", "on"),
                               ("INSERT, synchronous_commit off", "off")):  # fmt: skip
                if sql is not None:
                    await conn.execute(f"SET synchronous_commit = {sql}")
                n += 1
                t = time.perf_counter()
                if sql is None:
                    await conn.fetchval("SELECT 1")
                else:
                    await conn.execute(f"INSERT INTO {schema}.one VALUES ($1, $2)", n, r)
                lat.setdefault(label, []).append((time.perf_counter() - t) * 1000)
            await asyncio.sleep(0.002)  # idle between rounds: no commit waits behind another
        for label, xs in lat.items():
            print(f"  {label:<32} p50 {pct(xs, 0.5):6.3f} ms  p90 {pct(xs, 0.9):6.3f} ms  ({len(xs)} runs)")
    finally:
        await conn.close()


async def drop_schema(dsn: str, schema: str) -> None:
    import asyncpg

    c = await asyncpg.connect(dsn)
    try:
        await c.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
    finally:
        await c.close()


def commits_of(n: int, rounds: int, payload: bytes | None) -> list[list[list[Mutation]]]:
    """``rounds`` rounds of three commits of ``n`` tasks each (submits, running marks,
    succeeded marks): bench/sqlite_commit.py's."""
    from sqlite_commit import rounds_of

    return rounds_of(n, rounds, payload)


async def store_run(dsn: str, schema: str, n: int, rounds: int, sync: bool) -> None:
    s = PostgresStore(dsn, schema=schema)
    await s.open()
    try:
        epoch = await s.acquire(wait=False)
        conn = await s._data()
        if not sync:
            await conn.execute("SET synchronous_commit = off")
        backend = await conn.fetchval("SELECT pg_backend_pid()")
        codec = BlobCodec()
        work = commits_of(n, rounds, None)
        lat: list[list[float]] = [[], [], []]
        cpu = [0.0, 0.0, 0.0]
        db = [0.0, 0.0, 0.0]
        for commits in work:
            for k, muts in enumerate(commits):
                b0 = proc_cpu(backend)
                c0 = time.thread_time()
                t0 = time.perf_counter()
                await s.commit(muts, epoch, codec)
                lat[k].append((time.perf_counter() - t0) * 1000)
                cpu[k] += time.thread_time() - c0
                db[k] += proc_cpu(backend) - b0
            await asyncio.sleep(0.002)
        tasks = n * rounds
        for k, label in enumerate(("submits", "running", "succeeded")):
            print(
                f"  n={n:<5} sync {'on ' if sync else 'off'} {label:<9} "
                f"commit p50 {pct(lat[k], 0.5):7.3f} ms "
                f"p90 {pct(lat[k], 0.9):7.3f} ms; CPU us/task: client {cpu[k] / tasks * 1e6:6.1f}, "
                f"backend {db[k] / tasks * 1e6:6.1f}",
                flush=True,
            )
    finally:
        await s.close()
        await drop_schema(dsn, schema)


async def copy_ab(dsn: str, schema: str, n: int, rounds: int) -> None:
    """Commits of ``n`` new tasks, alternately by the one statement (``copy_from`` above ``n``)
    and by COPY (``copy_from`` ``n``), in ABBA order; each round's running and succeeded marks
    follow as the engine's would."""
    s = PostgresStore(dsn, schema=schema)
    await s.open()
    try:
        epoch = await s.acquire(wait=False)
        codec = BlobCodec()
        lat: dict[str, list[float]] = {"statement": [], "copy": []}
        cpu = dict.fromkeys(lat, 0.0)
        for r, commits in enumerate(commits_of(n, rounds * 2, None)):
            way = ("statement", "copy")[(r + r // 2) % 2]  # ABBA
            s.copy_from = n if way == "copy" else n + 1
            c0 = time.thread_time()
            t0 = time.perf_counter()
            await s.commit(commits[0], epoch, codec)
            lat[way].append((time.perf_counter() - t0) * 1000)
            cpu[way] += time.thread_time() - c0
            for muts in commits[1:]:
                await s.commit(muts, epoch, codec)
        for way, xs in lat.items():
            print(
                f"  n={n:<5} {way:<9} commit p50 {pct(xs, 0.5):7.3f} ms p90 {pct(xs, 0.9):7.3f} ms; "
                f"client CPU {cpu[way] / len(xs) / n * 1e6:5.2f} us/task (fold included)",
                flush=True,
            )
    finally:
        await s.close()
        await drop_schema(dsn, schema)


async def amain(args: argparse.Namespace) -> None:
    import asyncpg

    schema = f"cronoq_pgcommit_{os.getpid()}"
    print(f"load {os.getloadavg()[0]:.2f}")
    if "idle" in args.parts:
        c = await asyncpg.connect(args.dsn)
        await c.execute(f"CREATE SCHEMA {schema}")
        await c.close()
        try:
            print("idle client, one statement at a time:")
            await idle(args.dsn, schema, args.rounds)
        finally:
            c = await asyncpg.connect(args.dsn)
            await c.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
            await c.close()
    if "store" in args.parts:
        print("PostgresStore.commit, three commits per task (backend CPU is /proc, 10 ms ticks):")
        for n in args.sizes:
            rounds = max(3, args.rounds * 10 // max(10, n)) if n > 10 else args.rounds
            for sync in (True, False):
                await store_run(args.dsn, f"{schema}_s", n, rounds, sync)
    if "copy" in args.parts:
        print("new tasks by the one statement against COPY (PostgresStore.copy_from), ABBA:")
        for n in args.sizes:
            await copy_ab(args.dsn, f"{schema}_c", n, max(4, args.rounds * 10 // max(10, n)))
    print(f"load {os.getloadavg()[0]:.2f}")


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dsn", default=DSN)
    p.add_argument("--rounds", type=int, default=200, help="rounds of the idle part; the store part's scale")
    p.add_argument("--sizes", default="1,10,100,1000", help="tasks per commit in the store part")
    p.add_argument("--parts", default="idle,store", help="of idle, store, copy (default idle,store)")
    args = p.parse_args(argv)
    args.sizes = [int(x) for x in args.sizes.split(",")]
    args.parts = args.parts.split(",")
    asyncio.run(amain(args))


if __name__ == "__main__":
    main()
