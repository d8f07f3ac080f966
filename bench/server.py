"""cronoq server benchmark: tasks/s and dispatch latency through ``cronoq serve``, beside
Celery with a Redis broker measured in the same run.

Run ``python bench/server.py`` (``--quick`` for a smoke-sized run, ``--only NAME`` for one
group, ``--json PATH`` for the output file, default ``bench/results/server.json``;
``--profile DIR`` runs every server under cProfile and prints its hottest functions;
``--py-spy DIR`` samples every server with ``py-spy record`` (raw stacks) and prints self and
inclusive shares per function, ``CRONOQ_BENCH_PYSPY_ARGS=--native`` adds py-spy options;
``--no-celery`` skips the baseline; ``--worker-protocol N`` has every cronoq worker process
register asking for worker protocol ``N``, e.g. 3 for one gRPC message per lease and per report
as the published v3 worker sends them, instead of the newest its ``Worker`` speaks; the version
the server granted is in each figure's ``extra.worker_protocol``; ``--messages`` counts the
gRPC messages on the workers' Work streams, both ways, over each run: ``extra.messages_per_task``,
at a small CPU cost to the worker processes).

Everything runs in separate processes on this machine: the server (``python -m cronoq.cli
serve``, loopback, free ports, a SQLite store in a temp dir — or the memory store), remote
workers (``bench/_server_worker.py worker``: :class:`cronoq.client.Worker`, a no-op handler,
``SLOTS`` slots each) and the load generators (``bench/_server_worker.py load``).  Completion is
the server's ``succeeded`` total (``Admin.Snapshot``, polled by this driver), so a figure is
submit of the first task → the server has recorded the last success.  The polls are spaced by a
third of the estimated time still to go (from the rate seen so far), between 5 ms and 50 ms, so
the last one still lands within 5 ms of the end while the poller costs the measured server a few
dozen unary calls per second instead of 200 (a poll every 5 ms was about 0.4 Snapshot calls per
task at 500 tasks/s, each about as dear to the server as a Submit; the floor's clients make no
such calls).  Celery's completion count is polled the same way.

Groups (``--only``):

``throughput``
    For each store of ``--stores`` (default sqlite, memory; ``postgres`` is the test database,
    ``CRONOQ_BENCH_PG_URL``, in a schema of its own dropped at the end) and each worker process
    count of ``--workers`` (default 1 and 4): tasks/s with
    ``submit_batch`` (one client process, batches of 1000) and with per-task ``submit`` from 8
    concurrent clients — as 8 processes (one ``Client`` each) and as 8 coroutines in this
    driver (one ``Client`` each, separate channels), and from 64 coroutines sharing one
    ``Client`` (the client coalesces each loop turn's submits into one ``SubmitMany``).  The
    server's CPU seconds per 1000 tasks (``/proc/PID/stat``, with its child processes':
    ``tree_cpu_seconds``) are in each figure's ``extra``;
    each durable store's figure ÷ the memory store's same figure of the run (tasks/s, server
    CPU per task) is printed and kept in ``extra.vs_memory``.  The server's context switches
    per task (voluntary, involuntary; summed over its threads) are in ``extra`` too.
    ``--stores`` also takes diagnostic stand-ins for the SQLite store's commit, to split its
    cost (``bench/_variant_serve.py``): ``sqlite-delay`` (an asyncio-only delay as long as a
    commit), ``sqlite-thread`` (a sleep as long on the store's thread), ``sqlite-fold`` (that
    and building the rows), ``sqlite-real`` (the store as it is), ``sqlite-exec`` (it with
    every commit on its thread), ``sqlite-nogather`` (it without the group commit's
    gather wait) and ``sqlite-nosync`` (it with ``full_sync=False``: WAL ``synchronous=NORMAL``,
    no flush at a commit; the flush's share of a figure, not a setting to deploy for it);
    ``postgres-real`` (the PostgreSQL store as it is), ``postgres-nosync`` (it
    with ``synchronous_commit = off``), ``postgres-nogather``, ``postgres-nocopy`` and
    ``postgres-arrays`` (it without the gather wait, the COPY of many new rows, the composite
    row types: one array per column) split the PostgreSQL store's; their figures also have the commits per
    task, their mean latency and their mutations (and the database backend's CPU per task).
``latency``
    Dispatch latency, submit → the worker's handler start (``time.monotonic_ns`` in both
    processes), p50/p99 over 2,000 tasks submitted one at a time, 2 ms apart, on an idle
    server with one worker process (SQLite store); and the round trip of lone ``submit()``
    calls through a coalescing ``Client`` against one with ``coalesce_submits=False``,
    alternated call by call (target: at most 1 ms over the same run's p50 without coalescing).
``sse``
    ``submit_batch`` and 8-process per-task tasks/s with 20 concurrent Server-Sent-Events
    subscribers on ``/v1/events?all_transitions=true`` (in one separate process, counting
    ``event: status`` frames) against the same run without subscribers, interleaved in ABBA order
    (4 pairs by default; ``extra.paired_cost`` is the median cost over the pairs).  The
    subscribers share the machine's cores with the server, so they are kept lean: each is a
    plain asyncio protocol on its own connection that sends the GET and counts the frame marker
    in the raw bytes it receives (no HTTP client or SSE parser; every frame is still received
    and counted, and ``extra`` has the count per task and subscriber: 4 with all transitions of
    a task that succeeds at once — blocked, ready, running, succeeded).  They used to be httpx
    streams (``aiter_raw``), which cost that process about twice the CPU per task (per-task
    submits: 0.088 against 0.038 CPU s per 1000 tasks).  Target: the fan-out costs at most 10 %
    of throughput.  A figure whose subscribers got ``event: error`` (``data_loss``: a subscriber
    fell more than the server's per-subscriber event buffer behind) is labelled ``[subscribers
    cut off: data_loss]``: its subscribers were gone for part of the run, so its cost is
    understated; ``extra`` has the events received per task and subscriber, the server CPU per
    1000 tasks with and without, and the subscriber process's CPU per 1000 tasks.

Every throughput figure is also set against the **gRPC floor** (``bench/grpc_floor.py``: a bare
``grpc.aio`` unary echo server driven by the same number of client processes), measured again
before each repeat, so each repeat is set against the machine as it was then:
``extra.floor_ratios`` = each repeat's tasks/s over its floor's calls/s, ``extra.floor_ratio``
their median, ``extra.cpu_vs_floor`` the median of server CPU per task over the floor's CPU per
call.  ``extra`` also splits the CPU of a task between the server, the load processes
(``client_cpu_s_per_1k``, each one's own ``process_time``) and the workers
(``worker_cpu_s_per_1k``); ``extra.floor.client_cpu_s_per_1k`` is the floor's clients' share.
All of them share the machine's cores, so a client's CPU is throughput the server cannot use.

Baselines: Celery (``--pool threads``, the same number of threads as cronoq slots per worker,
one ``celery worker`` process per cronoq worker process) with a Redis broker and a Redis
result backend (a result per task, as cronoq records one) on the local Redis
(``127.0.0.1:6379``, two databases that are empty at start; only this run's keys are deleted at
the end).  Batch → ``group(...).apply_async()`` of 1000 signatures; per-task → ``apply_async``
from 8 processes; latency → ``apply_async`` → task start.  Celery is not a project dependency:
``pip install celery redis`` into the venv to get the baseline; without it (or without Redis)
the baseline is reported as not measured and ratios are NaN.  Completion for Celery is the
number of result keys in its result database.

Note: the machine has few cores (the CI/developer machines have 2): the server, workers, load
generators and (for ``sse``) the subscribers all share them, so every figure is a
whole-system figure; the load average is printed before and after.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

_HERE = Path(__file__).resolve().parent
if str(_HERE) not in sys.path:
    sys.path.append(str(_HERE))  # (as a script it is sys.path[0] already)
try:  # the installed (editable) cronoq, or whatever PYTHONPATH points at; else this checkout
    import cronoq as _cronoq  # noqa: F401
except ImportError:  # pragma: no cover - not installed
    sys.path.insert(0, str(_HERE.parent / "src"))

from _common import (  # noqa: E402
    Result,
    describe,
    machine_info,
    median,
    percentile,
    source_info,
    table,
    write_json,
)
from grpc_floor import Floor  # noqa: E402
from grpc_floor import measure as measure_floor  # noqa: E402

from cronoq.client import Client  # noqa: E402

DEFAULT_JSON = _HERE / "results" / "server.json"
CHILD = _HERE / "_server_worker.py"
GROUPS = ("throughput", "latency", "sse")
POOL = "bench"

# Targets (the server issue and the dashboard issue)
T_BATCH = 5000.0  # tasks/s with submit_batch
T_SUBMIT = 2000.0  # tasks/s with per-task submits from 8 concurrent clients
T_LAT_P99 = 10.0  # ms, submit → handler start
T_SSE_COST = 0.10  # at most 10 % fewer tasks/s with 20 SSE subscribers
T_LONE_GROWTH_MS = 1.0  # coalescing may delay a lone submit by at most 1 ms (p50): the target is
# the same run's p50 without coalescing plus this

#: completion polls (``_until``): at least this far apart, and at most
POLL_MIN_S, POLL_MAX_S = 0.005, 0.05

#: coroutines sharing one Client in the ``submit_shared`` figure (coalesced submits)
SHARED_COROS = 64

SIZES: dict[str, dict[str, int]] = {
    "full": {
        "batch_n": 10_000,
        "submit_n": 4000,
        "chunk": 1000,
        "clients": 8,
        "slots": 32,
        "latency_n": 2000,
        "sse_subs": 20,
        "repeat": 3,
        "sse_repeat": 4,  # even: half the pairs run with subscribers first (ABBA)
    },
    "quick": {
        "batch_n": 2000,
        "submit_n": 800,
        "chunk": 500,
        "clients": 8,
        "slots": 32,
        "latency_n": 200,
        "sse_subs": 20,
        "repeat": 1,
        "sse_repeat": 1,
    },
}

_TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """utime + stime of a process (Linux /proc)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / _TICK


