"""cronoq throughput benchmark: every figure beside a bare-asyncio baseline from the same run.

Run ``python bench/throughput.py`` (``--quick`` for a smoke-sized run, ``--only NAME`` for one
group, ``--json PATH`` to choose the output file; default ``bench/results/throughput.json``).

Groups (``--only``):

``engine``
    ``cronoq.engine.Core`` driven directly under virtual integer-ns time: batches of submits,
    one ``tick``, complete every ``Dispatch`` lease.  Cycles (submit → dispatch → complete)/s.
``e2e``
    End-to-end no-op async tasks/s: ``await sched.enqueue(...)`` in a loop, and
    ``submit_batch([Task(...)])`` in chunks; completion is detected by a counter in the
    executor plus an ``asyncio.Event`` (no polling sleeps).
``submit``
    End-to-end with per-task ``await sched.submit(...)`` and then awaiting every handle.
``named``
    The named-task layer (``cronoq.App``): ``await t.submit(i, "sku")`` of an ``@app.task``
    ``async def item(n: int, sku: str) -> int`` (arguments bound and checked at submission,
    ``{"args", "kwargs"}`` JSON payload, dispatch by name, arguments decoded by the executor)
    then awaiting every handle, against the ``submit`` group's plain ``await sched.submit(i)``
    from the same run, 2 × ``repeat`` pairs in ABBA order: target at most 25 % fewer tasks/s.
``memory``
    Bytes per pending task with N pending on a pool of capacity 0 (nothing runs), by
    tracemalloc and by RSS delta, each in a fresh child process: ``enqueue`` (no handle),
    ``submit`` (handles kept) and ``dependent`` (``enqueue`` with one dependency on a task that
    never runs: the task stays ``blocked``; issue 33's "with a dependency" row, target 440 B;
    its "blocked" row is ``enqueue``, target 345 B).
``latency``
    Submit → executor-start latency, p50/p99, tasks submitted 1 ms apart on an idle pool.
``preempt``
    One slot, N Low tasks of 100 µs (busy-wait) queued, then a burst of High tasks: the High
    tasks' wait (submit → start) p50/p99.  Both sides submit without a handle (``enqueue``,
    ``put_nowait``) and await the burst's end the same way, one event set by the last High.
``resources``
    End-to-end ``enqueue`` throughput when every task takes one permit of a semaphore with
    plenty of permits (``Resource.semaphore("db", 1_000_000)``), against the same run without
    resources (the ``e2e enqueue`` setup): 2 × ``repeat`` pairs in ABBA order (``extra``
    also has the median cost over the pairs): the cost of resources.

Baselines are plain asyncio: one ``loop.create_task`` per no-op coroutine (awaited with a
counter + event, or with ``gather``); create_task → coroutine-start latency; memory of pending
``create_task`` tasks; and for preemption a single worker draining an ``asyncio.PriorityQueue``
(plus, for context, FIFO ``create_task`` behind an ``asyncio.Semaphore(1)``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import json
import os
import subprocess
import sys
import time
import tracemalloc
from collections.abc import Callable
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
    rss_bytes,
    run_async,
    source_info,
    table,
    write_json,
)

from cronoq import App, Dep, Pool, Resource, Scheduler, Task  # noqa: E402
from cronoq.engine import Core, CoreConfig, PoolConfig, TaskOptions  # noqa: E402
from cronoq.engine.actions import Dispatch  # noqa: E402

DEFAULT_JSON = _HERE / "results" / "throughput.json"
GROUPS = ("engine", "e2e", "submit", "named", "memory", "latency", "preempt", "resources")

# Targets (issues; docs/benchmarks.md#targets says the numbers are measured here, never by timed unit tests)
T_ENGINE = 250_000.0  # cycles/s
T_E2E = 45_000.0  # tasks/s (enqueue, submit_batch)
T_SUBMIT = 25_000.0  # tasks/s (submit + await handles)
T_MEM_NOHANDLE = 500.0  # bytes/task
T_MEM_HANDLE = 1024.0  # bytes/task
T_MEM_DEPENDENT = 440.0  # bytes/task (issue 33: the published engine's figure)
T_LAT_P50 = 0.1  # ms
T_LAT_P99 = 0.5  # ms
T_PREEMPT_P99 = 12.0  # ms
T_RESOURCES_COST = 0.20  # at most 20 % fewer tasks/s with one semaphore permit per task
T_NAMED_COST = 0.25  # at most 25 % fewer tasks/s through the named-task layer (JSON arguments)

SIZES: dict[str, dict[str, int]] = {
    "full": {
        "engine_n": 200_000,
        "engine_batch": 64,
        "e2e_n": 100_000,
        "batch_chunk": 1000,
        "submit_n": 100_000,
        "memory_n": 200_000,
        "latency_n": 2000,
        "preempt_low": 5000,
        "preempt_high": 100,
        "repeat": 3,
    },
    "quick": {
        "engine_n": 20_000,
        "engine_batch": 64,
        "e2e_n": 5000,
        "batch_chunk": 1000,
        "submit_n": 5000,
        "memory_n": 20_000,
        "latency_n": 200,
        "preempt_low": 500,
        "preempt_high": 20,
        "repeat": 1,
    },
}


def _pool(executor: Callable[..., Any], slots: int) -> Pool:
    return Pool("default", executor, min=slots, max=max(1, slots), autoscale=False)


# --------------------------------------------------------------------------- baselines


async def _asyncio_counter(n: int) -> float:
    """Bare asyncio: n x create_task(no-op), completion by counter + Event.  Returns seconds."""
    loop = asyncio.get_running_loop()
    done = asyncio.Event()
    left = [n]

    async def noop(i: int) -> None:
        left[0] -= 1
        if not left[0]:
            done.set()

    t0 = time.perf_counter()
    for i in range(n):
        loop.create_task(noop(i))  # noqa: RUF006 - fire and forget is the point; the loop holds it
    await done.wait()
    await asyncio.sleep(0)  # the last task's done callbacks, as cronoq's completion check does
    return time.perf_counter() - t0


async def _asyncio_gather(n: int) -> float:
    """Bare asyncio: n x create_task(no-op), awaited with gather.  Returns seconds."""
    loop = asyncio.get_running_loop()

    async def noop(i: int) -> int:
        return i

    t0 = time.perf_counter()
    tasks = [loop.create_task(noop(i)) for i in range(n)]
    await asyncio.gather(*tasks)
    return time.perf_counter() - t0


def baseline_counter_rate(n: int) -> float:
    return n / run_async(lambda: _asyncio_counter(n))


def baseline_gather_rate(n: int) -> float:
    return n / run_async(lambda: _asyncio_gather(n))


# --------------------------------------------------------------------------- 1. engine


def engine_cycles(n: int, batch: int = 64, slots: int | None = None) -> float:
    """Submit → dispatch → complete cycles/s of the bare engine under virtual time."""
    slots = batch if slots is None else slots
    core = Core(CoreConfig([PoolConfig("default", min=slots, max=slots, autoscale=False)]))
    opts = TaskOptions()
    core.resolve_pool(opts)
    submit, tick, complete, drain = core.submit, core.tick, core.complete, core.drain_actions
    now = 0
    done = 0
    t0 = time.perf_counter()
    while done < n:
        for _ in range(batch):
            submit(now, opts, None)
        now += 1000
        tick(now)
        while True:
            leases = [a.lease for a in drain() if type(a) is Dispatch]
            if not leases:
                break
            for lease in leases:
                complete(now, lease, None)
            done += len(leases)
            tick(now)
    dt = time.perf_counter() - t0
    if core.totals["succeeded"] != done:  # pragma: no cover - engine bug
        raise AssertionError("engine did not complete every dispatched task")
    return done / dt


def bench_engine(sz: dict[str, int]) -> list[Result]:
    n, batch, rep = sz["engine_n"], sz["engine_batch"], sz["repeat"]
    base, main, narrow, nogc = [], [], [], []
    for _ in range(rep):
        base.append(baseline_counter_rate(min(n, sz["e2e_n"])))
        main.append(engine_cycles(n, batch))
        narrow.append(engine_cycles(n, batch, slots=8))
        gc.collect()
        gc.disable()  # attribution only: how much of the cycle cost is the cyclic GC
        try:
            nogc.append(engine_cycles(n, batch))
        finally:
            gc.enable()
    return [
        Result(
            "engine",
            f"engine cycles/s (batch {batch}, {batch} slots)",
            median(main),
            "cycles/s",
            median(base),
            "asyncio create_task no-op tasks/s",
            True,
            T_ENGINE,
            main,
            base,
            {"n": n, "batch": batch, "slots": batch},
        ),
        Result(
            "engine",
            f"engine cycles/s (batch {batch}, 8 slots)",
            median(narrow),
            "cycles/s",
            median(base),
            "asyncio create_task no-op tasks/s",
            True,
            None,
            narrow,
            base,
            {"n": n, "batch": batch, "slots": 8},
        ),
        Result(
            "engine",
            f"engine cycles/s (batch {batch}, {batch} slots, gc disabled)",
            median(nogc),
            "cycles/s",
            median(base),
            "asyncio create_task no-op tasks/s",
            True,
            None,
            nogc,
            base,
            {"n": n, "batch": batch, "slots": batch, "gc": False},
        ),
    ]


# --------------------------------------------------------------------------- 2./3. end to end


class _Counter:
    """A no-op async executor that sets ``done`` after ``n`` runs."""

    def __init__(self, n: int) -> None:
        self.left = n
        self.done = asyncio.Event()

    async def __call__(self, ctx: Any, payload: Any) -> Any:
        self.left -= 1
        if not self.left:
            self.done.set()
        return payload


async def _settle(sched: Scheduler, n: int) -> None:
    """After the counter fired: let the last attempts' done callbacks reach the engine."""
    for _ in range(100):
        if (await sched.snapshot()).totals["succeeded"] >= n:
            return
        await asyncio.sleep(0)
    raise AssertionError("not every task completed")


