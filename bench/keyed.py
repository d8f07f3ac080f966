"""cronoq keyed-resources benchmark (docs/how-to/keyed-limits.md): every figure beside a
baseline from the same run.

Run ``python bench/keyed.py`` (``--quick`` for a smoke-sized run, ``--json PATH`` to choose the
output file; default ``bench/results/keyed.json``).

Figures:

``per-key semaphore``
    End-to-end ``await sched.enqueue(i, resources={"customer:<i % keys>": 1})`` of ``n`` no-op
    tasks over ``keys`` keys of ``Resource.semaphore("customer", 2, per_key=True)`` (64 slots),
    against the same enqueue loop without the resource: pairs in ABBA order, median of the
    rates.  Target: at least 0.8 × the baseline.
``stacked per-key semaphore + token bucket``
    As above, each task also taking one token of its key's bucket
    (``Resource.token_bucket("api", 1e9, 1000, per_key=True)``: a rate that never binds).
    Target: at least 0.7 × the baseline.
``one unkeyed semaphore``
    Context, no target: the same loop with ``resources={"db": 1}`` (one unkeyed semaphore that
    never binds): what taking any resource costs end to end.
``uncontended-key dispatch p99``
    The engine (``Core`` under virtual time) with 10,000 tasks of one hot key waiting on its
    permit (one running): the wall time of ``submit`` + ``tick`` until an uncontended key's
    task is dispatched, p99 over ``probes`` probes, against the same probes without the hot
    key; the setup's objects are frozen out of the collector first (``gc.freeze``, as
    ``cronoq serve`` does after start).  Target: at most 1.5 × the baseline.
``bytes per idle key``
    tracemalloc bytes per key of ``N`` keys used once and now idle (the unit, its dict entry
    and its name), for a per-key semaphore and a per-key token bucket.  Target: at most 300 B.

The throughput figures are tasks per CPU second of this (single-threaded) process
(``time.process_time``): the loop is CPU-bound in one process, so CPU time measures the same work
as wall time on a quiet machine, and on a shared one it leaves out the time other processes took
(wall-time ratios swung from 0.45 to 0.84 between runs at load 8); the wall-time rates and ratios
are kept in ``extra.wall_rates`` / ``extra.wall_ratios``.  No timing benchmark is fully
trustworthy on a loaded machine: the load average is printed and kept in the JSON beside every
ratio.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import os
import sys
import time
import tracemalloc
from pathlib import Path
from typing import Any

_HERE = Path(__file__).resolve().parent
if str(_HERE) not in sys.path:
    sys.path.append(str(_HERE))  # (as a script it is sys.path[0] already)

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

from cronoq import Pool, Resource, Scheduler  # noqa: E402
from cronoq.engine.actions import Dispatch  # noqa: E402
from cronoq.engine.config import CoreConfig, PoolConfig  # noqa: E402
from cronoq.engine.core import Core  # noqa: E402
from cronoq.engine.keyed import Keyed  # noqa: E402
from cronoq.engine.model import TaskOptions  # noqa: E402
from cronoq.engine.time import NS  # noqa: E402

DEFAULT_JSON = _HERE / "results" / "keyed.json"
SIZES = {
    "full": {"n": 100_000, "keys": 10_000, "repeat": 2, "hot": 10_000, "probes": 2_000, "idle": 100_000},
    "quick": {"n": 2_000, "keys": 200, "repeat": 1, "hot": 500, "probes": 100, "idle": 2_000},
}
SLOTS = 64


# ------------------------------------------------------------------ end-to-end throughput


def _resources(mode: str) -> list[Resource]:
    out = []
    if mode in ("sem", "stacked"):
        out.append(Resource.semaphore("customer", 2, per_key=True))
    if mode == "stacked":
        out.append(Resource.token_bucket("api", 1e9, 1000, per_key=True))
    if mode == "db":
        out.append(Resource.semaphore("db", 1_000_000))
    return out


async def _enqueue_run(mode: str, n: int, keys: int) -> tuple[float, float]:
    """Wall and CPU seconds to enqueue and run ``n`` no-op tasks with the resources of ``mode``."""
    import asyncio

    left = [n]
    done = asyncio.Event()

    async def noop(ctx: Any, payload: Any) -> None:
        left[0] -= 1
        if not left[0]:
            done.set()

    pool = Pool("default", noop, min=SLOTS, max=SLOTS, autoscale=False)
    sched = Scheduler([pool], resources=_resources(mode))
    await sched.start()
    try:
        enqueue = sched.enqueue
        t0, c0 = time.perf_counter(), time.process_time()
        if mode == "none":
            for i in range(n):
                await enqueue(i)
        elif mode == "db":
            for i in range(n):
                await enqueue(i, resources={"db": 1})
        elif mode == "sem":
            for i in range(n):
                await enqueue(i, resources={f"customer:{i % keys}": 1})
        else:
            for i in range(n):
                k = i % keys
                await enqueue(i, resources={f"customer:{k}": 1, f"api:{k}": 1})
        await done.wait()
        return time.perf_counter() - t0, time.process_time() - c0
    finally:
        await sched.shutdown()


def bench_throughput(sz: dict[str, int]) -> list[Result]:
    n, keys, rep = sz["n"], sz["keys"], 2 * sz["repeat"]
    rates: dict[str, list[float]] = {"none": [], "db": [], "sem": [], "stacked": []}
    wall: dict[str, list[float]] = {"none": [], "db": [], "sem": [], "stacked": []}
    for i in range(rep):
        order = ("none", "db", "sem", "stacked") if i % 2 == 0 else ("stacked", "sem", "db", "none")
        for mode in order:
            w, c = run_async(lambda mode=mode: _enqueue_run(mode, n, keys))
            rates[mode].append(n / c)
            wall[mode].append(n / w)
    base = median(rates["none"])
    info = {
        "n": n,
        "keys": keys,
        "slots": SLOTS,
        "unkeyed_semaphore_rate": median(rates["db"]),
        "wall_rates": {m: median(v) for m, v in wall.items()},
        "wall_ratios": {m: median(v) / median(wall["none"]) for m, v in wall.items()},
    }
    return [
        Result("keyed", f"e2e tasks/CPU-s, per-key semaphore of 2 over {keys:,} keys", median(rates["sem"]),
               "tasks/CPU-s", base, "same enqueue without the resource", True, 0.8 * base, rates["sem"],
               rates["none"], info),
        Result("keyed", "e2e tasks/CPU-s, per-key semaphore + per-key token bucket", median(rates["stacked"]),
               "tasks/CPU-s", base, "same enqueue without the resources", True, 0.7 * base, rates["stacked"],
               rates["none"], info),
        Result("keyed", "e2e tasks/CPU-s, one unkeyed semaphore (context: the cost of any resource)",
               median(rates["db"]), "tasks/CPU-s", base, "same enqueue without the resource", True, None,
               rates["db"], rates["none"], info),
    ]  # fmt: skip


# ------------------------------------------------------------------ hot key, engine latency


def _probe_latencies(hot: int, probes: int) -> list[float]:
    """Wall ms of submit + tick until an uncontended key's task is dispatched (``hot`` tasks of
    one key waiting meanwhile when ``hot`` > 0)."""
    cfg = CoreConfig(
        [PoolConfig("default", min=4, max=4, initial=4, autoscale=False)],
        resources=[Resource.semaphore("customer", 1, per_key=True)],
    )
    core = Core(cfg)
    now = 0
    for _ in range(hot):
        core.submit(now, TaskOptions(resources={"customer:hot": 1}), None)
    core.tick(now)  # the first hot task runs (and is never completed), the others wait
    core.drain_actions()
    out: list[float] = []
    gc.collect()
    gc.freeze()  # (as cronoq serve does after start: the setup's objects are not rescanned)
    for i in range(probes):
        now += 1_000
        opts = TaskOptions(resources={f"customer:cold-{i}": 1})
        t0 = time.perf_counter()
        core.submit(now, opts, None)
        core.tick(now)
        dt = time.perf_counter() - t0
        acts = core.drain_actions()
        lease = next(a.lease for a in acts if type(a) is Dispatch)
        core.complete(now, lease)
        core.drain_actions()
        out.append(dt * 1e3)
    gc.unfreeze()
    return out


def bench_hot_key(sz: dict[str, int]) -> list[Result]:
    hot: list[float] = []
    base: list[float] = []
    for i in range(2 * sz["repeat"]):
        for with_hot in (True, False) if i % 2 == 0 else (False, True):
            lat = _probe_latencies(sz["hot"] if with_hot else 0, sz["probes"])
            (hot if with_hot else base).extend(lat)
    p_hot, p_base = percentile(hot, 99), percentile(base, 99)
    return [
        Result("keyed", f"uncontended-key dispatch p99, {sz['hot']:,} tasks waiting on a hot key", p_hot,
               "ms", p_base, "same probes without the hot key", False, 1.5 * p_base, [], [],
               {"p50": percentile(hot, 50), "base_p50": percentile(base, 50), "probes": len(hot)}),
    ]  # fmt: skip


# ------------------------------------------------------------------ memory per idle key


def bytes_per_idle_key(kind: str, n: int) -> float:
    cfg = (
        Resource.semaphore("customer", 2, per_key=True)
        if kind == "semaphore"
        else Resource.token_bucket("customer", 5.0, 3, per_key=True)
    )
    kr = Keyed(cfg, 0)
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    t = 1_000 * NS
    for i in range(n):
        u = kr.ensure(f"customer:{i}", t + i)
        u.take(1, t + i + 1)  # used once, then idle
        u.give_back(1)
    after = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    return (after - before) / n


def bench_memory(sz: dict[str, int]) -> list[Result]:
    return [
        Result("keyed", f"bytes per idle key, per-key {kind}", bytes_per_idle_key(kind, sz["idle"]), "B",
               300.0, "the target", False, 300.0, [], [], {"keys": sz["idle"]})
        for kind in ("semaphore", "token_bucket")
    ]  # fmt: skip


# ------------------------------------------------------------------ main


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--quick", action="store_true", help="small sizes, one repeat (smoke run)")
    p.add_argument("--json", type=Path, default=DEFAULT_JSON, help=f"output file (default {DEFAULT_JSON})")
    args = p.parse_args(argv)
    return run(dict(SIZES["quick" if args.quick else "full"]), args.json, args.quick)


def run(sz: dict[str, int], json_path: Path, quick: bool = False) -> int:
    machine = machine_info()
    machine["cronoq"] = source_info()
    print(f"cronoq keyed-resources benchmark ({'quick' if quick else 'full'}); sizes {sz}")
    print(f"load average: {', '.join(f'{x:.2f}' for x in machine['loadavg'])}   cpus: {machine['cpu_count']}")
    results: list[Result] = []
    for bench in (bench_memory, bench_hot_key, bench_throughput):
        for r in bench(sz):
            print(describe(r), flush=True)
            results.append(r)
    with contextlib.suppress(OSError):
        machine["loadavg_end"] = list(os.getloadavg())
    print("\nsummary (ratio = value / baseline)")
    print(table(results))
    print(f"load average at end: {', '.join(f'{x:.2f}' for x in machine.get('loadavg_end', []))}")
    write_json(json_path, machine, {"sizes": sz, "quick": quick}, results)
    print(f"wrote {json_path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
