"""cronoq durable-waits benchmark: fan-out with ``ctx.spawn`` / ``ctx.wait_for`` against an
independent batch, the memory of a parked task, and the cost of a resume that replays 100
recorded steps (docs/how-to/durable.md).

Run ``python bench/durable_waits.py`` (``--quick`` for a smoke-sized run, ``--json PATH`` to
choose the output file; default ``bench/results/durable_waits.json``).

Figures (in-process ``Scheduler``, memory store, one pool of 8 slots of no-op tasks):

``fan-out throughput``
    A parent spawns ``N`` children in one ``ctx.spawn``, waits for all of them with
    ``ctx.wait_for`` and sums their outputs: ``N`` tasks per second from the parent's submission
    to its result, against ``submit_batch`` of ``N`` independent tasks and awaiting every
    handle.  Target: at least 0.7 of the batch.
``parked task memory``
    ``M`` parents each spawn one child into a paused pool and park waiting for it: the bytes
    the engine holds per parked task beyond its record (its journal, the park state and the
    watch entry; ``tracemalloc``), against the bytes of the task record itself.  Target: at
    most 1 KiB.
``resume with 100 recorded steps``
    A task records 100 ``ctx.step`` results, sleeps 1 ms and runs again: the run after the park
    replays the 100 steps; its time from dispatch to the end of the replay, against the first
    run (which calls the 100 functions).  Target: at most 2 ms.

No timing benchmark is trustworthy on a loaded machine: the load average is printed and kept
in the JSON beside every ratio.
"""

from __future__ import annotations

import argparse
import asyncio
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

from _common import Result, describe, machine_info, run_async, source_info, table, write_json  # noqa: E402

from cronoq import Pool, Scheduler, Task, TaskContext  # noqa: E402

DEFAULT_JSON = _HERE / "results" / "durable_waits.json"
SIZES = {
    "full": {"n": 10_000, "parked": 2_000, "steps": 100, "repeat": 3},
    "quick": {"n": 500, "parked": 100, "steps": 100, "repeat": 1},
}


async def _fan(ctx: TaskContext, payload: Any) -> Any:
    if payload is None or isinstance(payload, int):
        return 1
    ids = await ctx.spawn([Task(i) for i in range(payload["n"])])
    return sum(o.output for o in await ctx.wait_for(ids))


def _pool(run: Any, name: str = "default") -> Pool:
    return Pool(name, run, min=8, max=8, autoscale=False)


async def _fan_out(n: int) -> dict[str, float]:
    out: dict[str, float] = {}
    async with Scheduler([_pool(_fan)]) as s:
        t0 = time.perf_counter()
        handles = await s.submit_batch([Task(i) for i in range(n)])
        for h in handles:
            await h
        out["batch_rate"] = n / (time.perf_counter() - t0)
    async with Scheduler([_pool(_fan)]) as s:
        t0 = time.perf_counter()
        total = await (await s.submit({"n": n}))
        out["fan_rate"] = n / (time.perf_counter() - t0)
        assert total == n
    return out


async def _parked(m: int) -> dict[str, float]:
    async def run(ctx: TaskContext, payload: Any) -> Any:
        if payload == "child":
            return None
        ids = await ctx.spawn(Task("child", pool="held"))
        await ctx.wait_for(ids)

    async with Scheduler([_pool(run), _pool(run, "held")]) as s:
        await s.pause("held")
        core = s._run.core if s._run is not None else None
        assert core is not None
        gc.collect()
        tracemalloc.start()
        snap0 = tracemalloc.take_snapshot()
        handles = await s.submit_batch([Task("parent") for _ in range(m)])
        while len(core.parking.journals) < m or core.running:
            await asyncio.sleep(0.001)
        gc.collect()
        snap1 = tracemalloc.take_snapshot()
        tracemalloc.stop()
        parking_files = ("parking.py",)
        per_task = 0
        total = 0
        for stat in snap1.compare_to(snap0, "filename"):
            total += stat.size_diff
            if stat.traceback[0].filename.endswith(parking_files):
                per_task += stat.size_diff
        await s.resume("held")
        for h in handles:
            await h
    # the parents and the children: 2 m task records (and everything else) in `total`
    return {"parked_bytes": per_task / m, "record_bytes": (total - per_task) / (2 * m)}


async def _resume(steps: int) -> dict[str, float]:
    marks: dict[str, float] = {}

    async def run(ctx: TaskContext, payload: Any) -> Any:
        t0 = time.perf_counter()
        for i in range(steps):
            await ctx.step(f"s{i}", lambda i=i: i)
        t1 = time.perf_counter()
        marks["replay" if ctx.resumes else "first"] = t1 - t0
        await ctx.sleep_for(0.001)
        return steps

    async with Scheduler([_pool(run)]) as s:
        assert await (await s.submit(None)) == steps
    return {"replay_s": marks["replay"], "first_s": marks["first"]}


def bench(sz: dict[str, Any]) -> list[Result]:
    fans = [run_async(lambda: _fan_out(sz["n"])) for _ in range(sz["repeat"])]
    ratios = [f["fan_rate"] / f["batch_rate"] for f in fans]
    mid = sorted(range(len(fans)), key=lambda i: ratios[i])[len(fans) // 2]
    park = run_async(lambda: _parked(sz["parked"]))
    res = [run_async(lambda: _resume(sz["steps"])) for _ in range(max(3, sz["repeat"]))]
    best = min(res, key=lambda r: r["replay_s"])
    n = sz["n"]
    return [
        Result(
            "durable_waits",
            f"parent spawning {n:,} children and waiting (ctx.spawn + ctx.wait_for)",
            fans[mid]["fan_rate"],
            "tasks/s",
            fans[mid]["batch_rate"],
            f"submit_batch of {n:,} independent tasks",
            higher_is_better=True,
            target=0.7 * fans[mid]["batch_rate"],
            samples=[f["fan_rate"] for f in fans],
            baseline_samples=[f["batch_rate"] for f in fans],
            extra={"ratios": ratios},
        ),
        Result(
            "durable_waits",
            "memory of a parked task beyond its record (journal, park state, watch entry)",
            park["parked_bytes"],
            "B",
            park["record_bytes"],
            "everything else per task (its record, handles, queues)",
            higher_is_better=False,
            target=1024.0,
        ),
        Result(
            "durable_waits",
            f"resume replaying {sz['steps']} recorded steps",
            best["replay_s"] * 1000,
            "ms",
            best["first_s"] * 1000,
            f"the first run calling the {sz['steps']} step functions",
            higher_is_better=False,
            target=2.0,
            samples=[r["replay_s"] * 1000 for r in res],
            baseline_samples=[r["first_s"] * 1000 for r in res],
        ),
    ]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--quick", action="store_true", help="small sizes, one repeat (smoke run)")
    p.add_argument("--json", type=Path, default=DEFAULT_JSON, help=f"output file (default {DEFAULT_JSON})")
    args = p.parse_args(argv)
    return run(dict(SIZES["quick" if args.quick else "full"]), args.json, args.quick)


def run(sz: dict[str, Any], json_path: Path, quick: bool = False) -> int:
    machine = machine_info()
    machine["cronoq"] = source_info()
    print(f"cronoq durable-waits benchmark ({'quick' if quick else 'full'}); sizes {sz}")
    print(f"load average: {', '.join(f'{x:.2f}' for x in machine['loadavg'])}   cpus: {machine['cpu_count']}")
    results = bench(sz)
    for r in results:
        print(describe(r), flush=True)
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
