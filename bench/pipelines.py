"""cronoq pipelines benchmark: what passing outputs along edges costs
(docs/concepts/dependencies.md#outputs-on-edges; targets from issue #29).

Run ``python bench/pipelines.py`` (``--quick`` for a smoke-sized run, ``--json PATH`` for the
output file, default ``bench/results/pipelines.json``).  Everything runs in this process, on an
in-process ``app.scheduler()`` (no store), and every figure is a same-run ratio: each variant
beside its baseline, interleaved in ABBA order, the median of the pairs.

``fan-out/fan-in``
    one root, ``fan`` children each taking the root's output (``root.output``), one sink taking
    every child's output (``[c.output for c in children]``), submitted as one batch: nodes per
    second from the submit to the sink's result.  Baseline: the same graph with plain ``after``
    edges and constant arguments.  Target: at least 0.8x the baseline.
``chain``
    ``chain`` steps, each taking the previous step's output: the extra time per step over the
    same chain with plain ``after`` edges.  Target: at most 50 us per step.
``pinned output``
    the memory pinning adds per parent output (engine only, ``tracemalloc``): ``n`` succeeded
    parents with ``size``-byte outputs, each the parent of a blocked dependent, with the
    dependents holding them against the same edges with nothing held; bytes per pin beyond the
    output, with the parent still retained.  Target: at most 200 B.  ``extra`` also has the
    cost of a parent kept *past* retention because a dependent still needs it (its record).
Timing figures are only meaningful on a quiet machine: the load average is printed, and each
timing figure also has its CPU-time form (``extra``: this process's CPU seconds, median per
variant), which other load on the machine disturbs much less than the wall clock.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import sys
import time
import tracemalloc
from pathlib import Path
from typing import Any

_HERE = Path(__file__).resolve().parent
if str(_HERE) not in sys.path:
    sys.path.append(str(_HERE))
try:  # the installed (editable) cronoq, or whatever PYTHONPATH points at; else this checkout
    import cronoq as _cronoq  # noqa: F401
except ImportError:  # pragma: no cover - not installed
    sys.path.insert(0, str(_HERE.parent / "src"))

from _common import Result, describe, machine_info, median, source_info, table, write_json  # noqa: E402

import cronoq  # noqa: E402

DEFAULT_JSON = _HERE / "results" / "pipelines.json"
SIZES: dict[str, dict[str, Any]] = {
    "full": {"fan": 10_000, "chain": 1_000, "pairs": 3, "pins": 20_000, "size": 1_000},
    "quick": {"fan": 500, "chain": 100, "pairs": 1, "pins": 2_000, "size": 1_000},
}

app = cronoq.App("bench")


@app.task(name="bench.inc")
async def inc(x: int) -> int:
    return x + 1


@app.task(name="bench.total")
async def total(values: list[int]) -> int:
    return sum(values)


def fan_specs(n: int, outputs: bool, run: int) -> list[cronoq.Task]:
    if outputs:
        root = inc.spec(0)
        kids = [inc.spec(root.output) for _ in range(n)]
        return [root, *kids, total.spec([k.output for k in kids])]
    r = f"r{run}"
    keys = [f"m{run}-{i}" for i in range(n)]
    kids = [inc.options(key=k, after=r).spec(0) for k in keys]
    return [inc.options(key=r).spec(0), *kids, total.options(after=keys).spec([1] * n)]


def chain_specs(n: int, outputs: bool, run: int) -> list[cronoq.Task]:
    if outputs:
        out = [inc.spec(0)]
        for _ in range(n - 1):
            out.append(inc.spec(out[-1].output))
        return out
    return [inc.options(key=f"c{run}-{i}", after=f"c{run}-{i - 1}" if i else None).spec(i) for i in range(n)]


#: CPU seconds (this process) of each run, beside the wall-clock samples: on a shared machine
#: the CPU time is what the other load disturbs least
CPU: dict[bool, list[float]] = {True: [], False: []}


async def timed(make: Any, n: int, outputs: bool, run: int) -> float:
    """Seconds from building and submitting the batch to the last node's result (its CPU
    seconds go to ``CPU``)."""
    async with app.scheduler(pools=[app.pool("default", max=64)]):
        t0, c0 = time.perf_counter(), time.process_time()
        handles = await app.submit_batch(make(n, outputs, run))
        await handles[-1]
        CPU[outputs].append(time.process_time() - c0)
        return time.perf_counter() - t0


async def pairs(make: Any, n: int, k: int) -> tuple[list[float], list[float]]:
    with_, without = [], []
    CPU[True].clear()
    CPU[False].clear()
    run = 0
    for _ in range(k):  # ABBA
        for outputs in (True, False, False, True):
            run += 1
            (with_ if outputs else without).append(await timed(make, n, outputs, run))
    return with_, without


def cpu_extra(n: int) -> dict[str, Any]:
    """What the CPU time of the last :func:`pairs` says: nodes per CPU second, each variant."""
    w, wo = median(CPU[True]), median(CPU[False])
    return {"cpu_s_with": w, "cpu_s_without": wo, "cpu_ratio": wo / w if w else float("nan"), "n": n}


def pin_cost(n: int, size: int, retention_ns: int) -> float:
    """What pinning adds per parent: ``n`` succeeded parents with ``size``-byte outputs, each
    the parent of a blocked dependent, measured (``tracemalloc``) with the dependents holding
    their parents and again with the engine's ``bind_submitted`` switched off (the same edges,
    nothing held); per parent, less ``size`` when only the pin kept the output (past
    retention).  Engine only."""
    from cronoq.engine import core as core_module
    from cronoq.engine.config import CoreConfig, PoolConfig
    from cronoq.engine.model import ON_SUCCESS, TaskOptions

    def measure() -> int:
        gc.collect()
        tracemalloc.start()
        pool = PoolConfig("p", min=n + 1, max=n + 1, initial=n + 1, autoscale=False)
        core = core_module.Core(CoreConfig([pool], retention=retention_ns))
        opts = TaskOptions(pool="p")
        gate, _ = core.submit(0, opts, None, "gate")  # never ends: the dependents stay blocked
        parents = [core.submit(0, opts, None)[0] for _ in range(n)]
        for pid in parents:
            core.submit(0, opts, None, None, None, None, [("gate", ON_SUCCESS), (pid, ON_SUCCESS)])
        core.tick(0)
        for t in list(core.leases.values()):
            if t.id != gate:
                core.complete(1, t.lease, bytes(size))
        core.drain_actions()
        core.prune(2)
        gc.collect()
        used = tracemalloc.get_traced_memory()[0]
        tracemalloc.stop()
        return used

    held = measure()
    real = core_module.bind_submitted
    core_module.bind_submitted = lambda *_: None  # type: ignore[assignment]
    try:
        bare = measure()
    finally:
        core_module.bind_submitted = real
    return (held - bare) / n - (size if retention_ns == 0 else 0)


async def bench(sz: dict[str, Any]) -> list[Result]:
    out = []
    w, wo = await pairs(fan_specs, sz["fan"], sz["pairs"])
    nodes = sz["fan"] + 2
    res = Result(
        "pipelines", "fan-out/fan-in with outputs", nodes / median(w), "nodes/s", nodes / median(wo),
        "plain after edges", True, target=0.8 * nodes / median(wo),
        samples=[nodes / x for x in w], baseline_samples=[nodes / x for x in wo], extra=cpu_extra(nodes),
    )  # fmt: skip
    print(describe(res), f"  (CPU time: ratio {res.extra['cpu_ratio']:.3f})", flush=True)
    out.append(res)
    w, wo = await pairs(chain_specs, sz["chain"], sz["pairs"])
    extra_us = (median(w) - median(wo)) / sz["chain"] * 1e6
    res = Result(
        "pipelines", "chain: extra time per step", extra_us, "us", median(wo) / sz["chain"] * 1e6,
        "plain after edges (per step)", False, target=50.0,
        samples=[x / sz["chain"] * 1e6 for x in w], baseline_samples=[x / sz["chain"] * 1e6 for x in wo],
        extra={"cpu_us_per_step": (median(CPU[True]) - median(CPU[False])) / sz["chain"] * 1e6},
    )  # fmt: skip
    print(describe(res), f"  (CPU time: {res.extra['cpu_us_per_step']:.1f} us)", flush=True)
    out.append(res)
    pin = pin_cost(sz["pins"], sz["size"], 3_600 * 10**9)
    past = pin_cost(sz["pins"], sz["size"], 0)
    res = Result(
        "pipelines", "pinned output: bytes beyond its size", pin, "B", float(sz["size"]), "output size",
        False, target=200.0, extra={"past_retention_bytes_beyond_size": past},
    )  # fmt: skip
    print(describe(res), flush=True)
    out.append(res)
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--quick", action="store_true", help="small sizes, one pair (smoke run)")
    p.add_argument("--json", type=Path, default=DEFAULT_JSON, help=f"output file (default {DEFAULT_JSON})")
    p.add_argument("--pairs", type=int, default=None, help="ABBA pairs (median)")
    args = p.parse_args(sys.argv[1:] if argv is None else argv)
    sz = dict(SIZES["quick" if args.quick else "full"])
    if args.pairs is not None:
        sz["pairs"] = max(1, args.pairs)
    machine = machine_info()
    machine["cronoq"] = source_info()
    print(f"cronoq pipelines benchmark ({'quick' if args.quick else 'full'})")
    print(f"load average: {', '.join(f'{x:.2f}' for x in os.getloadavg())}   sizes: {sz}", flush=True)
    results = asyncio.run(bench(sz))
    print("\nsummary (ratio = value / baseline)")
    print(table(results))
    print(f"load average at end: {', '.join(f'{x:.2f}' for x in os.getloadavg())}")
    write_json(args.json, machine, {"sizes": sz, "quick": args.quick}, results)
    print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
