"""cronoq progress benchmark: what progress reports at the rate limit cost a server with 20
Server-Sent-Events subscribers (docs/how-to/progress.md; target: at most 5 % fewer tasks/s).

Run ``python bench/progress.py`` (``--quick`` for a smoke-sized run, ``--json PATH`` for the
output file, default ``bench/results/progress.json``).

Everything runs in separate processes on this machine, as in ``bench/server.py`` (whose
helpers this reuses): ``cronoq serve`` (loopback, memory store), remote worker processes
(``python bench/progress.py worker ...``: :class:`cronoq.client.Worker` whose handler works for
``duration`` seconds in ``steps`` steps), one ``submit_batch`` load process, and one process of
20 SSE subscribers (``bench/_server_worker.py``'s lean socket counters).  Two variants of the
same load, interleaved in ABBA order within one run:

``with progress``
    the handler calls ``lease.progress(i, steps)`` at every step, every 0.25 s: at the rate limit
    (4 events per second per task; ``--steps`` reports faster, and then the worker's coalescing
    and the engine's limit are at work); the subscribers read ``/v1/events?progress=1`` and count
    ``event: progress`` frames.
``without progress`` (the baseline)
    the same handler and load without the calls; the subscribers read ``/v1/events`` (terminal
    status events only, as both variants get).

The workers switch variant on ``SIGUSR1`` (progress on) / ``SIGUSR2`` (off), so both run on the
same processes and connections.  The figure is tasks/s (submit of the first task → the server
recorded the last success) with progress beside the baseline, and ``extra`` has the progress
events per task and subscriber (about ``4 × duration``), the server CPU per 1000 tasks of
both, and the load average.  Timing figures are only meaningful on a quiet machine: the load
average is printed before and after.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
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

from _common import Result, describe, machine_info, median, source_info, table, write_json  # noqa: E402

from cronoq.proto.protocol import PROTOCOL_VERSION  # noqa: E402

DEFAULT_JSON = _HERE / "results" / "progress.json"
SSE_CHILD = _HERE / "_server_worker.py"
T_COST = 0.05  # at most 5 % fewer tasks/s (issue #18)

SIZES: dict[str, dict[str, Any]] = {
    # 2 x 1024 slots of 1 s tasks: room for more than the server's rate, so the server is the
    # bottleneck and what progress costs it shows in tasks/s (~2,000 attempts report at once,
    # each at the rate limit: 4 reports per second)
    "full": {"n": 8000, "workers": 2, "slots": 1024, "duration": 1.0, "steps": 4, "subs": 20, "pairs": 4},
    "quick": {"n": 2000, "workers": 2, "slots": 512, "duration": 0.5, "steps": 2, "subs": 20, "pairs": 1},
}


# --------------------------------------------------------------------------- the worker child


async def run_worker(target: str, pool: str, slots: int, duration: float, steps: int) -> None:
    from cronoq.client import Lease, Worker

    on = [False]
    pause = duration / steps

    async def handle(lease: Lease) -> None:
        for i in range(1, steps + 1):
            await asyncio.sleep(pause)
            if on[0]:
                await lease.progress(i, steps, "step")
        return None

    w = Worker(target, pool, handle, slots=slots, name=f"bench-{os.getpid()}", grace=5.0)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    loop.add_signal_handler(signal.SIGUSR1, lambda: on.__setitem__(0, True))
    loop.add_signal_handler(signal.SIGUSR2, lambda: on.__setitem__(0, False))
    task = asyncio.create_task(w.run())
    wid = await w.wait_registered(30)
    print(f"REGISTERED {wid} {w.granted_slots} protocol {w.server_protocol}", flush=True)
    await stop.wait()
    await w.stop(grace=2.0)
    with contextlib.suppress(Exception):
        await task


def run_sse_counting(url: str, n: int, marker: str) -> None:
    """bench/_server_worker.py's SSE subscribers, counting ``event: <marker>`` frames."""
    import _server_worker as sw

    sw._SseCounter.MARKER = f"event: {marker}\n".encode()
    asyncio.run(sw.run_sse(url, n))


# --------------------------------------------------------------------------- the driver


def _bench_server() -> Any:
    """bench/server.py under a name of its own (``server`` may be another package's name)."""
    import importlib.util

    mod = sys.modules.get("cronoq_bench_server")
    if mod is None:
        spec = importlib.util.spec_from_file_location("cronoq_bench_server", _HERE / "server.py")
        assert spec is not None and spec.loader is not None
        mod = importlib.util.module_from_spec(spec)
        sys.modules["cronoq_bench_server"] = mod
        spec.loader.exec_module(mod)
    return mod


