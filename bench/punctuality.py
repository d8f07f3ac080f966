"""cronoq punctuality and pipeline benchmark: every figure beside a baseline from the same run.

Run ``python bench/punctuality.py`` (``--quick`` for a smoke-sized run, ``--only NAME`` for one
group, ``--json PATH`` to choose the output file; default ``bench/results/punctuality.json``).

Groups (``--only``):

``fixed``
    N fixed-start tasks (``start_at`` Unix seconds, spread uniformly at random over S seconds,
    tolerance 50 ms) on one pool that is also saturated by a background load: a backlog of
    200 ms tasks larger than the pool can finish, so every slot not held for a fixed start
    is busy.  Lateness = actual executor start − ``start_at``; reported p50/p99/max and the
    hit rate (started within tolerance).  Baseline: bare asyncio, ``loop.call_at`` starting
    each coroutine at its instant, under the same background load (create_task behind a
    semaphore of the same width).
``dag``
    A DAG of N nodes in layers of W with fan-in F (every node depends on F nodes of the layer
    before) submitted as one ``submit_batch``: submit time and total run time (submit → last
    completion), beside the same number of independent tasks submitted as one
    ``submit_batch`` in the same run.  Target: dependency bookkeeping adds ≤ 30 % run time.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import random
import sys
import time
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
    run_async,
    source_info,
    table,
    write_json,
)

from cronoq import Pool, Scheduler, Task  # noqa: E402

DEFAULT_JSON = _HERE / "results" / "punctuality.json"
GROUPS = ("fixed", "dag")

# Targets (issues; docs/benchmarks.md#targets: measured here, never by timed unit tests)
T_HIT_RATE = 1.0  # fraction started within tolerance
T_LATE_P99 = 5.0  # ms
T_DAG_OVERHEAD = 1.30  # DAG run time / independent run time

SIZES: dict[str, dict[str, Any]] = {
    "full": {
        "fixed_n": 1000,
        "fixed_span": 10.0,
        "fixed_slots": 256,
        "tolerance": 0.05,
        "bg_task_s": 0.2,
        "dag_n": 10_000,
        "dag_width": 100,
        "dag_fan_in": 3,
        "dag_slots": 64,
        "repeat": 6,  # even: ABBA pairs
    },
    "quick": {
        "fixed_n": 200,
        "fixed_span": 3.0,
        "fixed_slots": 128,
        "tolerance": 0.05,
        "bg_task_s": 0.2,
        "dag_n": 2000,
        "dag_width": 50,
        "dag_fan_in": 3,
        "dag_slots": 64,
        "repeat": 1,
    },
}

LEAD = 1.5  # seconds between submitting the fixed starts and the first of them


# --------------------------------------------------------------------------- 1. fixed starts


def _instants(n: int, span: float, t0: float, seed: int = 7) -> list[float]:
    rng = random.Random(seed)
    return sorted(t0 + rng.uniform(0.0, span) for _ in range(n))


def _bg_count(slots: int, span: float, bg_s: float) -> int:
    """A backlog the pool cannot finish during the run: it stays saturated throughout."""
    return int(slots * (span + LEAD + 2.0) / bg_s) + slots


async def _cronoq_fixed(sz: dict[str, Any]) -> dict[str, Any]:
    n, span, slots, tol, bg_s = (
        sz["fixed_n"],
        sz["fixed_span"],
        sz["fixed_slots"],
        sz["tolerance"],
        sz["bg_task_s"],
    )
    started: dict[int, float] = {}

    async def run(ctx: Any, payload: Any) -> None:
        if type(payload) is int:  # a fixed-start task
            started[payload] = time.time()
            return
        await asyncio.sleep(bg_s)

    sched = Scheduler([Pool("default", run, min=slots, max=slots, autoscale=False)])
    await sched.start()
    try:
        t0 = time.time() + LEAD
        at = _instants(n, span, t0)
        for _ in range(_bg_count(slots, span, bg_s)):
            await sched.enqueue(None)
        handles = [
            await sched.submit(i, start_at=at[i], tolerance=tol, duration_hint=0.001) for i in range(n)
        ]
        busy_samples: list[int] = []
        ready_samples: list[int] = []

        async def sample() -> None:
            while True:
                p = (await sched.snapshot()).pool("default")
                assert p is not None
                busy_samples.append(p.busy)
                ready_samples.append(p.ready)
                await asyncio.sleep(0.25)

        sampler = asyncio.get_running_loop().create_task(sample())
        outcomes = await asyncio.gather(*(h.result() for h in handles), return_exceptions=True)
        sampler.cancel()
        snap = await sched.snapshot()
        pool = snap.pool("default")
        assert pool is not None
    finally:
        await sched.shutdown(grace=0)
    late = [(started[i] - at[i]) * 1000 for i in range(n) if i in started]
    failed = sum(1 for o in outcomes if isinstance(o, BaseException))
    hits = sum(1 for x in late if x <= tol * 1000)
    return {
        "late_ms": late,
        "hit_rate": hits / n,
        "engine_hit_rate": pool.fixed_start_hit_rate,
        "failed": failed,
        "missed": snap.totals["missed"],
        "min_busy": min(busy_samples) if busy_samples else 0,
        "min_ready_backlog": min(ready_samples) if ready_samples else 0,
        "early": sum(1 for x in late if x < 0),
    }


async def _asyncio_fixed(sz: dict[str, Any]) -> dict[str, Any]:
    """Bare asyncio: loop.call_at starts each coroutine; the same background load beside it."""
    n, span, slots, tol, bg_s = (
        sz["fixed_n"],
        sz["fixed_span"],
        sz["fixed_slots"],
        sz["tolerance"],
        sz["bg_task_s"],
    )
    loop = asyncio.get_running_loop()
    started: dict[int, float] = {}
    done = asyncio.Event()
    left = [n]
    sem = asyncio.Semaphore(slots)

    async def bg() -> None:
        async with sem:
            await asyncio.sleep(bg_s)

    async def fixed(i: int) -> None:
        started[i] = time.time()
        left[0] -= 1
        if not left[0]:
            done.set()

    bgs = [loop.create_task(bg()) for _ in range(_bg_count(slots, span, bg_s))]
    t0 = time.time() + LEAD
    at = _instants(n, span, t0)
    offset = loop.time() - time.time()
    for i in range(n):
        loop.call_at(at[i] + offset, lambda i=i: loop.create_task(fixed(i)))
    await done.wait()
    for t in bgs:
        t.cancel()
    await asyncio.gather(*bgs, return_exceptions=True)
    late = [(started[i] - at[i]) * 1000 for i in range(n)]
    return {"late_ms": late, "hit_rate": sum(1 for x in late if x <= tol * 1000) / n}


def bench_fixed(sz: dict[str, Any]) -> list[Result]:
    base = run_async(lambda: _asyncio_fixed(sz))
    r = run_async(lambda: _cronoq_fixed(sz))
    late, blate = r["late_ms"], base["late_ms"]
    extra = {
        "n": sz["fixed_n"],
        "span_s": sz["fixed_span"],
        "slots": sz["fixed_slots"],
        "tolerance_ms": sz["tolerance"] * 1000,
        "bg_task_s": sz["bg_task_s"],
        "bg_tasks": _bg_count(sz["fixed_slots"], sz["fixed_span"], sz["bg_task_s"]),
        "engine_fixed_start_hit_rate": r["engine_hit_rate"],
        "failed_or_missed": r["failed"],
        "started_early": r["early"],
        "min_busy_slots_sampled": r["min_busy"],
        "min_ready_backlog_sampled": r["min_ready_backlog"],
        "baseline_hit_rate": base["hit_rate"],
    }
    bname = "asyncio loop.call_at + create_task"
    mk = lambda name, v, b, target, unit="ms", hib=False: Result(  # noqa: E731
        "fixed", name, v, unit, b, bname, hib, target, extra=extra
    )
    return [
        mk(
            "fixed-start hit rate (within tolerance)",
            r["hit_rate"],
            base["hit_rate"],
            T_HIT_RATE,
            "ratio",
            True,
        ),
        mk("fixed-start lateness p50", percentile(late, 50), percentile(blate, 50), None),
        mk("fixed-start lateness p99", percentile(late, 99), percentile(blate, 99), T_LATE_P99),
        mk("fixed-start lateness max", max(late) if late else 0.0, max(blate), None),
    ]


# --------------------------------------------------------------------------- 2. DAG


def dag_edges(n: int, width: int, fan_in: int, seed: int = 11) -> list[tuple[int, list[int]]]:
    """Layers of ``width`` nodes; every node after the first layer depends on ``fan_in`` nodes
    of the previous layer (the first ``fan_in`` a fixed spread, so every parent has children).
    Returned as ``(node, parents)`` in a shuffled order: forward references must work, and
    the order must not help."""
    rng = random.Random(seed)
    out: list[tuple[int, list[int]]] = []
    for i in range(n):
        layer, j = divmod(i, width)
        if layer == 0:
            out.append((i, []))
            continue
        prev = range((layer - 1) * width, min(layer * width, n))
        parents = {prev[j % len(prev)]}
        while len(parents) < min(fan_in, len(prev)):
            parents.add(rng.choice(prev))
        out.append((i, sorted(parents)))
    rng.shuffle(out)
    return out


def dag_tasks(n: int, width: int, fan_in: int, seed: int = 11, *, scatter: bool = False) -> list[Task]:
    """The DAG as Task objects, built in batch order the way a program builds a pipeline (and
    the way the baseline's tasks are built).  ``scatter=True`` builds them in node order and
    then shuffles the list: the same batch, but every per-task step of the submit walks
    memory in random order (a measure of cache misses, not of bookkeeping; reported apart)."""
    edges = dag_edges(n, width, fan_in, seed)
    if scatter:
        edges.sort()

    def make(i: int, parents: list[int]) -> Task:
        return Task(i, key=f"n{i}", after=[f"n{p}" for p in parents]) if parents else Task(i, key=f"n{i}")

    tasks = [make(i, ps) for i, ps in edges]
    if scatter:
        random.Random(seed).shuffle(tasks)
    return tasks


class _Counter:
    def __init__(self, n: int) -> None:
        self.left = n
        self.done = asyncio.Event()

    async def __call__(self, ctx: Any, payload: Any) -> Any:
        self.left -= 1
        if not self.left:
            self.done.set()
        return payload


async def _run_batch(tasks: list[Task], slots: int) -> tuple[float, float]:
    """(submit seconds, total seconds submit → last completion) for one submit_batch."""
    ex = _Counter(len(tasks))
    sched = Scheduler([Pool("default", ex, min=slots, max=slots, autoscale=False)])
    await sched.start()
    try:
        t0 = time.perf_counter()
        await sched.submit_batch(tasks)
        t1 = time.perf_counter()
        await ex.done.wait()
        for _ in range(100):  # the last done callbacks reach the engine
            if (await sched.snapshot()).totals["succeeded"] >= len(tasks):
                break
            await asyncio.sleep(0)
        t2 = time.perf_counter()
        snap = await sched.snapshot()
        if snap.totals["succeeded"] != len(tasks):  # pragma: no cover - engine bug
            raise AssertionError(f"only {snap.totals['succeeded']} of {len(tasks)} succeeded")
        return t1 - t0, t2 - t0
    finally:
        await sched.shutdown()


def bench_dag(sz: dict[str, Any]) -> list[Result]:
    n, width, fan_in, slots, rep = (
        sz["dag_n"],
        sz["dag_width"],
        sz["dag_fan_in"],
        sz["dag_slots"],
        sz["repeat"],
    )
    dag_sub, dag_tot, ind_sub, ind_tot, key_tot, sc_tot = [], [], [], [], [], []
    builders: dict[str, Callable[[], list[Task]]] = {
        "independent": lambda: [Task(i) for i in range(n)],
        "dag": lambda: dag_tasks(n, width, fan_in),
        "keyed": lambda: [Task(i, key=f"n{i}") for i in range(n)],
        "scattered": lambda: dag_tasks(n, width, fan_in, scatter=True),
    }
    for r in range(rep):
        # ABBA order: this host drifts between fast and slow spells lasting seconds; alternating
        # which run of a pair goes first keeps that drift out of the paired ratios
        order = list(builders) if r % 2 == 0 else list(reversed(builders))
        for name in order:
            batch = builders[name]()  # built outside the timed region, like the baseline
            s, t = run_async(lambda batch=batch: _run_batch(batch, slots))
            del batch
            if name == "independent":
                ind_sub.append(s * 1000)
                ind_tot.append(t * 1000)
            elif name == "dag":
                dag_sub.append(s * 1000)
                dag_tot.append(t * 1000)
            elif name == "keyed":
                key_tot.append(t * 1000)
            else:
                sc_tot.append(t * 1000)
    paired = median([d / i for d, i in zip(dag_tot, ind_tot, strict=True)])
    extra = {
        "n": n,
        "width": width,
        "layers": -(-n // width),
        "fan_in": fan_in,
        "edges": (n - width) * fan_in,
        "slots": slots,
        "repeat": rep,
        "independent_with_keys_total_ms": median(key_tot),
        "dag_scattered_total_ms": median(sc_tot),
        "dag_scattered_ratio": median(sc_tot) / median(ind_tot),
        "paired_ratio": paired,
        "paired_ratios": [d / i for d, i in zip(dag_tot, ind_tot, strict=True)],
    }
    bname = f"{n} independent tasks, one submit_batch"
    ratio = paired  # the median of same-repeat ratios (robust to the host's drift)
    return [
        Result("dag", f"DAG submit_batch({n}) submit time", median(dag_sub), "ms", median(ind_sub), bname,
               False, None, dag_sub, ind_sub, extra),
        Result("dag", f"DAG ({n} nodes) total run time", median(dag_tot), "ms", median(ind_tot), bname,
               False, None, dag_tot, ind_tot, extra),
        Result("dag", "DAG run time / independent run time (median of paired ratios)", ratio, "x", 1.0,
               "no overhead", False,
               T_DAG_OVERHEAD, extra={**extra, "target": "dependency bookkeeping adds <= 30%"}),
        Result("dag", "DAG built in node order, then shuffled: run time / independent",
               median(sc_tot) / median(ind_tot), "x", 1.0, "no overhead", False, None, sc_tot, ind_tot,
               extra),
    ]  # fmt: skip


# --------------------------------------------------------------------------- main

BENCHES: dict[str, Callable[[dict[str, Any]], list[Result]]] = {
    "fixed": bench_fixed,
    "dag": bench_dag,
}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--quick", action="store_true", help="small sizes, one repeat (smoke run)")
    p.add_argument("--only", choices=GROUPS, action="append", help="run only this group (repeatable)")
    p.add_argument("--json", type=Path, default=DEFAULT_JSON, help=f"output file (default {DEFAULT_JSON})")
    p.add_argument("--repeat", type=int, default=None, help="repeats of the DAG group (median)")
    args = p.parse_args(argv)
    sz = dict(SIZES["quick" if args.quick else "full"])
    if args.repeat is not None:
        sz["repeat"] = max(1, args.repeat)
    return run(sz, args.only or list(GROUPS), args.json, args.quick)


def run(sz: dict[str, Any], groups: list[str], json_path: Path, quick: bool = False) -> int:
    machine = machine_info()
    machine["cronoq"] = source_info()
    load = ", ".join(f"{x:.2f}" for x in machine["loadavg"])
    print(f"cronoq punctuality benchmark ({'quick' if quick else 'full'})")
    print(
        f"load average: {load}   cpus: {machine['cpu_count']} (usable {machine['affinity']})   "
        f"python {machine['python']}   loop {machine['event_loop']}"
    )
    src = machine["cronoq"]
    print(f"cronoq from {src['path']} (commit {src['commit']}, uncommitted src changes: {src['dirty']})")
    print(f"sizes: {sz}")
    results: list[Result] = []
    t_start = time.perf_counter()
    for name in groups:
        t0 = time.perf_counter()
        print(f"\n[{name}]", flush=True)
        got = BENCHES[name](sz)
        for r in got:
            print(describe(r), flush=True)
        print(f"  ({time.perf_counter() - t0:.1f} s)")
        results.extend(got)
    with contextlib.suppress(OSError):
        machine["loadavg_end"] = list(os.getloadavg())
    print("\nsummary (ratio = value / baseline; lower is better except the hit rate)")
    print(table(results))
    print(f"\nload average at end: {', '.join(f'{x:.2f}' for x in machine.get('loadavg_end', []))}")
    print(f"total {time.perf_counter() - t_start:.1f} s")
    write_json(json_path, machine, {"sizes": sz, "quick": quick, "only": groups}, results)
    print(f"wrote {json_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