async def _cronoq_enqueue(n: int, slots: int = 64) -> float:
    ex = _Counter(n)
    sched = Scheduler([_pool(ex, slots)])
    await sched.start()
    try:
        enqueue = sched.enqueue
        t0 = time.perf_counter()
        for i in range(n):
            await enqueue(i)
        await ex.done.wait()
        await _settle(sched, n)
        return time.perf_counter() - t0
    finally:
        await sched.shutdown()


async def _cronoq_batch(n: int, chunk: int, slots: int = 64) -> float:
    ex = _Counter(n)
    sched = Scheduler([_pool(ex, slots)])
    await sched.start()
    try:
        t0 = time.perf_counter()
        for lo in range(0, n, chunk):
            await sched.submit_batch([Task(i) for i in range(lo, min(n, lo + chunk))])
        await ex.done.wait()
        await _settle(sched, n)
        return time.perf_counter() - t0
    finally:
        await sched.shutdown()


async def _cronoq_submit(n: int, slots: int = 64) -> float:
    ex = _Counter(n)
    sched = Scheduler([_pool(ex, slots)])
    await sched.start()
    try:
        submit = sched.submit
        t0 = time.perf_counter()
        handles = [await submit(i) for i in range(n)]
        for i, h in enumerate(handles):
            if await h != i:  # pragma: no cover - wrong result
                raise AssertionError("handle returned the wrong result")
        return time.perf_counter() - t0
    finally:
        await sched.shutdown()


