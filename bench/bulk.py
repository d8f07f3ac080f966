"""cronoq bulk-action benchmark: bulk cancel of 100,000 queued tasks beside a per-task submit
load, both measured in the same run (docs/how-to/operations.md#bulk-actions).

Run ``python bench/bulk.py`` (``--quick`` for a smoke-sized run, ``--json PATH`` to choose the
output file; default ``bench/results/bulk.json``).

Figures (in-process ``Scheduler``, memory store):

``bulk cancel scheduler time``
    ``N`` tasks queued in a paused pool, then ``await sched.cancel_where(pools="queued")``:
    the process CPU time the call took (its pages are the only work on the loop), against the
    CPU time of enqueuing the same ``N`` tasks.  Target: under 2 s for 100,000 tasks.
``submit rate during a bulk cancel``
    A producer does ``await sched.submit(i, pool="live")`` then ``await asyncio.sleep(0)`` (a
    per-task submit load that yields between submissions, as request handlers do) into a pool
    of no-op tasks: its submissions/s while a bulk cancel of ``N`` queued tasks runs, against
    its rate over the same length of time without one.  Target: at least 80 % of the baseline.

No timing benchmark is trustworthy on a loaded machine: the load average is printed and kept
in the JSON beside every ratio.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import sys
import time
from pathlib import Path
from typing import Any

_HERE = Path(__file__).resolve().parent
if str(_HERE) not in sys.path:
    sys.path.append(str(_HERE))  # (as a script it is sys.path[0] already)

from _common import Result, describe, machine_info, run_async, source_info, table, write_json  # noqa: E402

from cronoq import Pool, Scheduler  # noqa: E402

DEFAULT_JSON = _HERE / "results" / "bulk.json"
SIZES = {"full": {"n": 100_000, "repeat": 3}, "quick": {"n": 5_000, "repeat": 1}}


async def _noop(ctx: Any, payload: Any) -> None:
    return None


def _sched() -> Scheduler:
    return Scheduler(
        [
            Pool("queued", _noop, min=4, max=4, autoscale=False),
            Pool("live", _noop, min=64, max=64, autoscale=False),
        ]
    )


async def _fill(s: Scheduler, n: int) -> float:
    """Queue ``n`` tasks in the paused pool ``queued``; the CPU seconds it took."""
    await s.pause("queued")
    c0 = time.process_time()
    for i in range(n):
        await s.enqueue(i, pool="queued")
    return time.process_time() - c0


async def _producer(s: Scheduler, stop: asyncio.Event) -> int:
    n = 0
    while not stop.is_set():
        await s.submit(n, pool="live")
        n += 1
        await asyncio.sleep(0)
    return n


async def _one(n: int) -> dict[str, float]:
    out: dict[str, float] = {}
    async with _sched() as s:
        out["enqueue_cpu"] = await _fill(s, n)
        c0, w0 = time.process_time(), time.perf_counter()
        res = await s.cancel_where(pools="queued")
        out["cancel_cpu"], out["cancel_wall"] = time.process_time() - c0, time.perf_counter() - w0
        assert res.acted == n, res
    async with _sched() as s:
        await _fill(s, n)
        # the load alone, for as long as the bulk cancel ran alone (ABBA would need 2 fills)
        stop = asyncio.Event()
        t0 = time.perf_counter()
        prod = asyncio.get_running_loop().create_task(_producer(s, stop))
        await asyncio.sleep(max(0.2, out["cancel_wall"]))
        stop.set()
        base = await prod
        out["base_rate"] = base / (time.perf_counter() - t0)
        # the load with the bulk cancel running
        stop = asyncio.Event()
        t0 = time.perf_counter()
        prod = asyncio.get_running_loop().create_task(_producer(s, stop))
        res = await s.cancel_where(pools="queued")
        stop.set()
        during = await prod
        out["during_wall"] = time.perf_counter() - t0
        out["during_rate"] = during / out["during_wall"]
        assert res.acted == n, res
    return out


def bench_bulk(sz: dict[str, Any]) -> list[Result]:
    n = sz["n"]
    runs = [run_async(lambda: _one(n)) for _ in range(sz["repeat"])]
    best = min(runs, key=lambda r: r["cancel_cpu"])
    rates = [r["during_rate"] / r["base_rate"] for r in runs]
    mid = sorted(range(len(runs)), key=lambda i: rates[i])[len(runs) // 2]
    rr = runs[mid]
    return [
        Result(
            "bulk",
            f"bulk cancel of {n:,} queued tasks: scheduler time",
            best["cancel_cpu"],
            "s",
            best["enqueue_cpu"],
            f"enqueue of the {n:,} tasks (CPU s)",
            higher_is_better=False,
            target=2.0 if n >= 100_000 else None,
            samples=[r["cancel_cpu"] for r in runs],
            baseline_samples=[r["enqueue_cpu"] for r in runs],
            extra={"wall_s": [r["cancel_wall"] for r in runs]},
        ),
        Result(
            "bulk",
            "per-task submit rate during the bulk cancel",
            rr["during_rate"],
            "tasks/s",
            rr["base_rate"],
            "the same load alone",
            higher_is_better=True,
            target=0.8 * rr["base_rate"],
            samples=[r["during_rate"] for r in runs],
            baseline_samples=[r["base_rate"] for r in runs],
            extra={"ratios": rates, "during_wall_s": [r["during_wall"] for r in runs]},
        ),
    ]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--quick", action="store_true", help="small sizes, one repeat (smoke run)")
    p.add_argument("--json", type=Path, default=DEFAULT_JSON, help=f"output file (default {DEFAULT_JSON})")
    p.add_argument("--n", type=int, default=None, help="queued tasks to cancel")
    args = p.parse_args(argv)
    sz = dict(SIZES["quick" if args.quick else "full"])
    if args.n is not None:
        sz["n"] = max(1, args.n)
    return run(sz, args.json, args.quick)


def run(sz: dict[str, Any], json_path: Path, quick: bool = False) -> int:
    machine = machine_info()
    machine["cronoq"] = source_info()
    print(f"cronoq bulk benchmark ({'quick' if quick else 'full'}); sizes {sz}")
    print(f"load average: {', '.join(f'{x:.2f}' for x in machine['loadavg'])}   cpus: {machine['cpu_count']}")
    results = bench_bulk(sz)
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
