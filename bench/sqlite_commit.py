"""The SQLite store's own CPU per task on a big commit, split by phase (issue #33).

Runs the store's commit path without a server, an engine or an event loop: rounds of ``--n``
tasks, each task written the way the engine writes it in three commits (its ``Submitted``, its
``running`` mark, its ``succeeded`` mark with an output), each commit folded by
``_records.fold`` and written by ``SqliteStore._write_batch`` on a real file (WAL,
``synchronous=FULL`` unless ``--normal``), on this one thread.  Thread CPU
(``time.thread_time``: user + system of this thread, fsync included) per task, split into:

* ``fold``: mutations -> rows (``_records.fold``);
* ``write``: the statements of the transaction (``_write_batch`` up to its COMMIT: binding,
  the multi-row statements of ``sqlite._write_rows``, SQLite's B-tree and index work);
* ``commit``: the COMMIT (WAL append, fsync) and, when the WAL passed the autocheckpoint
  size, the checkpoint SQLite runs in it;

and, with ``--split``, the ``write`` phase again against the same statements on a table without
the three secondary indexes (the difference: their cost) and with one row a statement, a
loop of ``execute`` (the difference: what the multi-row statements save).

    python bench/sqlite_commit.py --n 1000 --rounds 20
    python bench/sqlite_commit.py --n 100 --rounds 100 --split

Figures are us per task (three commits per task per round); the median of ``--repeat`` runs.

``--apsw`` instead compares the Python ``sqlite3`` module against ``apsw`` (a C wrapper with
less per-statement work, its own SQLite: the A/B tells what swapping the store's module would
give, library build included) on the commits of a 64-coroutine wave and of other sizes: a
commit of ``W`` tasks' submits and the previous commit's ``W`` tasks' starts and ends (``3W``
mutations; 64 inserts and 64 updates with an output for the wave), each folded by
``_records.fold`` and written by ``SqliteStore._write_batch`` (the same statements and
PRAGMAs: WAL, ``synchronous=FULL``) on a file of its own per arm, the arms interleaved
commit-group by commit-group (``--rounds`` groups of ``--commits`` commits each, the first
arm alternating).  Arms ``sqlite3``, ``sqlite3-nosecure`` (``PRAGMA secure_delete=OFF``: the
Debian library is built with it on, apsw's without), ``apsw`` and ``apsw-secure``, and on
request ``pysqlite3`` (``pysqlite3-binary``: sqlite3's module on a newer SQLite of its own,
with lookaside memory, which the Debian library omits; ``--no-lookaside`` turns it off in
apsw's); per commit,
thread CPU of the fold, the statements (``BEGIN IMMEDIATE`` to before ``COMMIT``) and the
``COMMIT``, and wall of the whole; medians over all commits, and the median of per-round
ratios to ``sqlite3``.  ``--busy-thread`` runs a thread spinning in Python meanwhile: the
GIL, released around every step by both modules, is then handed over and waited for back.
apsw is not a dependency of cronoq (``pip install apsw``).

    python bench/sqlite_commit.py --apsw --sizes 2,6,64,167 --rounds 20 --commits 60
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import sys
import tempfile
import threading
import time
import types
from collections.abc import Callable
from typing import Any

try:  # the installed (editable) cronoq, or whatever PYTHONPATH points at; else this checkout
    import cronoq as _cronoq  # noqa: F401
except ImportError:  # pragma: no cover - not installed
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src"))

from cronoq.engine.mutations import Mutation, StatusChange, Submitted, TaskRecord
from cronoq.server.app import BlobCodec
from cronoq.store import sqlite as sq
from cronoq.store._records import fold

NS = 1_000_000_000
PHASES = ("fold", "write", "commit")


def rounds_of(n: int, rounds: int, payload: bytes | None) -> list[list[list[Mutation]]]:
    """``rounds`` rounds of three commits of ``n`` tasks each: submits, running marks,
    succeeded marks (ids go on across rounds, as an engine's do)."""
    t0 = time.time_ns()
    out = []
    tid = 0
    for _ in range(rounds):
        ids = range(tid + 1, tid + n + 1)
        tid += n
        spec = TaskRecord(pool="bench", kind="default", priority=2, tolerance=NS, payload=payload)
        out.append(
            [
                [Submitted(i, i, t0 + i, spec) for i in ids],
                [StatusChange(i, "running", 1, t0 + i + 10) for i in ids],
                [StatusChange(i, "succeeded", 1, t0 + i + 20, None, None, True) for i in ids],
            ]
        )
    return out


def open_store(path: str, normal: bool) -> sq.SqliteStore:
    """A store opened and leading on ``path``, without its executor or renewer (this thread
    uses the connection directly)."""
    s = sq.SqliteStore(path, full_sync=not normal)
    sq._identity_adapters()
    s._open_sync()
    epoch = s._try_take_sync()
    assert epoch is not None
    s._epoch = epoch
    s._leading = True
    return s


def run(args: argparse.Namespace, indexes: bool = True, loop: bool = False) -> dict[str, float]:
    """One run on a fresh file: us per task for each phase."""
    codec = BlobCodec()
    work = rounds_of(args.n, args.rounds, b'{"x":1}' if args.payload else None)
    with tempfile.TemporaryDirectory(dir=args.dir) as d:
        s = open_store(os.path.join(d, "bench.db"), args.normal)
        conn = s._db()
        for pragma in args.pragma:
            conn.execute(f"PRAGMA {pragma}")
        if not indexes:
            for ix in ("cronoq_tasks_finished", "cronoq_tasks_key", "cronoq_tasks_live"):
                conn.execute(f"DROP INDEX {ix}")
        spent = dict.fromkeys(PHASES, 0.0)
        proxy = _Proxy(conn, spent, loop)
        multi = sq._multi_rows()
        sq._MULTI_ROWS = multi and not loop  # (the loop figure: one row a statement throughout)
        clock = time.thread_time
        try:
            for commits in work:
                for muts in commits:
                    t = clock()
                    batch = fold(muts, codec)
                    t1 = clock()
                    spent["fold"] += t1 - t
                    conn.execute("BEGIN IMMEDIATE")
                    before = spent["commit"]
                    s._write_batch(proxy, batch, s._epoch)  # type: ignore[arg-type]
                    spent["write"] += clock() - t1 - (spent["commit"] - before)
        finally:
            sq._MULTI_ROWS = multi
            s._close_sync()
    tasks = args.n * args.rounds
    return {k: v / tasks * 1e6 for k, v in spent.items()}


class _Proxy:
    """The connection, timing its COMMIT; with ``loop``, its ``executemany`` a loop of
    ``execute`` (the ``--split`` figure)."""

    def __init__(self, conn: Any, spent: dict[str, float], loop: bool) -> None:
        self._c = conn
        self._spent = spent
        self.executemany: Callable[..., Any] = self._loop if loop else conn.executemany

    def execute(self, sql: str, *a: Any) -> Any:
        if sql != "COMMIT":
            return self._c.execute(sql, *a)
        t = time.thread_time()
        r = self._c.execute(sql)
        self._spent["commit"] += time.thread_time() - t
        return r

    def _loop(self, sql: str, rows: Any) -> Any:
        ex = self._c.execute
        n = 0
        for r in rows:
            n += ex(sql, r).rowcount
        return types.SimpleNamespace(rowcount=n)

    @property
    def in_transaction(self) -> bool:
        return bool(self._c.in_transaction)


def median_run(args: argparse.Namespace, **kw: Any) -> dict[str, float]:
    runs = [run(args, **kw) for _ in range(args.repeat)]
    return {k: statistics.median(r[k] for r in runs) for k in PHASES}


def show(label: str, r: dict[str, float]) -> None:
    total = sum(r.values())
    parts = "  ".join(f"{k} {r[k]:6.1f}" for k in PHASES)
    print(f"{label:<14} {parts}  total {total:6.1f} us/task", flush=True)


class _ApswConn:
    """An apsw connection with the little of sqlite3's interface ``_write_batch`` uses: a
    statement's ``rowcount`` (apsw's ``changes``), ``in_transaction``."""

    def __init__(self, conn: Any) -> None:
        self._c = conn

    def execute(self, sql: str, params: Any = ()) -> Any:
        c = self._c
        return _ApswCursor(c.execute(sql, params), c.changes())

    def executemany(self, sql: str, rows: Any) -> Any:
        c = self._c
        before = c.total_changes()
        c.executemany(sql, rows)
        return types.SimpleNamespace(rowcount=c.total_changes() - before)

    @property
    def in_transaction(self) -> bool:
        return bool(self._c.in_transaction)


class _ApswCursor:
    __slots__ = ("_cur", "rowcount")

    def __init__(self, cur: Any, rowcount: int) -> None:
        self._cur = cur
        self.rowcount = rowcount

    def fetchone(self) -> Any:
        return self._cur.fetchone()


class _Timed:
    """A connection (sqlite3's, or ``_ApswConn``) whose COMMIT's thread CPU is kept apart."""

    def __init__(self, conn: Any) -> None:
        self._c = conn
        self.executemany = conn.executemany
        self.commit_cpu = 0.0

    def execute(self, sql: str, *a: Any) -> Any:
        if sql != "COMMIT":
            return self._c.execute(sql, *a)
        t = time.thread_time()
        r = self._c.execute(sql)
        self.commit_cpu += time.thread_time() - t
        return r

    @property
    def in_transaction(self) -> bool:
        return bool(self._c.in_transaction)


ARMS = ("sqlite3", "sqlite3-nosecure", "apsw", "apsw-secure")


def _pragmas(normal: bool) -> tuple[str, ...]:
    """The PRAGMAs the store sets on its connection (``SqliteStore._open_sync``)."""
    return ("journal_mode = WAL", f"synchronous = {'NORMAL' if normal else 'FULL'}", "foreign_keys = OFF")


def _arm(d: str, name: str, normal: bool) -> tuple[sq.SqliteStore, Any, Callable[[], None]]:
    """The store (leading, its schema made through sqlite3) and the connection arm ``name``
    writes with, set up as the store sets its own (WAL, synchronous, foreign keys)."""
    s = open_store(os.path.join(d, f"{name}.db"), normal)
    conn = s._db()
    conn.execute("PRAGMA busy_timeout = 0")  # (as an inline commit leaves it)
    if name.startswith("sqlite3"):
        if name.endswith("nosecure"):
            conn.execute("PRAGMA secure_delete = OFF")
        return s, conn, s._close_sync
    s._close_sync()
    if name == "pysqlite3":  # (sqlite3's module, built on a SQLite of its own: the library's share)
        import pysqlite3.dbapi2 as pysq  # type: ignore[import-not-found]

        for tp, adapt in ((type(None), {}.get), (bytes, bytes), (bool, int)):
            pysq.register_adapter(tp, adapt)  # (as _identity_adapters does for sqlite3)
        conn = pysq.connect(s.path, timeout=0, isolation_level=None, check_same_thread=False)
        for pragma in _pragmas(normal):
            conn.execute(f"PRAGMA {pragma}").fetchall()
        return s, conn, conn.close
    import apsw

    a = apsw.Connection(s.path)
    for pragma in _pragmas(normal):
        a.execute(f"PRAGMA {pragma}").fetchall()
    a.setbusytimeout(0)
    if name.endswith("secure"):
        a.execute("PRAGMA secure_delete = ON")
    return s, _ApswConn(a), a.close


def waves(w: int, commits: int, start: int, t0: int, payload: bytes) -> list[list[Mutation]]:
    """``commits`` commits of ``w`` submits each, with the previous commit's ``w`` tasks'
    starts and ends (with an output); ids from ``start``."""
    spec = TaskRecord(pool="bench", kind="default", priority=2, tolerance=NS, payload=payload)
    out: list[list[Mutation]] = []
    for c in range(commits):
        ids = range(start + c * w, start + (c + 1) * w)
        prev = range(start + (c - 1) * w, start + c * w) if c else range(0)
        muts: list[Mutation] = [Submitted(i, i, t0 + i, spec) for i in ids]
        muts += [StatusChange(i, "running", 1, t0 + i + 10) for i in prev]
        muts += [StatusChange(i, "succeeded", 1, t0 + i + 20, None, None, True) for i in prev]
        out.append(muts)
    return out


Rounds = list[list[tuple[float, float, float, float]]]


def _ratio(mine: Rounds, base: Rounds, f: Callable[[tuple[float, ...]], float]) -> float:
    """The median over rounds of the ratio of the rounds' medians of ``f``."""
    return statistics.median(
        statistics.median(map(f, m)) / statistics.median(map(f, b)) for m, b in zip(mine, base, strict=True)
    )


def _spin(stop: threading.Event) -> None:
    n = 0
    while not stop.is_set():
        n += 1


def ab_apsw(args: argparse.Namespace) -> None:
    """The ``--apsw`` comparison (see the module's docstring)."""
    import apsw

    if args.no_lookaside:  # (as the Debian library is built: SQLITE_OMIT_LOOKASIDE)
        apsw.shutdown()
        apsw.config(apsw.SQLITE_CONFIG_LOOKASIDE, 0, 0)
        apsw.initialize()
    sizes = [int(x) for x in args.sizes.split(",")]
    arms = args.arms.split(",")
    print(
        f"sqlite3 {sq.sqlite3.sqlite_version}, apsw {apsw.apsw_version()} "
        f"(SQLite {apsw.sqlite_lib_version()}); rounds={args.rounds} commits={args.commits} "
        f"load={os.getloadavg()[0]:.2f}",
        flush=True,
    )
    codec = BlobCodec()
    t0 = time.time_ns()
    stop = threading.Event()
    if args.busy_thread:  # (wants the GIL whenever a step releases it, as gRPC's threads may)
        threading.Thread(target=_spin, args=(stop,), daemon=True).start()
    # per size and arm: lists of per-commit (fold, statements, commit, wall) seconds, by round
    got: dict[tuple[int, str], Rounds] = {}
    with tempfile.TemporaryDirectory(dir=args.dir) as d:
        opened = {(w, a): _arm(d, f"{a}-{w}", args.normal) for w in sizes for a in arms}
        next_id = dict.fromkeys(opened, 1 << 20)
        loads = []
        for rnd in range(args.rounds):
            loads.append(os.getloadavg()[0])
            order = arms if rnd % 2 == 0 else arms[::-1]
            for w in sizes:
                for a in order:
                    s, conn, _ = opened[w, a]
                    work = waves(w, args.commits + 1, next_id[w, a], t0, b'{"x":1}')
                    next_id[w, a] += w * (args.commits + 1)
                    timed = _Timed(conn)
                    out = []
                    gc.collect()
                    gc.disable()  # (a collection lands on whichever phase allocates: noise)
                    for i, muts in enumerate(work):
                        w0, c0 = time.perf_counter(), time.thread_time()
                        batch = fold(muts, codec)
                        c1 = time.thread_time()
                        timed.commit_cpu = 0.0
                        timed.execute("BEGIN IMMEDIATE")
                        s._write_batch(timed, batch, s._epoch)  # type: ignore[arg-type]
                        c2, w2 = time.thread_time(), time.perf_counter()
                        if i:  # (the first: no previous commit's tasks)
                            out.append((c1 - c0, c2 - c1 - timed.commit_cpu, timed.commit_cpu, w2 - w0))
                    gc.enable()
                    got.setdefault((w, a), []).append(out)
        for _, _, close in opened.values():
            close()
    stop.set()
    print(f"load during the rounds: {min(loads):.2f} to {max(loads):.2f}")
    us = 1e6
    for w in sizes:
        print(f"\nW={w}: {3 * w} mutations a commit ({w} inserts, {w} updates); medians, us a commit")
        heads = "".join(f"{h:>8}" for h in ("fold", "stmts", "COMMIT", "CPU", "wall"))
        print(f"{'arm':<18}{heads}  ratio CPU, stmts+COMMIT, wall")
        base = got[w, arms[0]]
        for a in arms:
            rows = [r for rd in got[w, a] for r in rd]
            med = [statistics.median(r[k] for r in rows) for k in range(4)]
            cpu = statistics.median(r[0] + r[1] + r[2] for r in rows)
            rc = _ratio(got[w, a], base, lambda r: r[0] + r[1] + r[2])
            rs = _ratio(got[w, a], base, lambda r: r[1] + r[2])
            rw = _ratio(got[w, a], base, lambda r: r[3])
            figures = "".join(f"{x * us:8.1f}" for x in (*med[:3], cpu, med[3]))
            print(f"{a:<18}{figures}  {rc:.3f} {rs:.3f} {rw:.3f}", flush=True)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--n", type=int, default=1000, help="tasks per commit (default 1000)")
    p.add_argument("--rounds", type=int, default=20, help="rounds of three commits (default 20)")
    p.add_argument("--repeat", type=int, default=3, help="runs; the median is shown (default 3)")
    p.add_argument("--payload", action="store_true", help="a small payload per task (default none)")
    p.add_argument("--normal", action="store_true", help="synchronous=NORMAL (default FULL)")
    p.add_argument("--split", action="store_true", help="also without the indexes, and one row a statement")
    p.add_argument("--pragma", action="append", default=[], help="a PRAGMA after the open (repeatable)")
    p.add_argument("--dir", default=None, help="directory for the database file (default: the temp dir)")
    p.add_argument("--apsw", action="store_true", help="sqlite3 against apsw, commits of --sizes (see above)")
    p.add_argument("--sizes", default="2,6,64,167", help="--apsw: tasks W a commit (3W mutations)")
    p.add_argument("--commits", type=int, default=50, help="--apsw: commits per arm, size and round")
    p.add_argument(
        "--arms", default=",".join(ARMS), help=f"--apsw: arms, the first the base ({','.join(ARMS)})"
    )
    p.add_argument("--busy-thread", action="store_true", help="--apsw: a thread spinning in Python meanwhile")
    p.add_argument("--no-lookaside", action="store_true", help="--apsw: apsw's SQLite, no lookaside")
    args = p.parse_args(argv)
    if args.apsw:
        ab_apsw(args)
        return
    print(f"n={args.n} rounds={args.rounds} repeat={args.repeat} load={os.getloadavg()[0]:.2f}")
    show("store", median_run(args))
    if args.split:
        show("no indexes", median_run(args, indexes=False))
        show("execute loop", median_run(args, loop=True))


if __name__ == "__main__":
    main()