def enqueue_rate(n: int) -> float:
    return n / run_async(lambda: _cronoq_enqueue(n))


def batch_rate(n: int, chunk: int) -> float:
    return n / run_async(lambda: _cronoq_batch(n, chunk))


def submit_rate(n: int) -> float:
    return n / run_async(lambda: _cronoq_submit(n))


def bench_e2e(sz: dict[str, int]) -> list[Result]:
    n, chunk, rep = sz["e2e_n"], sz["batch_chunk"], sz["repeat"]
    base, enq, bat = [], [], []
    for _ in range(rep):
        base.append(baseline_counter_rate(n))
        enq.append(enqueue_rate(n))
        bat.append(batch_rate(n, chunk))
    bname = "asyncio create_task + counter/event"
    return [
        Result("e2e", "e2e enqueue tasks/s", median(enq), "tasks/s", median(base), bname, True, T_E2E,
               enq, base, {"n": n, "slots": 64}),
        Result("e2e", f"e2e submit_batch({chunk}) tasks/s", median(bat), "tasks/s", median(base), bname,
               True, T_E2E, bat, base, {"n": n, "chunk": chunk, "slots": 64}),
    ]  # fmt: skip


def bench_submit(sz: dict[str, int]) -> list[Result]:
    n, rep = sz["submit_n"], sz["repeat"]
    base, sub = [], []
    for _ in range(rep):
        base.append(baseline_gather_rate(n))
        sub.append(submit_rate(n))
    return [
        Result("submit", "e2e submit + await handles tasks/s", median(sub), "tasks/s", median(base),
               "asyncio create_task + gather", True, T_SUBMIT, sub, base, {"n": n, "slots": 64}),
    ]  # fmt: skip