def _children(pid: int) -> list[int]:
    """The live child processes of ``pid`` (every thread's ``/proc/PID/task/TID/children``)."""
    out: list[int] = []
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                out.extend(int(c) for c in f.read().split())
        except OSError:
            continue
    return out


def tree_cpu_seconds(pid: int) -> float:
    """utime + stime of a process and of all its descendants: the live ones (``children``, down
    the tree) and the ended ones it reaped (cutime + cstime), so work a server hands to a child
    process (the SQLite writer process) is counted as the server's; a child that ends between
    two readings moves from the first term to the second, counted once."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    own = sum(int(v) for v in fields[11:15]) / _TICK
    return own + sum(tree_cpu_seconds(c) for c in _children(pid))


def context_switches(pid: int) -> tuple[int, int]:
    """(voluntary, involuntary) context switches of a process's live threads (Linux /proc)."""
    vol = inv = 0
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return 0, 0
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/status") as f:
                for ln in f:
                    if ln.startswith("voluntary_ctxt_switches:"):
                        vol += int(ln.split()[1])
                    elif ln.startswith("nonvoluntary_ctxt_switches:"):
                        inv += int(ln.split()[1])
        except OSError:
            continue
    return vol, inv


def _child_env(src: str | None = None) -> dict[str, str]:
    env = dict(os.environ)
    env.pop("CRONOQ_CONFIG", None)
    env["PYTHONUNBUFFERED"] = "1"
    src = src or str(_HERE.parent / "src")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(_HERE), src, env.get("PYTHONPATH", "")) if p)
    return env


async def _spawn(*args: str, stdin: bool = False, log: Path | None = None, **kw: Any) -> Any:
    err: Any = asyncio.subprocess.DEVNULL
    if log is not None:
        err = open(log, "ab")  # noqa: SIM115 - handed to the child
    try:
        return await asyncio.create_subprocess_exec(
            *args,
            stdin=asyncio.subprocess.PIPE if stdin else asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=err,
            env=kw.pop("env", None) or _child_env(),
            **kw,
        )
    finally:
        if log is not None:
            err.close()


async def _line(proc: Any, prefix: str, timeout: float = 60.0) -> str:
    deadline = time.monotonic() + timeout
    while True:
        raw = await asyncio.wait_for(proc.stdout.readline(), max(0.1, deadline - time.monotonic()))
        if not raw:
            raise RuntimeError(f"child {proc.pid} ended before printing {prefix!r}")
        line = raw.decode().strip()
        if line.startswith(prefix):
            return line


async def _end(proc: Any, timeout: float = 20.0) -> None:
    if proc.returncode is None:
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signal.SIGTERM)
    try:
        await asyncio.wait_for(proc.wait(), timeout)
    except TimeoutError:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        await proc.wait()


# --------------------------------------------------------------------------- the server


@dataclass
class Server:
    proc: Any
    directory: Path
    store: str
    grpc: str = ""
    http: str = ""
    profile: Path | None = None
    client: Client | None = None
    spy: Any = None

    @property
    def pid(self) -> int:
        return int(self.proc.pid)

    def cpu(self) -> float:
        """The server's CPU seconds with its child processes' (``tree_cpu_seconds``)."""
        return tree_cpu_seconds(self.pid)

    def switches(self) -> tuple[int, int]:
        """(voluntary, involuntary) context switches so far, summed over the server's threads."""
        return context_switches(self.pid)

    async def commit_stats(self) -> tuple[int, int, float, list[float]] | None:
        """A diagnostic variant's (commits, mutations, seconds in commit) so far (None for the
        plain stores) and, since the previous call, [commit latency p50 and p90 in ms, mutations
        per commit p50 and p90, mean wait of a barrier in ms]: ``bench/_variant_serve.py``
        prints them on SIGUSR2."""
        if self.store not in VARIANT_STORES:
            return None
        log = self.directory / "server.log"
        before = log.read_text(errors="replace").count("COMMITSTATS ")
        self.proc.send_signal(signal.SIGUSR2)
        deadline = time.monotonic() + 10
        while True:
            lines = [
                ln for ln in log.read_text(errors="replace").splitlines() if ln.startswith("COMMITSTATS ")
            ]
            if len(lines) > before:
                _, c, m, sec, *dist = lines[-1].split()
                return int(c), int(m), float(sec), [float(x) for x in dist]
            if time.monotonic() > deadline:
                return None
            await asyncio.sleep(0.01)

    async def loop_stats(self) -> tuple[float, ...] | None:
        """With ``CRONOQ_BENCH_LOOPSTATS=1`` (``bench/_loopstats_serve.py``): (loop iterations,
        idle s, idle s while a commit was in flight, commits, mutations, commit s) so far;
        else None."""
        if not LOOPSTATS or self.store in VARIANT_STORES:
            return None
        log = self.directory / "server.log"
        before = log.read_text(errors="replace").count("LOOPSTATS ")
        self.proc.send_signal(signal.SIGUSR2)
        deadline = time.monotonic() + 10
        while True:
            lines = [ln for ln in log.read_text(errors="replace").splitlines() if ln.startswith("LOOPSTATS ")]
            if len(lines) > before:
                return tuple(float(x) for x in lines[-1].split()[1:])
            if time.monotonic() > deadline:
                return None
            await asyncio.sleep(0.01)

    async def succeeded(self) -> int:
        assert self.client is not None
        return (await self.client.snapshot()).totals["succeeded"]


