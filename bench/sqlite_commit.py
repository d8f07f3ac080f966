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
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
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
    args = p.parse_args(argv)
    print(f"n={args.n} rounds={args.rounds} repeat={args.repeat} load={os.getloadavg()[0]:.2f}")
    show("store", median_run(args))
    if args.split:
        show("no indexes", median_run(args, indexes=False))
        show("execute loop", median_run(args, loop=True))


if __name__ == "__main__":
    main()
