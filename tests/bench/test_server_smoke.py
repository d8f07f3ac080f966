"""Keeps bench/server.py from rotting: every group runs with tiny sizes against a real
``cronoq serve`` subprocess, real worker and load-generator processes.

No timing assertions (docs/benchmarks.md#targets: targets are measured by ``bench/``, never by timed tests);
only that each figure comes out as a positive number and the JSON report is written.  The
Celery + Redis baseline is left out here (``celery=None``: baselines 0, ratios NaN) except for
a check that its setup either works or says why not.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import math
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"
if str(BENCH) not in sys.path:
    sys.path.append(str(BENCH))  # appended: bench/server.py must not shadow the tests' `server` package

# bench/server.py under a name of its own (a plain `import server` would clash with tests/server)
_spec = importlib.util.spec_from_file_location("cronoq_bench_server", BENCH / "server.py")
assert _spec is not None and _spec.loader is not None
server = importlib.util.module_from_spec(_spec)
sys.modules["cronoq_bench_server"] = server
_spec.loader.exec_module(server)

TINY = {
    "batch_n": 300,
    "submit_n": 80,
    "chunk": 100,
    "clients": 2,
    "slots": 8,
    "latency_n": 20,
    "sse_subs": 2,
    "repeat": 1,
    "sse_repeat": 1,
}
OPTS = argparse.Namespace(profile=None)


def _check(results: list[server.Result], n: int, baseline: bool) -> None:
    assert len(results) == n
    for r in results:
        assert math.isfinite(r.value) and r.value > 0, r
        if baseline:
            assert math.isfinite(r.baseline) and r.baseline > 0, r
        json.dumps(r.to_json())


def test_latency() -> None:
    got = asyncio.run(server.bench_latency(TINY, OPTS, None))
    _check(got, 3, baseline=False)
    assert got[0].extra["measured"] == TINY["latency_n"]
    lone = got[2]  # the lone-submit figure: its baseline and target come from the same run
    assert lone.baseline > 0 and lone.target == lone.baseline + server.T_LONE_GROWTH_MS


def test_throughput() -> None:
    got = asyncio.run(server.bench_throughput(TINY, OPTS, None))
    _check(got, 16, baseline=False)
    # every figure is set against the same run's gRPC floor
    assert all(r.extra["floor_ratio"] > 0 and r.extra["floor"]["calls_per_s"] > 0 for r in got)


def test_throughput_on_postgres_beside_memory() -> None:
    """``--stores postgres,memory --workers 1``: the test database, a schema of its own (dropped
    at the end), and each durable figure set against the memory store's of the same run."""
    opts = argparse.Namespace(profile=None, stores=["postgres", "memory"], workers=[1])
    got = asyncio.run(server.bench_throughput(TINY, opts, None))
    _check(got, 8, baseline=False)
    pg = [r for r in got if r.extra["store"] == "postgres"]
    assert len(pg) == 4 and all(r.extra["vs_memory"]["tasks_per_s"] > 0 for r in pg)
    assert all("vs_memory" not in r.extra for r in got if r.extra["store"] == "memory")
    assert not asyncio.run(_bench_schemas())  # every server's schema was dropped


def test_postgres_diagnostic_store_reports_its_commits() -> None:
    """``--stores postgres-nosync``: the PostgreSQL store under ``bench/_variant_serve.py``, whose
    commit counters (latency, sizes, a submission's wait, the database backend's CPU) come out
    with each figure."""
    opts = argparse.Namespace(profile=None, stores=["postgres-nosync"], workers=[1])
    got = asyncio.run(server.bench_throughput(TINY, opts, None))
    _check(got, 4, baseline=False)
    for r in got:
        assert r.extra["commits_per_task"] > 0 and r.extra["commit_ms"] > 0, r.extra
    assert not asyncio.run(_bench_schemas())


async def _bench_schemas() -> list[str]:
    import asyncpg

    conn = await asyncpg.connect(server.PG_URL)
    try:
        rows = await conn.fetch("SELECT nspname FROM pg_namespace WHERE nspname LIKE 'cronoq_bench_%'")
        return [r[0] for r in rows]
    finally:
        await conn.close()


def test_stores_and_workers_options_are_checked() -> None:
    names = server._names(server.STORES)
    assert names("postgres, memory") == ["postgres", "memory"]
    for bad in ("mysql", ""):
        with pytest.raises(argparse.ArgumentTypeError, match="choose from sqlite, memory, postgres"):
            names(bad)
    assert server._counts("1,4") == [1, 4]
    for bad in ("0", "x"):
        with pytest.raises(argparse.ArgumentTypeError, match="positive integers"):
            server._counts(bad)


def test_sse() -> None:
    got = asyncio.run(server.bench_sse(TINY, OPTS, None))
    _check(got, 2, baseline=True)
    assert all(r.extra["events_per_task_per_subscriber"] > 0 for r in got)


def test_celery_setup_works_or_says_why() -> None:
    # only probes Redis and picks databases: nothing is started, so cleanup deletes no keys
    cel = server.Celery()
    try:
        assert cel.available or cel.reason
    finally:
        cel.cleanup()


def test_cli_quick_writes_json(tmp_path: Path) -> None:
    out = tmp_path / "s.json"
    assert server.main(["--quick", "--only", "latency", "--no-celery", "--json", str(out)]) == 0
    doc = json.loads(out.read_text())
    assert doc["machine"]["cpu_count"] >= 1
    assert doc["results"] and all(r["value"] > 0 for r in doc["results"])


BURNER = """
import sys, time
while time.process_time() < 0.4:
    pass
print("burnt", flush=True)
sys.stdin.read()
"""


def test_tree_cpu_counts_live_and_reaped_child_processes() -> None:
    # a server's figure counts the CPU of its child processes too (e.g. a SQLite writer
    # process): a live child's own seconds, then, once reaped, its parent's cutime + cstime
    import os
    import subprocess

    me = os.getpid()
    base = server.tree_cpu_seconds(me) - server.cpu_seconds(me)
    child = subprocess.Popen(
        [sys.executable, "-c", BURNER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert child.stdout is not None and child.stdout.readline() == "burnt\n"
        assert server.cpu_seconds(child.pid) >= 0.3  # (/proc counts clock ticks: a margin)
        live = server.tree_cpu_seconds(me) - server.cpu_seconds(me)
        assert live - base >= 0.3
    finally:
        child.communicate("")
    reaped = server.tree_cpu_seconds(me) - server.cpu_seconds(me)
    assert reaped - base >= 0.3