#: the stores ``--stores`` may name; ``postgres`` is the test database (``CRONOQ_BENCH_PG_URL``, default
#: below), each server in a schema of its own that is dropped when that server stops
#: ``sqlite-<variant>``: diagnostic stand-ins for the SQLite store's commit
#: (``bench/_variant_serve.py``: ``real`` is the store as it is, ``exec`` it with every commit on
#: its thread, ``nogather`` it without the group commit's gather wait, ``nosync`` it without
#: the WAL's flush at a commit (``full_sync=False``), ``delay`` an
#: asyncio-only delay of a commit's latency, ``thread`` a ``time.sleep`` of it on the store's
#: thread, ``fold`` that plus building the rows), with the commits per task, their mean latency
#: and size printed beside each figure; ``postgres-real`` is the PostgreSQL store with the same
#: counters, ``postgres-nosync`` it with ``synchronous_commit = off`` (no wait for the WAL flush),
#: ``postgres-nocopy`` it without the binary COPY of many new rows (``PostgresStore.copy_from``),
#: ``postgres-nogather`` it without the group commit's gather wait, ``postgres-arrays`` it with
#: its one statement's rows sent as one array per column (no composite row types),
#: ``postgres-base`` both (the commits as before the COPY and the composite rows)
VARIANT_STORES = (
    "sqlite-real",
    "sqlite-exec",
    "sqlite-nogather",
    "sqlite-nosync",
    "sqlite-delay",
    "sqlite-thread",
    "sqlite-fold",
    "postgres-real",
    "postgres-nosync",
    "postgres-nocopy",
    "postgres-nogather",
    "postgres-arrays",
    "postgres-base",
)
STORES = ("sqlite", "memory", "postgres", *VARIANT_STORES)
#: ``CRONOQ_BENCH_LOOPSTATS=1``: the plain stores' servers run under ``bench/_loopstats_serve.py``
#: (event-loop iterations, idle time, group commits; ``Server.loop_stats``)
LOOPSTATS = os.environ.get("CRONOQ_BENCH_LOOPSTATS", "") not in ("", "0")
DEFAULT_STORES, DEFAULT_WORKERS = ["sqlite", "memory"], [1, 4]
PG_URL = os.environ.get("CRONOQ_BENCH_PG_URL", "postgresql://postgres@127.0.0.1:5432/test")


def _pg_schema(directory: Path) -> str:
    return "cronoq_bench_" + "".join(c if c.isalnum() else "_" for c in directory.name.lower())


def server_toml(directory: Path, store: str) -> str:
    if store == "sqlite" or (store in VARIANT_STORES and store.startswith("sqlite-")):
        store_body = f'kind = "sqlite"\npath = "{directory / "bench.db"}"\n'
    elif store.startswith("postgres"):
        store_body = f'kind = "postgres"\nurl = "{PG_URL}"\nschema = "{_pg_schema(directory)}"\n'
    else:
        store_body = 'kind = "memory"\n'
    return (
        "[server]\n"
        'grpc_addr = "127.0.0.1:0"\n'
        'http_addr = "127.0.0.1:0"\n'
        "shutdown_grace_s = 2\n\n"
        f"[store]\n{store_body}\n"
        "[[pools]]\n"
        f'name = "{POOL}"\n'
        "min = 0\n"
        "max = 1024\n"
        "autoscale = false\n"
    )


async def start_server(store: str, profile_dir: Path | None = None, spy_dir: Path | None = None) -> Server:
    """``store`` may end in ``@SRC``: that server imports cronoq from the directory ``SRC`` (another
    worktree's ``src``: a same-run baseline in ``bench/stores_ab.py``; empty: this checkout's),
    and then in ``@NAME=VALUE+...``: environment variables of that server alone."""
    store, _, src = store.partition("@")
    src, _, extra = src.partition("@")
    directory = Path(tempfile.mkdtemp(prefix=f"cronoq-bench-{store}-"))
    cfg = directory / "bench.toml"
    cfg.write_text(server_toml(directory, store))
    log = directory / "server.log"
    cmd = [sys.executable]
    profile = None
    if profile_dir is not None:
        profile_dir.mkdir(parents=True, exist_ok=True)
        profile = profile_dir / f"server-{store}-{int(time.time())}.prof"
        cmd += ["-m", "cProfile", "-o", str(profile)]
    if store in VARIANT_STORES:
        kind, variant = store.split("-", 1)
        cmd += [str(_HERE / "_variant_serve.py"), f"pg-{variant}" if kind == "postgres" else variant]
    elif LOOPSTATS:
        cmd += [str(_HERE / "_loopstats_serve.py")]
    else:
        cmd += ["-m", "cronoq.cli"]
    cmd += ["serve", "--config", str(cfg)]
    with open(log, "ab") as logf:
        proc = await asyncio.create_subprocess_exec(
            *cmd,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=logf,
            stderr=logf,
            env={**_child_env(src or None), **dict(kv.split("=", 1) for kv in extra.split("+") if kv)},
            cwd=directory,
        )
    sv = Server(proc, directory, store, profile=profile)
    deadline = time.monotonic() + 60
    while True:
        text = log.read_text(errors="replace")
        for ln in text.splitlines():
            if ln.startswith("cronoq serve: grpc="):
                parts = dict(p.split("=", 1) for p in ln.split()[2:])
                sv.grpc, sv.http = parts["grpc"], parts["http"]
        if sv.grpc and "cronoq serve: leading" in text:
            break
        if proc.returncode is not None:
            raise RuntimeError(f"server exited with {proc.returncode}:\n{text}")
        if time.monotonic() > deadline:
            proc.kill()
            raise RuntimeError(f"server not ready within 60 s:\n{text}")
        await asyncio.sleep(0.05)
    sv.client = Client(sv.grpc)
    if spy_dir is not None:
        spy_dir.mkdir(parents=True, exist_ok=True)
        out = spy_dir / f"server-{store}-{int(time.time())}.txt"
        spy = shutil.which("py-spy", path=str(Path(sys.executable).parent)) or "py-spy"
        extra = os.environ.get("CRONOQ_BENCH_PYSPY_ARGS", "").split()  # e.g. --native
        sv.spy = await asyncio.create_subprocess_exec(
            spy, "record", "--format", "raw", "--rate", "250",
            *([] if "--native" in extra else ["--nonblocking"]), *extra,
            "-p", str(sv.pid), "-o", str(out),
            stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL,
        )  # fmt: skip
    return sv


async def stop_server(sv: Server) -> None:
    if sv.client is not None:
        await sv.client.close()
    if sv.spy is not None:
        with contextlib.suppress(ProcessLookupError):
            sv.spy.send_signal(signal.SIGINT)
        await asyncio.wait_for(sv.spy.wait(), 60)
    await _end(sv.proc, 60)
    if sv.store.startswith("postgres"):
        await _drop_pg_schema(_pg_schema(sv.directory))
    if sv.profile is None:
        shutil.rmtree(sv.directory, ignore_errors=True)


async def _drop_pg_schema(schema: str) -> None:
    """Remove a postgres server's schema (this run's tables only)."""
    import asyncpg

    conn = await asyncpg.connect(PG_URL)
    try:
        await conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
    finally:
        await conn.close()


@dataclass
class Workers:
    procs: list[Any] = field(default_factory=list)
    outs: list[Path] = field(default_factory=list)
    protocol: int = 0  # the worker protocol version the server granted (0: not reported)