# --------------------------------------------------------------------------- named tasks


async def _cronoq_named_submit(n: int, slots: int = 64) -> float:
    """``_cronoq_submit`` through ``cronoq.App``: a named task with two JSON arguments."""
    app = App("bench")

    @app.task(name="bench.item")
    async def item(n: int, sku: str) -> int:
        return n

    async with app.scheduler([app.pool("default", min=slots, max=max(1, slots), autoscale=False)]):
        submit = item.submit
        t0 = time.perf_counter()
        handles = [await submit(i, "sku") for i in range(n)]
        for i, h in enumerate(handles):
            if await h != i:  # pragma: no cover - wrong result
                raise AssertionError("handle returned the wrong result")
        return time.perf_counter() - t0


def named_submit_rate(n: int) -> float:
    return n / run_async(lambda: _cronoq_named_submit(n))


def bench_named(sz: dict[str, int]) -> list[Result]:
    # ABBA pairs, as in bench_resources: a ratio of two close rates. Also CPU seconds of this
    # process per run (time.process_time): on a shared machine other processes' load moves the
    # wall-clock rates far more than it moves the CPU each task costs
    n, rep = sz["submit_n"], 2 * sz["repeat"]
    plain: list[float] = []
    named: list[float] = []
    cpu: dict[bool, list[float]] = {False: [], True: []}
    for i in range(rep):
        for with_names in (False, True) if i % 2 == 0 else (True, False):
            c0 = time.process_time()
            (named if with_names else plain).append(named_submit_rate(n) if with_names else submit_rate(n))
            cpu[with_names].append((time.process_time() - c0) / n)
    cpu_plain, cpu_named = median(cpu[False]), median(cpu[True])
    base = median(plain)
    return [
        Result("named", "e2e named task submit + await handles tasks/s", median(named), "tasks/s", base,
               "plain e2e submit + await handles", True, (1 - T_NAMED_COST) * base, named, plain,
               {"n": n, "slots": 64, "args": "(int, str)", "max_cost": T_NAMED_COST,
                "cost": 1 - median(named) / base if base else None,
                "paired_cost": 1 - median([a / b for a, b in zip(named, plain, strict=True)]),
                "cpu_us_per_task": {"plain": cpu_plain * 1e6, "named": cpu_named * 1e6},
                "cpu_cost": 1 - cpu_plain / cpu_named if cpu_named else None}),
    ]  # fmt: skip


# --------------------------------------------------------------------------- 4. memory


async def _noop_exec(ctx: Any, payload: Any) -> None:
    return None


async def _noop_coro() -> None:
    return None