async def bench(sz: dict[str, Any]) -> list[Result]:
    sb = _bench_server()  # bench/server.py: the server, process and load helpers

    sv = await sb.start_server("memory")
    workers: list[Any] = []
    runs: dict[bool, list[Any]] = {True: [], False: []}
    events: dict[bool, list[float]] = {True: [], False: []}
    n, subs = int(sz["n"]), int(sz["subs"])
    try:
        for i in range(int(sz["workers"])):
            p = await sb._spawn(
                sys.executable,
                str(Path(__file__).resolve()),
                "worker",
                sv.grpc,
                sb.POOL,
                str(sz["slots"]),
                str(sz["duration"]),
                str(sz["steps"]),
                log=sv.directory / f"w{i}.log",
            )
            workers.append(p)
        for p in workers:
            line = await sb._line(p, "REGISTERED")
            assert line.endswith(f"protocol {PROTOCOL_VERSION}"), line
        await sb._warm(sv)
        for i in range(int(sz["pairs"])):
            for with_progress in (True, False) if i % 2 == 0 else (False, True):
                for p in workers:
                    p.send_signal(signal.SIGUSR1 if with_progress else signal.SIGUSR2)
                url = f"http://{sv.http}/v1/events" + ("?progress=1" if with_progress else "")
                marker = "progress" if with_progress else "status"
                sse = await sb._spawn(
                    sys.executable, str(Path(__file__).resolve()), "sse", url, str(subs), marker
                )
                try:
                    await sb._line(sse, "LIVE")
                    r = await sb.cronoq_procs(sv, "batch", 1, n, 1000)
                    await asyncio.sleep(0.3)  # the last events reach the subscribers
                finally:
                    sse.send_signal(signal.SIGTERM)
                    line = await sb._line(sse, "EVENTS")
                    await sb._end(sse)
                got = int(line.split(" ", 3)[1])
                events[with_progress].append(got / (subs * n))
                runs[with_progress].append(r)
                print(
                    f"  {'with' if with_progress else 'without'} progress: {r.rate:,.0f} tasks/s, "
                    f"{got / (subs * n):.2f} {marker} events per task and subscriber",
                    flush=True,
                )
    finally:
        await asyncio.gather(*(sb._end(p) for p in workers))
        await sb.stop_server(sv)
    with_, without = runs[True], runs[False]
    b = median([r.rate for r in without])
    v = median([r.rate for r in with_])
    res = Result(
        "progress",
        f"tasks/s, progress at 4/s, {subs} SSE subs",
        v,
        "tasks/s",
        b,
        "same run without progress",
        True,
        (1 - T_COST) * b,
        [r.rate for r in with_],
        [r.rate for r in without],
        {
            "n": n,
            "subscribers": subs,
            "shape": f"memory store, {sz['workers']} workers x {sz['slots']} slots, {sz['duration']} s tasks",
            "cost": 1 - v / b if b else None,
            "paired_cost": 1 - median([w.rate / o.rate for w, o in zip(with_, without, strict=True)]),
            "max_cost": T_COST,
            "progress_events_per_task_per_subscriber": median(events[True]),
            "status_events_per_task_per_subscriber_without": median(events[False]),
            "progress_calls_per_task": sz["steps"],
            "server_cpu_s_per_1k": median([r.server_cpu_per_1k for r in with_]),
            "server_cpu_s_per_1k_without": median([r.server_cpu_per_1k for r in without]),
            "loadavg": list(os.getloadavg()),
        },
    )
    print(describe(res), flush=True)
    return [res]


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "worker":
        asyncio.run(run_worker(argv[1], argv[2], int(argv[3]), float(argv[4]), int(argv[5])))
        return 0
    if argv and argv[0] == "sse":
        run_sse_counting(argv[1], int(argv[2]), argv[3])
        return 0
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--quick", action="store_true", help="small sizes, one pair (smoke run)")
    p.add_argument("--json", type=Path, default=DEFAULT_JSON, help=f"output file (default {DEFAULT_JSON})")
    p.add_argument("--pairs", type=int, default=None, help="ABBA pairs (median)")
    p.add_argument("--slots", type=int, default=None, help="slots per worker process")
    p.add_argument("--n", type=int, default=None, help="tasks per run")
    p.add_argument("--steps", type=int, default=None, help="progress reports per task")
    args = p.parse_args(argv)
    sz = dict(SIZES["quick" if args.quick else "full"])
    if args.pairs is not None:
        sz["pairs"] = max(1, args.pairs)
    if args.slots is not None:
        sz["slots"] = max(1, args.slots)
    if args.n is not None:
        sz["n"] = max(1, args.n)
    if args.steps is not None:
        sz["steps"] = max(1, args.steps)
    machine = machine_info()
    machine["cronoq"] = source_info()
    print(f"cronoq progress benchmark ({'quick' if args.quick else 'full'})")
    print(f"load average: {', '.join(f'{x:.2f}' for x in os.getloadavg())}   sizes: {sz}", flush=True)
    t0 = time.perf_counter()
    results = asyncio.run(bench(sz))
    print("\nsummary (ratio = value / baseline; higher is better)")
    print(table(results))
    print(f"load average at end: {', '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"total {time.perf_counter() - t0:.1f} s")
    write_json(args.json, machine, {"sizes": sz, "quick": args.quick}, results)
    print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
