"""cronoq process benchmark: ``run_in="process"`` against the same run's baselines
(docs/how-to/processes.md, docs/benchmarks.md#processes).

Run ``python bench/processes.py`` (``--quick`` for a smoke-sized run, ``--json PATH`` for the
output file, default ``bench/results/processes.json``). Four figures, each beside a baseline
measured in the same run on the same machine:

``overhead``
    ``n`` no-op tasks through a process pool of 2 (``Scheduler.submit``, all handles awaited)
    in tasks/s, against ``concurrent.futures.ProcessPoolExecutor(2).submit`` driven the same way
    (the futures wrapped and awaited on the loop); both forkserver, both warm, ``rounds``
    interleaved in ABBA order (medians). Target ≥ 0.8×.
``parallelism``
    2 children running 2 × ``burn`` s of pure-Python CPU, against one child running the same
    two: the speed-up (target ≥ 1.7× on 2 idle cores).
``kill window``
    one child spins with SIGTERM ignored under ``timeout`` and ``kill_grace``; the time until
    the attempt ended and its child is gone is reported (target ≤ timeout + kill_grace + 0.5 s),
    and the other child's throughput of short tasks in that window against its steady rate
    (target ≥ 0.8×).
``recycling``
    ``short`` s CPU tasks through 2 children replaced every 10 tasks, against the same without
    recycling (target: at most 30 % fewer tasks/s).

The machine's load average is printed before and after: on a busy machine the ratios, not the
absolute figures, are what to read, and parallelism needs two idle cores to show.
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import contextlib
import multiprocessing
import sys
import time
from pathlib import Path
from typing import Any

_HERE = Path(__file__).resolve().parent
if str(_HERE) not in sys.path:
    sys.path.append(str(_HERE))
try:  # the installed (editable) cronoq, or whatever PYTHONPATH points at; else this checkout
    import cronoq as _cronoq  # noqa: F401
except ImportError:  # pragma: no cover - not installed
    sys.path.insert(0, str(_HERE.parent / "src"))

import _proc_tasks as tasks  # noqa: E402
from _common import Result, median, run_and_report  # noqa: E402

from cronoq import Pool, Processes, RetryPolicy, Scheduler, TaskFailed  # noqa: E402

DEFAULT_JSON = _HERE / "results" / "processes.json"

SIZES: dict[str, dict[str, Any]] = {
    "full": {
        "n": 10_000,
        "burn": 0.2,
        "rounds": 4,
        "short": 0.01,
        "recycle_n": 400,
        "timeout": 1.0,
        "grace": 0.5,
    },
    "quick": {
        "n": 1000,
        "burn": 0.2,
        "rounds": 2,
        "short": 0.01,
        "recycle_n": 100,
        "timeout": 1.0,
        "grace": 0.5,
    },
}

ONCE = RetryPolicy(max_attempts=1)


def _pool(fn: Any, slots: int, processes: Processes | None = None) -> Pool:
    return Pool("p", fn, run_in="process", min=slots, max=slots, autoscale=False, processes=processes)


async def _drain(sched: Scheduler, n: int, payload: Any) -> float:
    """Seconds to submit ``n`` tasks and await every handle."""
    t0 = time.perf_counter()
    handles = [await sched.submit(payload) for _ in range(n)]
    await asyncio.gather(*handles)
    return time.perf_counter() - t0


async def overhead(sz: dict[str, Any]) -> Result:
    n, rounds = int(sz["n"]), int(sz["rounds"])
    ours: list[float] = []
    base: list[float] = []
    mp = multiprocessing.get_context("forkserver")
    noop = tasks.plain_noop
    async with Scheduler([_pool(tasks.noop, 2)]) as sched:
        with concurrent.futures.ProcessPoolExecutor(2, mp_context=mp) as ppe:

            async def ppe_rate() -> float:
                t0 = time.perf_counter()
                await asyncio.gather(*[asyncio.wrap_future(ppe.submit(noop, None)) for _ in range(n)])
                return n / (time.perf_counter() - t0)

            await _drain(sched, 50, None)  # both children up, on both sides
            await asyncio.gather(*(asyncio.wrap_future(ppe.submit(noop, None)) for _ in range(50)))
            for i in range(rounds):  # ABBA: the machine's drift falls on both sides alike
                if i % 2:
                    base.append(await ppe_rate())
                    ours.append(n / await _drain(sched, n, None))
                else:
                    ours.append(n / await _drain(sched, n, None))
                    base.append(await ppe_rate())
    return Result("processes", "overhead: no-op tasks/s, 2 children", median(ours), "tasks/s", median(base),
                  "ProcessPoolExecutor(2).submit", True, target=0.8 * median(base),
                  samples=ours, baseline_samples=base)  # fmt: skip


async def parallelism(sz: dict[str, Any]) -> Result:
    burn, rounds = float(sz["burn"]), int(sz["rounds"])
    times: dict[int, list[float]] = {1: [], 2: []}
    for slots in (1, 2):
        async with Scheduler([_pool(tasks.burn, slots)]) as sched:
            await _drain(sched, slots, 0.0)  # the children up
            for _ in range(rounds):
                times[slots].append(await _drain(sched, 2, burn))
    one, two = median(times[1]), median(times[2])
    return Result("processes", "parallelism: 2 x burn, speed-up of 2 children", one / two, "x", 1.0,
                  "one child", True, target=1.7,
                  extra={"one_child_s": one, "two_children_s": two})  # fmt: skip


async def kill_window(sz: dict[str, Any]) -> list[Result]:
    timeout, grace, short = float(sz["timeout"]), float(sz["grace"]), float(sz["short"])
    settings = Processes(kill_grace=grace)
    stuck = Pool("stuck", tasks.stuck, run_in="process", min=1, max=1, autoscale=False, processes=settings)
    work = _pool(tasks.burn, 1, settings)
    async with Scheduler([work, stuck]) as sched:  # (the first pool is the default one)
        await _drain(sched, 1, 0.0)
        steady_n = max(10, int(timeout / short))
        steady = steady_n / await _drain(sched, steady_n, short)
        sup = sched._procs.supervisor("stuck")
        t0 = time.perf_counter()
        h = await sched.submit(None, pool="stuck", timeout=timeout, retry=ONCE)
        done = 0

        async def other() -> None:
            nonlocal done
            while True:
                await (await sched.submit(short))
                done += 1

        runner = asyncio.create_task(other())
        with contextlib.suppress(TaskFailed):
            await h
        while sup.pids:  # SIGTERM is ignored: the SIGKILL after kill_grace ends it
            await asyncio.sleep(0.001)
        window = time.perf_counter() - t0
        runner.cancel()
        during = done / window
    return [
        Result("processes", "kill window: attempt ended and child gone", window, "s", timeout + grace,
               "timeout + kill_grace", False, target=timeout + grace + 0.5),
        Result("processes", "kill window: other child's tasks/s", during, "tasks/s", steady,
               "its steady rate", True, target=0.8 * steady),
    ]  # fmt: skip


async def recycling(sz: dict[str, Any]) -> Result:
    n, short = int(sz["recycle_n"]), float(sz["short"])
    rates: dict[bool, float] = {}
    for recycle in (False, True):
        settings = Processes(max_tasks_per_child=10 if recycle else None)
        async with Scheduler([_pool(tasks.burn, 2, settings)]) as sched:
            await _drain(sched, 2, 0.0)
            rates[recycle] = n / await _drain(sched, n, short)
    return Result("processes", "recycling every 10 tasks: tasks/s", rates[True], "tasks/s", rates[False],
                  "no recycling", True, target=0.7 * rates[False])  # fmt: skip


async def bench(sz: dict[str, Any]) -> list[Result]:
    results = [await overhead(sz), await parallelism(sz)]
    results += await kill_window(sz)
    results.append(await recycling(sz))
    return results


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--quick", action="store_true", help="small sizes (smoke run)")
    p.add_argument("--json", type=Path, default=DEFAULT_JSON, help=f"output file (default {DEFAULT_JSON})")
    args = p.parse_args(argv)
    sz = dict(SIZES["quick" if args.quick else "full"])
    run_and_report("cronoq process benchmark", sz, args.quick, args.json, lambda: asyncio.run(bench(sz)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