async def _pending(kind: str, n: int, measure: Callable[[], int]) -> int:
    """Create n pending items of ``kind`` and return the growth of ``measure()`` in bytes."""
    loop = asyncio.get_running_loop()
    keep: list[Any] = []
    sched: Scheduler | None = None
    gate: list[Dep] = []
    if kind in ("enqueue", "submit", "dependent"):
        sched = Scheduler([_pool(_noop_exec, 0)])  # capacity 0: nothing ever runs
        await sched.start()
        gate.append(Dep(await sched.enqueue(None)))  # warm up lazily created state
        if kind == "dependent":
            await sched.enqueue(None, deps=gate)
    else:
        await loop.create_task(_noop_coro())
    gc.collect()
    before = measure()
    if kind == "enqueue":
        assert sched is not None
        for _ in range(n):
            await sched.enqueue(None)
    elif kind == "submit":
        assert sched is not None
        keep = [await sched.submit(None) for _ in range(n)]
    elif kind == "dependent":  # blocked on the gate, which never runs
        assert sched is not None
        for _ in range(n):
            await sched.enqueue(None, deps=gate)
    elif kind == "asyncio":  # fire and forget: referenced by the loop's ready queue only
        for _ in range(n):
            loop.create_task(_noop_coro())  # noqa: RUF006 - measuring the unkept task on purpose
    elif kind == "asyncio_kept":
        keep = [loop.create_task(_noop_coro()) for _ in range(n)]
    else:  # pragma: no cover - caller bug
        raise ValueError(kind)
    gc.collect()
    grown = measure() - before
    if sched is not None:
        snap = await sched.snapshot()
        want = n + (2 if kind == "dependent" else 1)
        if snap.pending != want or snap.running != 0:  # pragma: no cover - something ran
            raise AssertionError(f"expected {want} pending, got {snap.pending}/{snap.running}")
    del keep
    return grown


def memory_per_task(kind: str, mode: str, n: int) -> float:
    """Bytes per pending item, measured in this process (``mode``: trace or rss)."""
    if mode == "trace":
        tracemalloc.start()
        try:
            grown = asyncio.run(_pending(kind, n, lambda: tracemalloc.get_traced_memory()[0]))
        finally:
            tracemalloc.stop()
    elif mode == "rss":
        grown = asyncio.run(_pending(kind, n, rss_bytes))
    else:  # pragma: no cover - caller bug
        raise ValueError(mode)
    return grown / n


def memory_isolated(kind: str, mode: str, n: int) -> float:
    """``memory_per_task`` in a fresh interpreter (clean heap, honest RSS)."""
    out = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), "--memory-child", kind, mode, str(n)],
        check=True,
        capture_output=True,
        text=True,
    )
    return float(json.loads(out.stdout.strip().splitlines()[-1])["bytes_per_task"])


def bench_memory(sz: dict[str, int], isolate: bool = True) -> list[Result]:
    n = sz["memory_n"]
    m = memory_isolated if isolate else memory_per_task
    f = {
        (k, mode): m(k, mode, n)
        for k in ("asyncio", "asyncio_kept", "enqueue", "submit", "dependent")
        for mode in ("trace", "rss")
    }
    out = []
    for kind, base_kind, target, label, bname in (
        ("enqueue", "asyncio", T_MEM_NOHANDLE, "no handle (enqueue)", "pending create_task, not kept"),
        (
            "submit",
            "asyncio_kept",
            T_MEM_HANDLE,
            "with handle (submit)",
            "pending create_task, kept in a list",
        ),
        ("dependent", "asyncio", T_MEM_DEPENDENT, "blocked on a dependency", "pending create_task, not kept"),
    ):
        for mode, mlabel in (("trace", "tracemalloc"), ("rss", "RSS delta")):
            out.append(
                Result(
                    "memory",
                    f"memory/pending task, {label}, {mlabel}",
                    f[(kind, mode)],
                    "bytes/task",
                    f[(base_kind, mode)],
                    bname,
                    False,
                    target if mode == "trace" or kind == "dependent" else None,
                    extra={"n": n, "isolated": isolate},
                )
            )
    return out


# --------------------------------------------------------------------------- 5. latency


async def _cronoq_latency(n: int, interval: float) -> list[float]:
    submitted = [0] * n
    started = [0] * n

    async def run(ctx: Any, i: int) -> None:
        started[i] = time.perf_counter_ns()

    sched = Scheduler([_pool(run, 4)])
    await sched.start()
    try:
        submit = sched.submit
        for i in range(n):
            submitted[i] = time.perf_counter_ns()
            await submit(i)
            await asyncio.sleep(interval)
        await asyncio.sleep(interval)
    finally:
        await sched.shutdown()
    return [(s - t) / 1e6 for s, t in zip(started, submitted)]


async def _asyncio_latency(n: int, interval: float) -> list[float]:
    loop = asyncio.get_running_loop()
    submitted = [0] * n
    started = [0] * n

    async def run(i: int) -> None:
        started[i] = time.perf_counter_ns()

    tasks = []
    for i in range(n):
        submitted[i] = time.perf_counter_ns()
        tasks.append(loop.create_task(run(i)))
        await asyncio.sleep(interval)
    await asyncio.sleep(interval)
    return [(s - t) / 1e6 for s, t in zip(started, submitted)]