async def start_workers(sv: Server, k: int, slots: int) -> Workers:
    ws = Workers()
    for i in range(k):
        out = sv.directory / f"worker-{i}-{time.monotonic_ns()}.json"
        p = await _spawn(
            sys.executable,
            str(CHILD),
            "worker",
            sv.grpc,
            POOL,
            str(slots),
            str(out),
            log=sv.directory / "w.log",
        )
        ws.procs.append(p)
        ws.outs.append(out)
    for p in ws.procs:
        line = (await _line(p, "REGISTERED")).split()
        ws.protocol = int(line[3]) if len(line) > 3 else 0
    # the server has pushed the capacity once every worker shows up
    assert sv.client is not None
    deadline = time.monotonic() + 30
    while len(await sv.client.list_workers()) < k:
        if time.monotonic() > deadline:
            raise RuntimeError("workers did not show up")
        await asyncio.sleep(0.02)
    return ws


async def worker_messages(ws: Workers) -> tuple[int, int]:
    """(Work stream messages both ways, tasks handled) so far, summed over the workers (0, 0
    unless they count: ``--messages``)."""
    if not os.environ.get("CRONOQ_BENCH_COUNT_MESSAGES"):
        return 0, 0
    msgs = handled = 0
    for p in ws.procs:
        p.send_signal(signal.SIGUSR1)
        _, m_in, m_out, h = (await _line(p, "MESSAGES", 10)).split()
        msgs += int(m_in) + int(m_out)
        handled += int(h)
    return msgs, handled


async def counted(ws: Workers, run: Awaitable[Run], sv: Server | None = None) -> Run:
    """``await run`` with the workers' CPU per task and their Work stream messages per task
    (``--messages``) filled in; with ``sv``, the server's context switches per task (and a
    diagnostic variant's commits per task) too."""
    m0, h0 = await worker_messages(ws)
    w0 = sum(cpu_seconds(p.pid) for p in ws.procs)
    s0 = sv.switches() if sv is not None else (0, 0)
    k0 = await sv.commit_stats() if sv is not None else None
    r = await run
    r.worker_cpu_per_1k = (sum(cpu_seconds(p.pid) for p in ws.procs) - w0) / r.n * 1000
    if sv is not None:
        s1 = sv.switches()
        r.switches_per_task = ((s1[0] - s0[0]) / r.n, (s1[1] - s0[1]) / r.n)
        k1 = await sv.commit_stats()
        if k0 is not None and k1 is not None and k1[0] > k0[0]:
            r.commits_per_task = (k1[0] - k0[0]) / r.n
            r.commit_ms = (k1[2] - k0[2]) / (k1[0] - k0[0]) * 1000
            r.mutations_per_commit = (k1[1] - k0[1]) / (k1[0] - k0[0])
            r.commit_dist = k1[3][:5]
            if len(k1[3]) > 5 and len(k0[3]) > 5:  # the database backends' CPU, us per task
                r.commit_dist.append((k1[3][5] - k0[3][5]) / r.n * 1e6)
    m1, h1 = await worker_messages(ws)
    r.messages_per_task = (m1 - m0) / (h1 - h0) if h1 > h0 else None
    return r


async def stop_workers(ws: Workers) -> list[dict[str, Any]]:
    await asyncio.gather(*(_end(p) for p in ws.procs))
    out = []
    for path in ws.outs:
        try:
            out.append(json.loads(path.read_text()))
        except (OSError, ValueError):
            out.append({"handled": 0, "starts": {}})
    return out


async def _until(count: Callable[[], Awaitable[int]], target: int, timeout: float) -> float:
    """Poll ``count()`` until it reaches ``target``; the perf_counter then. Polls are a third of
    the estimated time to go apart (the rate seen since the first poll), 5 to 50 ms."""
    deadline = time.monotonic() + timeout
    t0, c0 = time.perf_counter(), await count()
    while True:
        c = await count()
        now = time.perf_counter()
        if c >= target:
            return now
        if time.monotonic() > deadline:
            raise RuntimeError(f"only {c} of {target} done after {timeout:.0f} s")
        rate = (c - c0) / (now - t0) if now > t0 else 0.0
        delay = (target - c) / rate / 3 if rate > 0 else POLL_MIN_S
        await asyncio.sleep(min(POLL_MAX_S, max(POLL_MIN_S, delay)))


@dataclass
class Run:
    rate: float  # tasks/s
    seconds: float
    submit_seconds: float  # when the last client finished submitting
    server_cpu_per_1k: float  # server CPU seconds per 1000 tasks
    n: int
    messages_per_task: float | None = None  # Work stream messages both ways (``--messages``)
    client_cpu_per_1k: float = 0.0  # the load processes' own CPU seconds per 1000 tasks
    worker_cpu_per_1k: float = 0.0  # the worker processes' (``counted``)
    #: the server's context switches per task, voluntary and involuntary (``counted``)
    switches_per_task: tuple[float, float] = (0.0, 0.0)
    #: a diagnostic variant's commits per task and mean commit latency in ms (``counted``)
    commits_per_task: float | None = None
    commit_ms: float | None = None
    mutations_per_commit: float | None = None
    #: a diagnostic variant's commit latency p50 and p90 (ms), mutations per commit p50 and
    #: p90, a barrier's mean wait (ms), over the run, and for PostgreSQL the database backends'
    #: CPU per task in us (``counted``)
    commit_dist: list[float] | None = None


async def _load_procs(
    args: list[list[str]], count: Callable[[], Awaitable[int]], n: int, cpu: Callable[[], float]
) -> Run:
    """Start load generators, wait READY, send GO to all, wait for ``count`` to grow by ``n``."""
    procs = [await _spawn(*a, stdin=True) for a in args]
    try:
        for p in procs:
            await _line(p, "READY")
        base = await count()
        c0 = cpu()
        t0 = time.perf_counter()
        for p in procs:
            p.stdin.write(b"GO\n")
        await asyncio.gather(*(p.stdin.drain() for p in procs))
        done = asyncio.gather(*(_line(p, "DONE", 600) for p in procs))
        t1 = await _until(count, base + n, 600)
        lines = [line.split() for line in await done]
        sub = max(float(f[1]) for f in lines)
        client_cpu = sum(float(f[2]) for f in lines if len(f) > 2)
        c1 = cpu()
    finally:
        for p in procs:
            await _end(p)
    return Run(n / (t1 - t0), t1 - t0, sub, (c1 - c0) / n * 1000, n, client_cpu_per_1k=client_cpu / n * 1000)


