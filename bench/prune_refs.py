"""What one store prune costs with many live tasks with dependencies (issue: prune parsing).

A prune first reads what live state refers to in the history (``_records.prune_refs``): the
definitions of every live task with edges, parsed for the ids and keys they name.  This
script fills a SQLite store with ``--n`` live tasks, each with two edges (a parent by id, a
parent by key), then times ``--prunes`` prunes through the store's public ``prune()``, each
with one expired row to delete (a prune with nothing expired returns before reading
anything).  Printed: the first prune (a fresh store object: nothing cached) and the median of
the following ones, wall time and process CPU time (the store's thread included).

    python bench/prune_refs.py --n 100000 --prunes 5

To compare two trees, run it under each tree's ``PYTHONPATH`` alternately (ABBA) and give the
load (``uptime``) with the figures; docs/benchmarks.md has the figures.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time

try:  # the installed (editable) cronoq, or whatever PYTHONPATH points at; else this checkout
    import cronoq as _cronoq  # noqa: F401
except ImportError:  # pragma: no cover - not installed
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src"))

from cronoq.engine.mutations import Mutation, StatusChange, Submitted, TaskRecord
from cronoq.store import JsonCodec, SqliteStore

NS = 1_000_000_000


async def run(n: int, prunes: int, directory: str | None) -> tuple[list[float], list[float]]:
    """Wall and CPU seconds of each prune (the first one on a fresh store object)."""
    codec = JsonCodec()
    with tempfile.TemporaryDirectory(dir=directory) as d:
        path = os.path.join(d, "prune.db")
        s = SqliteStore(path, retention=60.0, full_sync=False)
        await s.open()
        epoch = await s.acquire()
        now = time.time_ns()
        old = now - 3600 * NS
        muts: list[Mutation] = []
        for i in range(1, n + 1):  # live, each naming a parent by id and one by key
            spec = TaskRecord(
                pool="default", key=f"task-{i}", deps=[(10 * n + i, 0), (f"parent-{i % 97}", 1)]
            )
            muts.append(Submitted(i, i, now, spec))
        await s.commit(muts, epoch, codec)
        await s.close()
        s = SqliteStore(path, retention=60.0, full_sync=False)  # (a fresh store: nothing cached)
        await s.open()
        epoch = await s.acquire()
        walls: list[float] = []
        cpus: list[float] = []
        for k in range(prunes):
            tid = 20 * n + k
            await s.commit(
                [
                    Submitted(tid, tid, old, TaskRecord(pool="default")),
                    StatusChange(tid, "succeeded", 1, old),
                ],
                epoch,
                codec,
            )
            w0, c0 = time.perf_counter(), time.process_time()
            deleted = await s.prune(time.time_ns())
            walls.append(time.perf_counter() - w0)
            cpus.append(time.process_time() - c0)
            assert deleted == 1, deleted
        await s.close()
    return walls, cpus


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--n", type=int, default=100_000, help="live tasks with edges")
    p.add_argument("--prunes", type=int, default=5, help="prunes timed (the first on a fresh store)")
    p.add_argument("--dir", default=None, help="directory of the temporary database")
    args = p.parse_args(argv)
    walls, cpus = asyncio.run(run(args.n, args.prunes, args.dir))
    rest_w, rest_c = walls[1:] or walls, cpus[1:] or cpus
    print(
        f"n={args.n} first prune: {walls[0] * 1e3:.1f} ms wall, {cpus[0] * 1e3:.1f} ms cpu; "
        f"next {len(rest_w)}: median {statistics.median(rest_w) * 1e3:.1f} ms wall, "
        f"{statistics.median(rest_c) * 1e3:.1f} ms cpu; load {os.getloadavg()[0]:.2f}"
    )


if __name__ == "__main__":
    main()