def dispatch_latency(n: int, interval: float = 0.001) -> tuple[list[float], list[float]]:
    """(cronoq, asyncio) submit → start latencies in ms."""
    base = run_async(lambda: _asyncio_latency(n, interval))
    lat = run_async(lambda: _cronoq_latency(n, interval))
    return lat, base


def bench_latency(sz: dict[str, int]) -> list[Result]:
    n = sz["latency_n"]
    lat, base = dispatch_latency(n)
    extra = {"n": n, "interval_ms": 1.0, "cronoq_max_ms": max(lat), "asyncio_max_ms": max(base)}
    bname = "asyncio create_task → coroutine start"
    return [
        Result("latency", "dispatch latency p50", percentile(lat, 50), "ms", percentile(base, 50), bname,
               False, T_LAT_P50, extra=extra),
        Result("latency", "dispatch latency p99", percentile(lat, 99), "ms", percentile(base, 99), bname,
               False, T_LAT_P99, extra=extra),
    ]  # fmt: skip


# --------------------------------------------------------------------------- 6. preemption


def _busy(ns: int) -> None:
    end = time.perf_counter_ns() + ns
    while time.perf_counter_ns() < end:
        pass


class _PreemptLog:
    def __init__(self, warm: int, n_high: int) -> None:
        self.warm = warm
        self.n_high = n_high
        self.low_started = 0
        self.warmed = asyncio.Event()
        self.high_start: dict[int, int] = {}
        self.low_during_high = 0
        self.first_high_submit = 0

    def start(self, payload: tuple[str, int]) -> None:
        now = time.perf_counter_ns()
        kind, i = payload
        if kind == "H":
            self.high_start[i] = now
        else:
            self.low_started += 1
            if self.low_started == self.warm:
                self.warmed.set()
            if self.first_high_submit and len(self.high_start) < self.n_high:
                self.low_during_high += 1  # a Low started while some High still waited


async def _cronoq_preempt(n_low: int, n_high: int, work_ns: int) -> tuple[list[float], int]:
    log = _PreemptLog(min(20, n_low), n_high)
    high_left = [n_high]
    high_done = asyncio.Event()

    async def run(ctx: Any, payload: tuple[str, int]) -> None:
        log.start(payload)
        _busy(work_ns)
        if payload[0] == "H":
            high_left[0] -= 1
            if not high_left[0]:
                high_done.set()

    sched = Scheduler([_pool(run, 1)])
    await sched.start()
    try:
        for i in range(n_low):
            await sched.enqueue(("L", i), priority="low")
        await log.warmed.wait()
        submitted = [0] * n_high
        log.first_high_submit = time.perf_counter_ns()
        # (the burst's end is awaited as the PriorityQueue side awaits it, one event set by the
        # last High: awaiting 100 handles one by one costs this loop ~15% more work per attempt
        # that the hand-written side does not do)
        for j in range(n_high):
            submitted[j] = time.perf_counter_ns()
            await sched.enqueue(("H", j), priority="high")
        await high_done.wait()
        log.first_high_submit = 0  # stop counting lows
        waits = [(log.high_start[j] - submitted[j]) / 1e6 for j in range(n_high)]
    finally:
        await sched.shutdown(grace=0)
    return waits, log.low_during_high