async def cronoq_procs(sv: Server, mode: str, clients: int, n: int, chunk: int) -> Run:
    per = [n // clients + (1 if i < n % clients else 0) for i in range(clients)]
    args = [[sys.executable, str(CHILD), "load", sv.grpc, mode, str(k), str(chunk)] for k in per]
    return await _load_procs(args, sv.succeeded, n, sv.cpu)


async def cronoq_coros(sv: Server, clients: int, n: int) -> Run:
    """Per-task submits from ``clients`` coroutines of this process, one Client each."""
    per = [n // clients + (1 if i < n % clients else 0) for i in range(clients)]
    cs = [Client(sv.grpc, options=[("grpc.use_local_subchannel_pool", 1)]) for _ in range(clients)]
    try:
        await asyncio.gather(*(c.snapshot() for c in cs))
        base = await sv.succeeded()
        c0 = sv.cpu()
        t0 = time.perf_counter()
        sub_end = [0.0]

        async def one(c: Client, k: int) -> None:
            submit = c.submit
            for _ in range(k):
                await submit(pool=POOL)
            sub_end[0] = max(sub_end[0], time.perf_counter() - t0)

        loads = asyncio.gather(*(one(c, k) for c, k in zip(cs, per)))
        t1 = await _until(sv.succeeded, base + n, 600)
        await loads
        c1 = sv.cpu()
    finally:
        for c in cs:
            await c.close()
    return Run(n / (t1 - t0), t1 - t0, sub_end[0], (c1 - c0) / n * 1000, n)


async def cronoq_shared(sv: Server, coros: int, n: int) -> Run:
    """Per-task submits from ``coros`` coroutines sharing ONE Client (one channel): the
    client coalesces the submissions of each loop turn into one ``SubmitMany`` call."""
    per = [n // coros + (1 if i < n % coros else 0) for i in range(coros)]
    c = Client(sv.grpc, options=[("grpc.use_local_subchannel_pool", 1)])
    try:
        await c.snapshot()
        base = await sv.succeeded()
        c0 = sv.cpu()
        t0 = time.perf_counter()
        sub_end = [0.0]

        async def one(k: int) -> None:
            submit = c.submit
            for _ in range(k):
                await submit(pool=POOL)
            sub_end[0] = max(sub_end[0], time.perf_counter() - t0)

        loads = asyncio.gather(*(one(k) for k in per))
        t1 = await _until(sv.succeeded, base + n, 600)
        await loads
        c1 = sv.cpu()
    finally:
        await c.close()
    return Run(n / (t1 - t0), t1 - t0, sub_end[0], (c1 - c0) / n * 1000, n)


async def _warm(sv: Server) -> None:
    """A few tasks end to end so every connection and code path is warm."""
    assert sv.client is not None
    base = await sv.succeeded()
    await sv.client.submit_batch([{"pool": POOL}] * 200)
    await _until(sv.succeeded, base + 200, 60)


# --------------------------------------------------------------------------- Celery baseline


class Celery:
    """Celery + Redis: workers as ``celery worker`` processes, load as child processes."""

    def __init__(self) -> None:
        self.available = False
        self.reason = ""
        self.procs: list[Any] = []
        self.used = False  # keys are deleted at the end only by a run that made some
        self.directory = Path(tempfile.mkdtemp(prefix="cronoq-bench-celery-"))
        self.queue = f"cronoq-bench-{os.getpid()}"
        try:
            import celery  # noqa: F401
            import redis
        except ImportError as e:
            self.reason = f"{e.name} is not installed (pip install celery redis)"
            return
        try:
            probe = redis.Redis(host="127.0.0.1", port=6379, socket_timeout=2)
            probe.ping()
            keyspace = probe.info("keyspace")
            ndb = int(probe.config_get("databases").get("databases", 16))
        except Exception as e:
            self.reason = f"no Redis on 127.0.0.1:6379 ({type(e).__name__}: {e})"
            return
        free = [d for d in range(ndb - 1, 0, -1) if f"db{d}" not in keyspace]
        if len(free) < 2:
            self.reason = "no two empty Redis databases"
            return
        self.broker_db, self.result_db = free[0], free[1]
        self.results = redis.Redis(host="127.0.0.1", port=6379, db=self.result_db)
        self.broker = redis.Redis(host="127.0.0.1", port=6379, db=self.broker_db)
        import celery as _c

        self.version = _c.__version__
        self.available = True

    def env(self) -> dict[str, str]:
        env = _child_env()
        env["CRONOQ_BENCH_BROKER"] = f"redis://127.0.0.1:6379/{self.broker_db}"
        env["CRONOQ_BENCH_BACKEND"] = f"redis://127.0.0.1:6379/{self.result_db}"
        env["CRONOQ_BENCH_QUEUE"] = self.queue
        return env

    async def count(self) -> int:
        return int(await asyncio.to_thread(self.results.dbsize))

    async def start_workers(self, k: int, slots: int) -> None:
        self.used = True
        for i in range(k):
            p = await _spawn(
                sys.executable, "-m", "celery", "-A", "_server_worker", "worker",
                "--pool", "threads", "--concurrency", str(slots), "-Q", self.queue,
                "-n", f"bench{i}-{os.getpid()}@%h", "--without-gossip", "--without-mingle",
                "--without-heartbeat", "-l", "warning",
                env=self.env(), cwd=str(_HERE), log=self.directory / "celery.log",
            )  # fmt: skip
            self.procs.append(p)
        await asyncio.to_thread(self._wait_ready, k)

    def _wait_ready(self, k: int) -> None:
        os.environ.update({k_: v for k_, v in self.env().items() if k_.startswith("CRONOQ_BENCH_")})
        import importlib

        mod = importlib.import_module("_server_worker")
        if mod.app is None:  # imported before the env was set
            mod = importlib.reload(mod)
        self.app = mod.app
        deadline = time.monotonic() + 60
        while True:
            names = {next(iter(r)) for r in self.app.control.ping(timeout=0.5) or []}
            mine = [nm for nm in names if nm.endswith(f"-{os.getpid()}@{nm.split('@', 1)[1]}")]
            if len(mine) >= k:
                return
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"celery workers not ready: {names}\n"
                    + (self.directory / "celery.log").read_text()[-3000:]
                )

    async def stop_workers(self) -> None:
        await asyncio.gather(*(_end(p, 30) for p in self.procs))
        self.procs = []

    async def run(self, mode: str, clients: int, n: int, chunk: int) -> Run:
        per = [n // clients + (1 if i < n % clients else 0) for i in range(clients)]
        args = [[sys.executable, str(CHILD), "celery-load", mode, str(k), str(chunk)] for k in per]
        procs = [await _spawn(*a, stdin=True, env=self.env()) for a in args]
        try:
            for p in procs:
                await _line(p, "READY")
            base = await self.count()
            t0 = time.perf_counter()
            for p in procs:
                p.stdin.write(b"GO\n")
            await asyncio.gather(*(p.stdin.drain() for p in procs))
            done = asyncio.gather(*(_line(p, "DONE", 600) for p in procs))
            t1 = await _until(self.count, base + n, 600)
            sub = max(float(line.split()[1]) for line in await done)
        finally:
            for p in procs:
                await _end(p)
        return Run(n / (t1 - t0), t1 - t0, sub, 0.0, n)

    async def latency(self, n: int, interval: float) -> list[float]:
        task = self.app.tasks["cronoq_bench.noop"]
        key = self.queue + ":starts"
        submitted = [0] * n

        async def started() -> int:
            # the starts hash, not the result db's size: results of the throughput runs may
            # expire meanwhile (the size then falls, and a count against a base never arrives)
            return int(await asyncio.to_thread(self.results.hlen, key))

        base = await started()

        def go() -> None:
            with self.app.connection_for_write() as conn:
                task.apply_async(args=("warm",), connection=conn)
                time.sleep(0.2)
                for i in range(n):
                    submitted[i] = time.monotonic_ns()
                    task.apply_async(args=(str(i),), connection=conn)
                    time.sleep(interval)

        await asyncio.to_thread(go)
        await _until(started, base + n + 1, 120)  # + the warm-up task
        starts = await asyncio.to_thread(self.results.hgetall, key)
        got = {k.decode(): int(v) for k, v in starts.items()}
        return [(got[str(i)] - submitted[i]) / 1e6 for i in range(n) if str(i) in got]

    def cleanup(self) -> None:
        if not self.available or not self.used:
            shutil.rmtree(self.directory, ignore_errors=True)
            return
        with contextlib.suppress(Exception):
            for db in (self.results, self.broker):
                for pattern in ("celery-task-meta-*", f"{self.queue}*", "_kombu.binding*", "unacked*"):
                    keys = list(db.scan_iter(match=pattern, count=1000))
                    for i in range(0, len(keys), 1000):
                        db.delete(*keys[i : i + 1000])
        shutil.rmtree(self.directory, ignore_errors=True)


# --------------------------------------------------------------------------- groups


def _baseline(cel: dict[str, Run] | None, key: str) -> tuple[float, list[float]]:
    if not cel or key not in cel:
        return 0.0, []
    return cel[key].rate, [cel[key].rate]


async def bench_throughput(
    sz: dict[str, int], opts: argparse.Namespace, celery: Celery | None
) -> list[Result]:
    rep, slots, clients = sz["repeat"], sz["slots"], sz["clients"]
    bn, sn, chunk = sz["batch_n"], sz["submit_n"], sz["chunk"]
    cel: dict[str, dict[str, list[Run]]] = {}
    if celery is not None and celery.available:
        for k in (1, 4):
            await celery.start_workers(k, slots)
            try:
                runs: dict[str, list[Run]] = {"batch": [], "submit": []}
                await celery.run("submit", 1, 200, chunk)  # warm
                for _ in range(rep):
                    runs["batch"].append(await celery.run("batch", 1, bn, chunk))
                    runs["submit"].append(await celery.run("submit", clients, sn, chunk))
                cel[str(k)] = runs
                print(
                    f"  celery {k} worker(s): batch {median([r.rate for r in runs['batch']]):,.0f}/s, "
                    f"per-task {median([r.rate for r in runs['submit']]):,.0f}/s",
                    flush=True,
                )
            finally:
                await celery.stop_workers()
    bname = (
        f"Celery {celery.version} + Redis, same shape" if celery is not None and celery.available
        else f"Celery + Redis: not measured ({celery.reason if celery else '--no-celery'})"
    )  # fmt: skip

    out: list[Result] = []
    for store in getattr(opts, "stores", DEFAULT_STORES):
        sv = await start_server(store, opts.profile, getattr(opts, "py_spy", None))
        try:
            for k in getattr(opts, "workers", DEFAULT_WORKERS):
                ws = await start_workers(sv, k, slots)
                try:
                    await _warm(sv)
                    runs = {"batch": [], "submit_procs": [], "submit_coros": [], "submit_shared": []}
                    floors: list[Floor] = []
                    for _ in range(rep):
                        # each repeat beside its own floor: a shared machine's load drifts
                        floors.append(await grpc_floor_measure(clients, sn))
                        runs["batch"].append(await counted(ws, cronoq_procs(sv, "batch", 1, bn, chunk), sv))
                        runs["submit_procs"].append(
                            await counted(ws, cronoq_procs(sv, "submit", clients, sn, chunk), sv)
                        )
                        runs["submit_coros"].append(await counted(ws, cronoq_coros(sv, clients, sn), sv))
                        runs["submit_shared"].append(
                            await counted(ws, cronoq_shared(sv, SHARED_COROS, sn), sv)
                        )
                finally:
                    await stop_workers(ws)
                protocol = ws.protocol
                crun = cel.get(str(k), {})
                floor = sorted(floors, key=lambda f: f.calls_per_s)[len(floors) // 2]
                print(
                    f"  gRPC floor (bare grpc.aio unary echo, {clients} client processes), median of "
                    f"{len(floors)}: {floor.calls_per_s:,.0f} calls/s, server CPU "
                    f"{floor.cpu_s_per_1k:.3f} s per 1,000 calls, clients' {floor.client_cpu_s_per_1k:.3f}",
                    flush=True,
                )
                for key, label, target, ckey in (
                    ("batch", f"submit_batch of {chunk}, 1 client process", T_BATCH, "batch"),
                    ("submit_procs", f"per-task submit, {clients} client processes", T_SUBMIT, "submit"),
                    ("submit_coros", f"per-task submit, {clients} client coroutines", T_SUBMIT, "submit"),
                    (
                        "submit_shared",
                        f"per-task submit, {SHARED_COROS} coroutines on one Client",
                        T_SUBMIT,
                        "submit",
                    ),
                ):
                    rs = runs[key]
                    crs = crun.get(ckey, [])
                    cpu = median([r.server_cpu_per_1k for r in rs])
                    paired = list(zip(rs, floors, strict=True))
                    ratios = [r.rate / f.calls_per_s for r, f in paired]
                    cpu_ratios = [r.server_cpu_per_1k / f.cpu_s_per_1k for r, f in paired if f.cpu_s_per_1k]
                    out.append(
                        Result(
                            "throughput",
                            f"tasks/s {label} ({store}, {k} worker{'s' if k > 1 else ''})",
                            median([r.rate for r in rs]),
                            "tasks/s",
                            median([r.rate for r in crs]) if crs else 0.0,
                            bname,
                            True,
                            target,
                            [r.rate for r in rs],
                            [r.rate for r in crs],
                            {
                                "store": store,
                                "workers": k,
                                "slots_per_worker": slots,
                                "worker_protocol": protocol,
                                "messages_per_task": (
                                    median([r.messages_per_task for r in rs if r.messages_per_task])
                                    if any(r.messages_per_task for r in rs)
                                    else None
                                ),
                                "n": rs[0].n,
                                "server_cpu_s_per_1k": cpu,
                                "server_switches_per_task": [
                                    median([r.switches_per_task[0] for r in rs]),
                                    median([r.switches_per_task[1] for r in rs]),
                                ],
                                "commits_per_task": (
                                    median([r.commits_per_task for r in rs if r.commits_per_task])
                                    if any(r.commits_per_task for r in rs)
                                    else None
                                ),
                                "commit_ms": (
                                    median([r.commit_ms for r in rs if r.commit_ms])
                                    if any(r.commit_ms for r in rs)
                                    else None
                                ),
                                "mutations_per_commit": (
                                    median([r.mutations_per_commit for r in rs if r.mutations_per_commit])
                                    if any(r.mutations_per_commit for r in rs)
                                    else None
                                ),
                                "client_cpu_s_per_1k": median([r.client_cpu_per_1k for r in rs]),
                                "worker_cpu_s_per_1k": median([r.worker_cpu_per_1k for r in rs]),
                                # the same run's gRPC floor (bench/grpc_floor.py), measured
                                # beside each repeat: the ratios are medians of the repeats'
                                "floor": floor.to_json(),
                                "floor_ratios": ratios,
                                "floor_ratio": median(ratios),
                                "cpu_vs_floor": median(cpu_ratios) if cpu_ratios else None,
                                "submit_seconds": median([r.submit_seconds for r in rs]),
                                "seconds": median([r.seconds for r in rs]),
                                "celery_submit_seconds": (
                                    median([r.submit_seconds for r in crs]) if crs else None
                                ),
                            },
                        )
                    )
                    print(describe(out[-1]), flush=True)
                    x = out[-1].extra
                    each = ", ".join(f"{v:.3f}" for v in ratios)
                    print(
                        f"    {x['floor_ratio']:.3f}x the floor (repeats {each}); "
                        f"CPU ms per task: server {cpu:.3f}, clients {x['client_cpu_s_per_1k']:.3f}, "
                        f"workers {x['worker_cpu_s_per_1k']:.3f}",
                        flush=True,
                    )
                    sw = x["server_switches_per_task"]
                    more = (
                        f"    server context switches per task: {sw[0]:.2f} voluntary, "
                        f"{sw[1]:.2f} involuntary"
                    )
                    if x["commits_per_task"]:
                        more += (
                            f"; {x['commits_per_task']:.3f} commits per task, {x['commit_ms']:.2f} ms and "
                            f"{x['mutations_per_commit']:.1f} mutations each"
                        )
                    print(more, flush=True)
        finally:
            await stop_server(sv)
    print_store_ratios(out)
    return out


def store_ratios(results: list[Result]) -> dict[str, dict[str, float]]:
    """Each durable store's figure ÷ the memory store's same figure of this run (tasks/s and
    server CPU per task), keyed by the figure's name with the store left out."""
    mem = {r.name.replace("(memory,", "(STORE,"): r for r in results if r.extra.get("store") == "memory"}
    ratios: dict[str, dict[str, float]] = {}
    for r in results:
        store = r.extra.get("store")
        m = mem.get(r.name.replace(f"({store},", "(STORE,"))
        if store == "memory" or m is None or not m.value:
            continue
        entry = {"tasks_per_s": r.value / m.value}
        if m.extra.get("server_cpu_s_per_1k"):
            entry["server_cpu_per_task"] = r.extra["server_cpu_s_per_1k"] / m.extra["server_cpu_s_per_1k"]
        r.extra["vs_memory"] = entry
        ratios[r.name] = entry
    return ratios


def print_store_ratios(results: list[Result]) -> None:
    ratios = store_ratios(results)
    if ratios:
        print("  durable ÷ memory, same run (tasks/s; server CPU per task):", flush=True)
    for name, e in ratios.items():
        cpu = e.get("server_cpu_per_task")
        print(f"    {e['tasks_per_s']:.3f}x  {'' if cpu is None else f'{cpu:.3f}x'}  {name}", flush=True)


async def grpc_floor_measure(clients: int, calls: int) -> Floor:
    """The floor of this run: a bare grpc.aio echo server under the same client shape."""
    return await measure_floor(clients, calls)


async def cronoq_latency(sv: Server, n: int, interval: float) -> list[float]:
    ws = await start_workers(sv, 1, 4)
    submitted = [0] * n
    try:
        await _warm(sv)
        assert sv.client is not None
        base = await sv.succeeded()
        submit = sv.client.submit
        mono = time.monotonic_ns
        for i in range(n):
            payload = str(i).encode()
            submitted[i] = mono()
            await submit(payload, pool=POOL)
            await asyncio.sleep(interval)
        await _until(sv.succeeded, base + n, 60)
    finally:
        (res,) = await stop_workers(ws)
    starts = res["starts"]
    return [(starts[str(i)] - submitted[i]) / 1e6 for i in range(n) if str(i) in starts]


async def lone_submits(sv: Server, n: int) -> tuple[list[float], list[float]]:
    """Round trips of lone ``submit()`` calls (one in flight, 1 ms apart) through a Client with
    coalescing on and one with it off, alternated call by call so both see the same load."""
    on = Client(sv.grpc, options=[("grpc.use_local_subchannel_pool", 1)])
    off = Client(sv.grpc, options=[("grpc.use_local_subchannel_pool", 1)], coalesce_submits=False)
    lat: tuple[list[float], list[float]] = ([], [])
    try:
        await asyncio.gather(on.snapshot(), off.snapshot())
        for i in range(2 * n):
            c = (on, off)[i % 2]
            t0 = time.monotonic_ns()
            await c.submit(pool=POOL)
            lat[i % 2].append((time.monotonic_ns() - t0) / 1e6)
            await asyncio.sleep(0.001)
    finally:
        await on.close()
        await off.close()
    return lat


async def grpc_floor(sv: Server, n: int) -> list[float]:
    """Round trip of a trivial unary call (ListWorkers, no workers): the transport floor."""
    assert sv.client is not None
    out = []
    for _ in range(n):
        t0 = time.monotonic_ns()
        await sv.client.list_workers()
        out.append((time.monotonic_ns() - t0) / 1e6)
        await asyncio.sleep(0.001)
    return out


async def bench_latency(sz: dict[str, int], opts: argparse.Namespace, celery: Celery | None) -> list[Result]:
    n, interval = sz["latency_n"], 0.002
    base: list[float] = []
    bname = f"Celery + Redis: not measured ({celery.reason if celery else '--no-celery'})"
    if celery is not None and celery.available:
        await celery.start_workers(1, 4)
        try:
            base = await celery.latency(n, interval)
            bname = f"Celery {celery.version} + Redis apply_async → task start"
        finally:
            await celery.stop_workers()
    sv = await start_server("sqlite", opts.profile, getattr(opts, "py_spy", None))
    try:
        lat = await cronoq_latency(sv, n, interval)
        floor = await grpc_floor(sv, min(n, 500))
        ws = await start_workers(sv, 1, 4)
        try:
            lone_on, lone_off = await lone_submits(sv, min(n, 500))
        finally:
            await stop_workers(ws)
    finally:
        await stop_server(sv)
    extra = {
        "n": n,
        "measured": len(lat),
        "interval_ms": interval * 1000,
        "store": "sqlite",
        "max_ms": max(lat),
        "grpc_unary_roundtrip_p50_ms": percentile(floor, 50),
        "grpc_unary_roundtrip_p99_ms": percentile(floor, 99),
        "celery_measured": len(base),
        "celery_max_ms": max(base) if base else None,
    }
    lone = {
        "n": len(lone_on),
        "coalescing_off_p50_ms": percentile(lone_off, 50),
        "coalescing_off_p99_ms": percentile(lone_off, 99),
        "coalescing_on_p99_ms": percentile(lone_on, 99),
        "store": "sqlite",
    }
    return [
        Result("latency", "dispatch latency p50 (submit → handler start)", percentile(lat, 50), "ms",
               percentile(base, 50), bname, False, None, extra=extra),
        Result("latency", "dispatch latency p99 (submit → handler start)", percentile(lat, 99), "ms",
               percentile(base, 99), bname, False, T_LAT_P99, extra=extra),
        Result("latency", "lone submit() round trip p50 (coalescing Client)", percentile(lone_on, 50),
               "ms", percentile(lone_off, 50), "the same run with Client(coalesce_submits=False)", False,
               percentile(lone_off, 50) + T_LONE_GROWTH_MS, extra=lone),
    ]  # fmt: skip


async def bench_sse(sz: dict[str, int], opts: argparse.Namespace, celery: Celery | None) -> list[Result]:
    rep, slots, clients, subs = sz["sse_repeat"], sz["slots"], sz["clients"], sz["sse_subs"]
    bn, sn, chunk = sz["batch_n"], sz["submit_n"], sz["chunk"]
    sv = await start_server("sqlite", opts.profile, getattr(opts, "py_spy", None))
    url = f"http://{sv.http}/v1/events?all_transitions=true"
    runs: dict[tuple[str, bool], list[Run]] = {}
    events: dict[str, list[float]] = {"batch": [], "submit": []}
    sub_cpu: dict[str, list[float]] = {"batch": [], "submit": []}
    sse_errors: dict[str, list[str]] = {"batch": [], "submit": []}
    try:
        ws = await start_workers(sv, 4, slots)
        try:
            await _warm(sv)
            for i in range(rep):
                for mode, n, ncl in (("batch", bn, 1), ("submit", sn, clients)):
                    # ABBA: the store grows and the host drifts during the run; alternating
                    # which of the pair goes first keeps that out of the comparison
                    for with_sse in (False, True) if i % 2 == 0 else (True, False):
                        sse = None
                        if with_sse:
                            sse = await _spawn(sys.executable, str(CHILD), "sse", url, str(subs))
                            await _line(sse, "LIVE")
                        sub_cpu0 = cpu_seconds(sse.pid) if sse is not None else 0.0
                        try:
                            r = await cronoq_procs(sv, mode, ncl, n, chunk)
                        finally:
                            if sse is not None:
                                await asyncio.sleep(0.2)  # the last events reach the subscribers
                                sub_cpu[mode].append((cpu_seconds(sse.pid) - sub_cpu0) / n * 1000)
                                sse.send_signal(signal.SIGTERM)
                                line = await _line(sse, "EVENTS")
                                await _end(sse)
                                _, got, nerr, first = line.split(" ", 3)
                                events[mode].append(int(got) / (subs * n))
                                if int(nerr):
                                    sse_errors[mode].append(f"{nerr} of {subs} streams ended: {first}")
                        runs.setdefault((mode, with_sse), []).append(r)
        finally:
            await stop_workers(ws)
    finally:
        await stop_server(sv)
    out = []
    for mode, label in (
        ("batch", f"submit_batch of {chunk}"),
        ("submit", f"per-task submit, {clients} procs"),
    ):
        with_, without = runs[(mode, True)], runs[(mode, False)]
        b = median([r.rate for r in without])
        v = median([r.rate for r in with_])
        cut = " [subscribers cut off: data_loss]" if sse_errors[mode] else ""
        out.append(
            Result(
                "sse",
                f"tasks/s {label}, {subs} SSE subscribers (sqlite, 4 workers){cut}",
                v,
                "tasks/s",
                b,
                "same run without subscribers",
                True,
                (1 - T_SSE_COST) * b,
                [r.rate for r in with_],
                [r.rate for r in without],
                {
                    "subscribers": subs,
                    "url": "/v1/events?all_transitions=true",
                    "cost": 1 - v / b if b else None,
                    "paired_cost": 1 - median([w.rate / o.rate for w, o in zip(with_, without, strict=True)]),
                    "max_cost": T_SSE_COST,
                    "events_per_task_per_subscriber": median(events[mode]),
                    "stream_errors": sse_errors[mode],
                    "server_cpu_s_per_1k": median([r.server_cpu_per_1k for r in with_]),
                    "server_cpu_s_per_1k_without": median([r.server_cpu_per_1k for r in without]),
                    "subscriber_cpu_s_per_1k": median(sub_cpu[mode]),
                },
            )
        )
        print(describe(out[-1]), flush=True)
    return out


BENCHES: dict[str, Callable[..., Awaitable[list[Result]]]] = {
    "throughput": bench_throughput,
    "latency": bench_latency,
    "sse": bench_sse,
}


def print_profiles(profile_dir: Path, top: int = 30) -> None:
    import pstats

    for prof in sorted(profile_dir.glob("server-*.prof")):
        print(f"\nprofile {prof}:")
        try:
            st = pstats.Stats(str(prof))
        except Exception as e:  # pragma: no cover - a server killed before writing it
            print(f"  unreadable: {e}")
            continue
        st.sort_stats("tottime").print_stats(top)


def print_py_spy(spy_dir: Path, top: int = 25) -> None:
    """Self and inclusive sample shares per function of py-spy's raw (collapsed) stacks."""
    for path in sorted(spy_dir.glob("server-*.txt")):
        own: dict[str, int] = {}
        incl: dict[str, int] = {}
        total = 0
        for line in path.read_text(errors="replace").splitlines():
            stack, _, count = line.rpartition(" ")
            if not stack or not count.isdigit():
                continue
            k = int(count)
            total += k
            frames = [f.rsplit(":", 1)[0] + ")" if ":" in f else f for f in stack.split(";")]
            own[frames[-1]] = own.get(frames[-1], 0) + k
            for f in set(frames):
                incl[f] = incl.get(f, 0) + k
        print(f"\npy-spy {path} ({total} samples; self %, inclusive %):")
        for f, k in sorted(own.items(), key=lambda kv: -kv[1])[:top]:
            print(f"  {100 * k / total:5.1f}  {100 * incl[f] / total:5.1f}  {f}")


async def amain(args: argparse.Namespace, sz: dict[str, int]) -> list[Result]:
    celery = None if args.no_celery else Celery()
    if celery is not None and not celery.available:
        print(f"Celery baseline skipped: {celery.reason}")
    elif celery is not None:
        print(f"Celery baseline: celery {celery.version}, Redis dbs {celery.broker_db}/{celery.result_db}")
    results: list[Result] = []
    try:
        for name in args.only or GROUPS:
            t0 = time.perf_counter()
            print(f"\n[{name}]", flush=True)
            got = await BENCHES[name](sz, args, celery)
            if name != "throughput" and name != "sse":
                for r in got:
                    print(describe(r), flush=True)
            print(f"  ({time.perf_counter() - t0:.1f} s)   load average {_load()}", flush=True)
            results.extend(got)
    finally:
        if celery is not None:
            if celery.procs:
                await celery.stop_workers()
            celery.cleanup()
    return results


def _load() -> str:
    try:
        return ", ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:  # pragma: no cover
        return "?"


def _names(allowed: tuple[str, ...]) -> Callable[[str], list[str]]:
    def parse(text: str) -> list[str]:
        names = [n.strip() for n in text.split(",") if n.strip()]
        bad = [n for n in names if n not in allowed]
        if bad or not names:
            raise argparse.ArgumentTypeError(f"choose from {', '.join(allowed)} (got {text!r})")
        return names

    return parse


def _counts(text: str) -> list[int]:
    try:
        counts = [int(n) for n in text.split(",")]
    except ValueError:
        counts = []
    if not counts or min(counts) < 1:
        raise argparse.ArgumentTypeError(f"comma-separated positive integers (got {text!r})")
    return counts


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--quick", action="store_true", help="small sizes, one repeat (smoke run)")
    p.add_argument("--only", choices=GROUPS, action="append", help="run only this group (repeatable)")
    p.add_argument("--json", type=Path, default=DEFAULT_JSON, help=f"output file (default {DEFAULT_JSON})")
    p.add_argument("--repeat", type=int, default=None, help="repeats of each figure (median)")
    p.add_argument("--no-celery", action="store_true", help="skip the Celery + Redis baseline")
    p.add_argument("--profile", type=Path, default=None, metavar="DIR", help="cProfile every server into DIR")
    p.add_argument(
        "--py-spy", type=Path, default=None, metavar="DIR", help="py-spy record every server (raw) into DIR"
    )
    p.add_argument(
        "--worker-protocol",
        type=int,
        default=None,
        metavar="N",
        help="cronoq workers ask for worker protocol N (e.g. 3: the published worker's framing)",
    )
    p.add_argument("--messages", action="store_true", help="count the workers' Work stream messages per task")
    p.add_argument(
        "--stores",
        type=_names(STORES),
        default=DEFAULT_STORES,
        help="throughput group stores, comma-separated: sqlite, memory, postgres (default sqlite,memory)",
    )
    p.add_argument(
        "--workers",
        type=_counts,
        default=DEFAULT_WORKERS,
        help="comma-separated worker process counts of the throughput group (default 1,4)",
    )
    args = p.parse_args(argv)
    if args.messages:
        os.environ["CRONOQ_BENCH_COUNT_MESSAGES"] = "1"
    if args.worker_protocol is not None:
        # read by bench/_server_worker.py's worker processes only (they inherit this environment)
        os.environ["CRONOQ_BENCH_WORKER_PROTOCOL"] = str(args.worker_protocol)

    sz = dict(SIZES["quick" if args.quick else "full"])
    if args.repeat is not None:
        sz["repeat"] = sz["sse_repeat"] = max(1, args.repeat)
    machine = machine_info()
    machine["cronoq"] = source_info()
    print(f"cronoq server benchmark ({'quick' if args.quick else 'full'})")
    print(
        f"load average: {_load()}   cpus: {machine['cpu_count']} (usable {machine['affinity']})   "
        f"python {machine['python']}"
    )
    src = machine["cronoq"]
    print(f"cronoq from {src['path']} (commit {src['commit']}, uncommitted src changes: {src['dirty']})")
    print(f"sizes: {sz}")
    t_start = time.perf_counter()
    results = asyncio.run(amain(args, sz))
    with contextlib.suppress(OSError):
        machine["loadavg_end"] = list(os.getloadavg())
    print("\nsummary (ratio = value / baseline; throughput: higher is better, latency: lower)")
    print(table(results))
    print(f"\nload average at end: {_load()}")
    print(f"total {time.perf_counter() - t_start:.1f} s")
    if args.profile is not None:
        print_profiles(args.profile)
    if args.py_spy is not None:
        print_py_spy(args.py_spy)
    write_json(args.json, machine, {"sizes": sz, "quick": args.quick, "only": args.only}, results)
    print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
