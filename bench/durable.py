"""cronoq durable-store benchmark: end-to-end no-op tasks/s on SQLite and PostgreSQL beside the
in-memory figure of the same run, and how well group commit works.

Run ``python bench/durable.py`` (``--quick`` for a smoke-sized run, ``--only NAME`` for one
store, ``--json PATH`` for the output file; default ``bench/results/durable.json``).

Workload: ``concurrency`` coroutines each ``await sched.submit(i)`` in a loop (a durable
submit returns only after its ``Submitted`` mutation committed, so every submitter waits for a
commit: group commit must batch them) into one pool of 64 slots running a no-op async
executor.  The clock stops when every task succeeded *and* the committer flushed (the terminal
statuses are durable too).  Figures, the median of ``repeat`` runs:

``memory``   no store (the baseline of every figure): ``submit`` takes the in-memory fast path;
``sqlite``   ``SqliteStore(full_sync=True)`` (``synchronous=FULL``: one WAL fsync per commit);
``sqlite_nosync``  ``SqliteStore(full_sync=False)`` (``synchronous=NORMAL``: no fsync per commit);
``postgres`` ``PostgresStore`` on ``CRONOQ_TEST_PG_DSN`` (default local ``test`` database).

Beside tasks/s: commits per task (``Committer.commits`` / tasks; 1.0 = no group commit) and
mutations per task, and fsyncs per task — for SQLite counted with ``strace -c`` on
fsync/fdatasync in a separate child run (timing not used), for PostgreSQL from the
cluster-wide ``pg_stat_wal.wal_sync`` delta (includes anything else the server did meanwhile).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

_HERE = Path(__file__).resolve().parent
if str(_HERE) not in sys.path:
    sys.path.append(str(_HERE))  # (as a script it is sys.path[0] already)
try:  # the installed (editable) cronoq, or whatever PYTHONPATH points at; else this checkout
    import cronoq as _cronoq  # noqa: F401
except ImportError:  # pragma: no cover - not installed
    sys.path.insert(0, str(_HERE.parent / "src"))

from _common import Result, describe, machine_info, median, run_async, source_info, table, write_json  # noqa: E402

from cronoq import Pool, Scheduler  # noqa: E402
from cronoq.store import PostgresStore, SqliteStore  # noqa: E402

DEFAULT_JSON = _HERE / "results" / "durable.json"
DSN = os.environ.get("CRONOQ_TEST_PG_DSN", "postgresql://postgres@127.0.0.1:5432/test")
STORES = ("sqlite", "sqlite_nosync", "postgres")

# Targets (issues; docs/benchmarks.md#targets: measured here, never by timed unit tests)
T_SQLITE = 5_000.0  # tasks/s, SQLite with full_sync
T_POSTGRES = 3_000.0  # tasks/s
T_COMMITS = 0.1  # commits per task under load

SIZES: dict[str, dict[str, int]] = {
    "full": {"n": 20_000, "concurrency": 256, "slots": 64, "repeat": 3, "fsync_n": 5_000},
    "quick": {"n": 2_000, "concurrency": 64, "slots": 64, "repeat": 1, "fsync_n": 1_000},
}


class _Counter:
    """A no-op async executor that sets ``done`` after ``n`` runs."""

    def __init__(self, n: int) -> None:
        self.left = n
        self.done = asyncio.Event()

    async def __call__(self, ctx: Any, payload: Any) -> Any:
        self.left -= 1
        if not self.left:
            self.done.set()
        return None


def make_store(kind: str, workdir: str) -> tuple[Any, Any]:
    """(store or None, cleanup coroutine factory or None)."""
    if kind == "memory":
        return None, None
    if kind in ("sqlite", "sqlite_nosync"):
        path = os.path.join(workdir, f"bench-{uuid.uuid4().hex[:8]}.db")
        return SqliteStore(path, full_sync=kind == "sqlite"), None
    if kind == "postgres":
        schema = f"cronoq_bench_{uuid.uuid4().hex[:12]}"

        async def drop() -> None:
            import asyncpg  # type: ignore[import-untyped]

            conn = await asyncpg.connect(DSN, timeout=10)
            try:
                await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
            finally:
                await conn.close()

        return PostgresStore(DSN, schema=schema), drop
    raise ValueError(f"unknown store {kind!r}")


async def run_once(kind: str, n: int, concurrency: int, slots: int, workdir: str) -> dict[str, Any]:
    """One run: ``concurrency`` submitters, ``n`` no-op tasks in all; seconds and counters."""
    store, cleanup = make_store(kind, workdir)
    ex = _Counter(n)
    sched = Scheduler([Pool("bench", ex, min=slots, max=slots, autoscale=False)], store=store)
    try:
        await sched.start()
        committer = sched._run.committer if sched._run is not None else None
        submit = sched.submit
        share, extra = divmod(n, concurrency)

        async def submitter(k: int) -> None:
            for i in range(k):
                await submit(i)

        t0 = time.perf_counter()
        await asyncio.gather(*(submitter(share + (1 if j < extra else 0)) for j in range(concurrency)))
        t_acked = time.perf_counter() - t0
        await ex.done.wait()
        for _ in range(1000):  # the last completions reach the engine, their statuses the store
            if (await sched.snapshot()).totals["succeeded"] >= n:
                break
            await asyncio.sleep(0)
        else:
            raise AssertionError("not every task completed")
        if committer is not None:
            await committer.flush()
        seconds = time.perf_counter() - t0
        got: dict[str, Any] = {"seconds": seconds, "acked_seconds": t_acked}
        if committer is not None:
            got.update(commits=committer.commits, mutations=committer.committed, retries=committer.retries)
        return got
    finally:
        await sched.shutdown()
        if cleanup is not None:
            with contextlib.suppress(Exception):
                await cleanup()


def measure(kind: str, sz: dict[str, int], workdir: str) -> dict[str, Any]:
    """Median tasks/s over ``repeat`` runs, with the counters of the median run."""
    n = sz["n"]
    c, slots = sz["concurrency"], sz["slots"]
    runs = [run_async(lambda: run_once(kind, n, c, slots, workdir)) for _ in range(sz["repeat"])]
    rates = [n / r["seconds"] for r in runs]
    mid = sorted(range(len(runs)), key=lambda i: rates[i])[len(runs) // 2]
    best = runs[mid]
    out: dict[str, Any] = {
        "tasks_per_s": median(rates),
        "samples": rates,
        "acked_per_s": n / best["acked_seconds"],
    }
    if "commits" in best:
        out.update(
            commits_per_task=best["commits"] / n,
            mutations_per_task=best["mutations"] / n,
            mutations_per_commit=best["mutations"] / max(1, best["commits"]),
            retries=best["retries"],
        )
    return out


# --------------------------------------------------------------------------- fsync counting


def sqlite_fsyncs(kind: str, sz: dict[str, int]) -> dict[str, Any] | None:
    """fsync+fdatasync calls per task of one SQLite run, by ``strace -c`` on a child process."""
    strace = shutil.which("strace")
    if strace is None:
        return None
    n = sz["fsync_n"]
    with tempfile.TemporaryDirectory() as tmp:
        summary = os.path.join(tmp, "strace.txt")
        cmd = [
            strace, "-f", "-c", "-o", summary, "-e", "trace=fsync,fdatasync",
            sys.executable, str(Path(__file__).resolve()),
            "--child", kind, str(n), str(sz["concurrency"]), str(sz["slots"]), tmp,
        ]  # fmt: skip
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        if proc.returncode != 0:
            return {"error": (proc.stderr or proc.stdout)[-500:]}
        calls = 0
        with open(summary) as f:
            for line in f:
                parts = line.split()
                # "% time  seconds  usecs/call  calls  [errors]  syscall"
                if len(parts) >= 5 and parts[-1] in ("fsync", "fdatasync"):
                    calls += int(parts[3])
        child = json.loads(proc.stdout.strip().splitlines()[-1])
    return {"fsyncs": calls, "fsyncs_per_task": calls / n, "commits": child.get("commits")}


async def _wal_syncs() -> int | None:
    import asyncpg

    conn = await asyncpg.connect(DSN, timeout=10)
    try:
        return int(await conn.fetchval("SELECT wal_sync FROM pg_stat_wal"))
    except Exception:
        return None
    finally:
        await conn.close()


def postgres_fsyncs(sz: dict[str, int], workdir: str) -> dict[str, Any] | None:
    """WAL syncs per task of one PostgreSQL run (cluster-wide pg_stat_wal.wal_sync delta)."""
    n = sz["fsync_n"]
    before = run_async(_wal_syncs)
    if before is None:
        return None
    got = run_async(lambda: run_once("postgres", n, sz["concurrency"], sz["slots"], workdir))
    time.sleep(1.2)  # backends flush their WAL statistics at most once a second
    after = run_async(_wal_syncs)
    if after is None:
        return None
    return {"fsyncs": after - before, "fsyncs_per_task": (after - before) / n, "commits": got.get("commits")}


# --------------------------------------------------------------------------- figures


def pg_reachable() -> str:
    try:
        import asyncpg  # noqa: F401
    except ImportError:
        return "asyncpg is not installed"

    async def ping() -> None:
        import asyncpg

        conn = await asyncpg.connect(DSN, timeout=3)
        await conn.close()

    try:
        run_async(ping)
    except Exception as e:
        return f"{type(e).__name__}: {e}"
    return ""


def bench_durable(sz: dict[str, int], stores: tuple[str, ...] = STORES, fsyncs: bool = True) -> list[Result]:
    results: list[Result] = []
    with tempfile.TemporaryDirectory(prefix="cronoq-bench-") as workdir:
        mem = measure("memory", sz, workdir)
        print(f"  memory: {mem['tasks_per_s']:,.0f} tasks/s", flush=True)
        for kind in stores:
            if kind == "postgres":
                why = pg_reachable()
                if why:
                    print(f"  postgres: skipped ({why})", flush=True)
                    continue
            got = measure(kind, sz, workdir)
            if fsyncs:
                fs = postgres_fsyncs(sz, workdir) if kind == "postgres" else sqlite_fsyncs(kind, sz)
                if fs is not None:
                    got["fsync"] = fs
            target = {"sqlite": T_SQLITE, "postgres": T_POSTGRES}.get(kind)
            extra = {k: v for k, v in got.items() if k not in ("tasks_per_s", "samples")}
            extra["concurrency"] = sz["concurrency"]
            results.append(
                Result(
                    bench="durable",
                    name=f"{kind} tasks/s",
                    value=got["tasks_per_s"],
                    unit="tasks/s",
                    baseline=mem["tasks_per_s"],
                    baseline_name="in-memory, same run",
                    higher_is_better=True,
                    target=target,
                    samples=got["samples"],
                    baseline_samples=mem["samples"],
                    extra=extra,
                )
            )
            results.append(
                Result(
                    bench="durable",
                    name=f"{kind} commits/task",
                    value=got["commits_per_task"],
                    unit="commits/task",
                    baseline=1.0,
                    baseline_name="one commit per task",
                    higher_is_better=False,
                    target=T_COMMITS,
                    extra={"mutations_per_task": got["mutations_per_task"]},
                )
            )
            fs = got.get("fsync") or {}
            tail = f", fsyncs/task {fs['fsyncs_per_task']:.3f}" if "fsyncs_per_task" in fs else ""
            print(
                f"  {kind}: {got['tasks_per_s']:,.0f} tasks/s (acked {got['acked_per_s']:,.0f}/s), "
                f"commits/task {got['commits_per_task']:.4f}, mutations/commit "
                f"{got['mutations_per_commit']:.0f}{tail}",
                flush=True,
            )
    return results


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--quick", action="store_true", help="small sizes, one repeat (smoke run)")
    p.add_argument("--only", choices=STORES, action="append", help="run only this store (repeatable)")
    p.add_argument("--json", type=Path, default=DEFAULT_JSON, help=f"output file (default {DEFAULT_JSON})")
    p.add_argument("--repeat", type=int, default=None, help="repeats (median)")
    p.add_argument("-n", type=int, default=None, help="tasks per run")
    p.add_argument("--concurrency", type=int, default=None, help="concurrent submitters")
    p.add_argument("--no-fsyncs", action="store_true", help="skip the fsync-counting runs")
    p.add_argument("--child", nargs=5, metavar=("KIND", "N", "C", "SLOTS", "DIR"), help=argparse.SUPPRESS)
    args = p.parse_args(argv)

    if args.child:
        kind, n, c, slots, workdir = args.child
        got = run_async(lambda: run_once(kind, int(n), int(c), int(slots), workdir))
        print(json.dumps(got), flush=True)
        return 0

    sz = dict(SIZES["quick" if args.quick else "full"])
    for key, val in (("repeat", args.repeat), ("n", args.n), ("concurrency", args.concurrency)):
        if val is not None:
            sz[key] = max(1, val)
    machine = machine_info()
    machine["cronoq"] = source_info()
    load = ", ".join(f"{x:.2f}" for x in machine["loadavg"])
    print(f"cronoq durable-store benchmark ({'quick' if args.quick else 'full'})")
    print(f"load average: {load}   cpus: {machine['cpu_count']} (usable {machine['affinity']})")
    src = machine["cronoq"]
    print(f"cronoq from {src['path']} (commit {src['commit']}, uncommitted src changes: {src['dirty']})")
    print(f"sizes: {sz}\n", flush=True)
    t0 = time.perf_counter()
    results = bench_durable(sz, tuple(args.only or STORES), fsyncs=not args.no_fsyncs)
    print()
    for r in results:
        print(describe(r))
    with contextlib.suppress(OSError):
        machine["loadavg_end"] = list(os.getloadavg())
    print("\nsummary (ratio = value / baseline)")
    print(table(results))
    print(f"\nload average at end: {', '.join(f'{x:.2f}' for x in machine.get('loadavg_end', []))}")
    print(f"total {time.perf_counter() - t0:.1f} s")
    write_json(args.json, machine, {"sizes": sz, "quick": args.quick, "only": args.only}, results)
    print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