async def _asyncio_pq_preempt(n_low: int, n_high: int, work_ns: int) -> tuple[list[float], int]:
    """One worker draining an asyncio.PriorityQueue: the obvious hand-written alternative."""
    log = _PreemptLog(min(20, n_low), n_high)
    q: asyncio.PriorityQueue[tuple[int, int, tuple[str, int]]] = asyncio.PriorityQueue()
    high_left = [n_high]
    high_done = asyncio.Event()

    async def worker() -> None:
        while True:
            _, _, payload = await q.get()
            log.start(payload)
            _busy(work_ns)
            if payload[0] == "H":
                high_left[0] -= 1
                if not high_left[0]:
                    high_done.set()
            await asyncio.sleep(0)  # a task boundary, like one attempt per task

    seq = 0
    for i in range(n_low):
        seq += 1
        q.put_nowait((3, seq, ("L", i)))
    w = asyncio.get_running_loop().create_task(worker())
    await log.warmed.wait()
    submitted = [0] * n_high
    log.first_high_submit = time.perf_counter_ns()
    for j in range(n_high):
        submitted[j] = time.perf_counter_ns()
        seq += 1
        q.put_nowait((1, seq, ("H", j)))
    await high_done.wait()
    log.first_high_submit = 0
    w.cancel()
    return [(log.high_start[j] - submitted[j]) / 1e6 for j in range(n_high)], log.low_during_high


async def _asyncio_fifo_preempt(n_low: int, n_high: int, work_ns: int) -> tuple[list[float], int]:
    """create_task per item behind asyncio.Semaphore(1): FIFO, no priorities (context only)."""
    log = _PreemptLog(min(20, n_low), n_high)
    sem = asyncio.Semaphore(1)
    loop = asyncio.get_running_loop()

    async def run(payload: tuple[str, int]) -> None:
        async with sem:
            log.start(payload)
            _busy(work_ns)
            await asyncio.sleep(0)

    lows = [loop.create_task(run(("L", i))) for i in range(n_low)]
    await log.warmed.wait()
    submitted = [0] * n_high
    highs = []
    log.first_high_submit = time.perf_counter_ns()
    for j in range(n_high):
        submitted[j] = time.perf_counter_ns()
        highs.append(loop.create_task(run(("H", j))))
    await asyncio.gather(*highs)
    log.first_high_submit = 0
    for t in lows:
        t.cancel()
    return [(log.high_start[j] - submitted[j]) / 1e6 for j in range(n_high)], log.low_during_high


def preemption(n_low: int, n_high: int, work_us: int = 100, fifo: bool = True) -> dict[str, Any]:
    work_ns = work_us * 1000
    pq, pq_low = run_async(lambda: _asyncio_pq_preempt(n_low, n_high, work_ns))
    cq, cq_low = run_async(lambda: _cronoq_preempt(n_low, n_high, work_ns))
    out: dict[str, Any] = {"cronoq": cq, "cronoq_lows": cq_low, "pq": pq, "pq_lows": pq_low}
    if fifo:
        ff, ff_low = run_async(lambda: _asyncio_fifo_preempt(n_low, n_high, work_ns))
        out.update(fifo=ff, fifo_lows=ff_low)
    return out


def bench_preempt(sz: dict[str, int]) -> list[Result]:
    n_low, n_high = sz["preempt_low"], sz["preempt_high"]
    r = preemption(n_low, n_high)
    extra = {
        "n_low": n_low,
        "n_high": n_high,
        "work_us": 100,
        "burst": True,
        "lows_started_while_highs_waited": r["cronoq_lows"],
        "pq_lows_started_while_highs_waited": r["pq_lows"],
        "fifo_p50_ms": percentile(r["fifo"], 50),
        "fifo_p99_ms": percentile(r["fifo"], 99),
        "fifo_lows_started_while_highs_waited": r["fifo_lows"],
        "cronoq_max_ms": max(r["cronoq"]),
    }
    bname = "asyncio.PriorityQueue + 1 worker"
    return [
        Result("preempt", "High wait p50 (1 slot, Low backlog)", percentile(r["cronoq"], 50), "ms",
               percentile(r["pq"], 50), bname, False, None, extra=extra),
        Result("preempt", "High wait p99 (1 slot, Low backlog)", percentile(r["cronoq"], 99), "ms",
               percentile(r["pq"], 99), bname, False, T_PREEMPT_P99, extra=extra),
    ]  # fmt: skip


# --------------------------------------------------------------------------- 7. resources


async def _cronoq_enqueue_resources(n: int, slots: int = 64) -> float:
    """``_cronoq_enqueue`` with one permit of a (never exhausted) semaphore per task."""
    ex = _Counter(n)
    sched = Scheduler([_pool(ex, slots)], resources=[Resource.semaphore("db", 1_000_000)])
    await sched.start()
    try:
        enqueue = sched.enqueue
        t0 = time.perf_counter()
        for i in range(n):
            await enqueue(i, resources={"db": 1})
        await ex.done.wait()
        await _settle(sched, n)
        return time.perf_counter() - t0
    finally:
        await sched.shutdown()


def bench_resources(sz: dict[str, int]) -> list[Result]:
    # twice the usual repeats, in ABBA order: the figure is a ratio of two close rates, and the
    # host's drift within a run is of the same size as the cost measured
    n, rep = sz["e2e_n"], 2 * sz["repeat"]
    plain: list[float] = []
    res: list[float] = []
    for i in range(rep):
        for with_res in (False, True) if i % 2 == 0 else (True, False):
            if with_res:
                res.append(n / run_async(lambda: _cronoq_enqueue_resources(n)))
            else:
                plain.append(enqueue_rate(n))
    base = median(plain)
    return [
        Result("resources", "e2e enqueue tasks/s, 1 semaphore permit each", median(res), "tasks/s", base,
               "same e2e enqueue without resources", True, (1 - T_RESOURCES_COST) * base, res, plain,
               {"n": n, "slots": 64, "permits": 1_000_000, "max_cost": T_RESOURCES_COST,
                "cost": 1 - median(res) / base if base else None,
                "paired_cost": 1 - median([r / p for r, p in zip(res, plain, strict=True)])}),
    ]  # fmt: skip


# --------------------------------------------------------------------------- main

BENCHES: dict[str, Callable[[dict[str, int]], list[Result]]] = {
    "engine": bench_engine,
    "e2e": bench_e2e,
    "submit": bench_submit,
    "named": bench_named,
    "memory": bench_memory,
    "latency": bench_latency,
    "preempt": bench_preempt,
    "resources": bench_resources,
}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--quick", action="store_true", help="small sizes, one repeat (smoke run)")
    p.add_argument("--only", choices=GROUPS, action="append", help="run only this group (repeatable)")
    p.add_argument("--json", type=Path, default=DEFAULT_JSON, help=f"output file (default {DEFAULT_JSON})")
    p.add_argument("--repeat", type=int, default=None, help="repeats of the throughput groups (median)")
    p.add_argument("--memory-child", nargs=3, metavar=("KIND", "MODE", "N"), help=argparse.SUPPRESS)
    args = p.parse_args(argv)

    if args.memory_child:
        kind, mode, n = args.memory_child
        print(json.dumps({"bytes_per_task": memory_per_task(kind, mode, int(n))}), flush=True)
        os._exit(0)  # skip tearing down 200k objects

    sz = dict(SIZES["quick" if args.quick else "full"])
    if args.repeat is not None:
        sz["repeat"] = max(1, args.repeat)
    machine = machine_info()
    machine["cronoq"] = source_info()
    load = ", ".join(f"{x:.2f}" for x in machine["loadavg"])
    print(f"cronoq throughput benchmark ({'quick' if args.quick else 'full'})")
    print(
        f"load average: {load}   cpus: {machine['cpu_count']} (usable {machine['affinity']})   "
        f"python {machine['python']}   loop {machine['event_loop']}"
    )
    src = machine["cronoq"]
    print(f"cronoq from {src['path']} (commit {src['commit']}, uncommitted src changes: {src['dirty']})")
    print(f"sizes: {sz}")
    results: list[Result] = []
    t_start = time.perf_counter()
    for name in args.only or GROUPS:
        t0 = time.perf_counter()
        print(f"\n[{name}]", flush=True)
        got = BENCHES[name](sz)
        for r in got:
            print(describe(r), flush=True)
        print(f"  ({time.perf_counter() - t0:.1f} s)")
        results.extend(got)
    with contextlib.suppress(OSError):
        machine["loadavg_end"] = list(os.getloadavg())
    print("\nsummary (ratio = value / baseline; throughput: higher is better, latency/memory: lower)")
    print(table(results))
    print(f"\nload average at end: {', '.join(f'{x:.2f}' for x in machine.get('loadavg_end', []))}")
    print(f"total {time.perf_counter() - t_start:.1f} s")
    write_json(args.json, machine, {"sizes": sz, "quick": args.quick, "only": args.only}, results)
    print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
