"""Interleaved store comparison: the throughput figures of ``bench/server.py`` with every
store's server up at once and the runs taken in turn, so a shared machine's load drifts over
all the stores alike.

    python bench/stores_ab.py --stores memory,sqlite,postgres --rounds 6 --n 4000 \
        --scenarios shared,procs

``bench/server.py --only throughput`` runs all of one store's figures, then the next store's:
on a loaded two-core machine the load seen by ``memory`` (first) and by a durable store (a
minute later) differs, and with ``--repeat 1`` the durable ÷ memory CPU ratio of one figure
swung between 0.92x and 1.41x over two back-to-back runs (sqlite-delay, per-task submits from
8 processes, load 2.8-4.1).  Here each round runs a scenario on every store (two stores: round
order reversed every other round, ABBA; more: rotated by one each round), and the ratios are
medians of the per-round ratios.

Scenarios (as in ``bench/server.py``): ``batch`` (submit_batch of 1000, one process),
``procs`` (per-task submits from 8 processes), ``coros`` (8 coroutines, one Client each),
``shared`` (64 coroutines on one Client: coalesced ``SubmitMany``), and ``solo`` (per-task
submits from one process: a closed loop of one, each submit's round trip alone).  The
diagnostic stores of ``bench/server.py`` (``sqlite-*``, ``postgres-*``) add a line per figure:
commit latency p50 and p90, mutations per commit, a submission's mean wait for its commit and,
for PostgreSQL, the database backend's CPU per task (docs/benchmarks.md#server-postgres-bound).
Server CPU per task is /proc utime+stime of the server (children included, ``cpu_seconds``), and is split per
thread (the event loop's thread is ``main``); beside the threads, ``worker`` is the worker
processes' CPU per task, ``clients`` the load processes' (the scenarios that run them: their
own process time), ``machine`` the whole machine's (/proc/stat: the clients, the worker,
the server and whatever else runs) and ``busy%`` the machine's CPU use during the run (near 100:
the run is bound by CPU, and any CPU a store adds anywhere costs throughput).
``--n`` is the tasks per run (4000 as in ``bench/server.py``; a 64-coroutine memory run of
4000 lasts ~0.35 s, ~30 ticks of /proc CPU):
a run's fixed cost (the 64 coroutines' ramp, the completion polls) weighs on the fastest store
most: 64 coroutines on one Client, memory, read 75 us/task at ``--n 4000`` and 60.5 us/task at
``--n 20000`` (load 2.7-2.9), so sqlite-delay ÷ memory read 1.26x and 1.40x.

Same-run baselines: a store named ``NAME@SRC`` runs a server that imports cronoq from the
directory ``SRC`` (another worktree's ``src``), ``NAME@SRC@VAR=VALUE+VAR=VALUE`` with those
environment variables too (``NAME@@...``: this checkout's); ratios are to the first store.
With ``CRONOQ_BENCH_LOOPSTATS=1`` the plain stores' servers count their event loop's
iterations and idle time and the group commits (``bench/_loopstats_serve.py``), printed per
task beside the threads' CPU: ``iters/task``, ``idle`` and ``idle-in-commit`` (us per task),
``commits/ktask``, ``muts/commit``, ``commit-ms`` (the committer's view), ``sync-ms`` and
``sync-cpu-ms`` (the SQLite commit's own work, wall and CPU), ``gc/ktask`` and ``gc`` (the
cyclic garbage collector's passes per 1,000 tasks and its seconds per task, in us).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
from collections.abc import Awaitable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import server as B  # bench/server.py, a sibling script

SCENARIOS = ("batch", "procs", "coros", "shared", "solo")


def thread_cpu(pid: int) -> dict[str, float]:
    """CPU seconds so far per thread of ``pid``, by name (the main thread: ``main``; threads
    of the same name summed)."""
    out: dict[str, float] = {}
    tick = os.sysconf("SC_CLK_TCK")
    for t in os.listdir(f"/proc/{pid}/task"):
        try:
            st = Path(f"/proc/{pid}/task/{t}/stat").read_text()
        except OSError:
            continue
        name = "main" if t == str(pid) else st[st.index("(") + 1 : st.rindex(")")]
        f = st[st.rindex(")") + 2 :].split()
        out[name] = out.get(name, 0.0) + (int(f[11]) + int(f[12])) / tick
    return out


def machine_busy() -> tuple[float, float]:
    """(busy, total) jiffies of the whole machine so far (/proc/stat's cpu line)."""
    f = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = f[3] + (f[4] if len(f) > 4 else 0)
    return float(sum(f) - idle), float(sum(f))


def scenario(sv: Any, name: str, n: int) -> Awaitable[Any]:
    if name == "batch":
        return B.cronoq_procs(sv, "batch", 1, n, 1000)
    if name == "procs":
        return B.cronoq_procs(sv, "submit", 8, n, 1000)
    if name == "solo":
        return B.cronoq_procs(sv, "submit", 1, n, 1000)
    if name == "coros":
        return B.cronoq_coros(sv, 8, n)
    return B.cronoq_shared(sv, B.SHARED_COROS, n)


async def amain(
    stores: list[str], scenarios: list[str], rounds: int, n: int, per_round: bool = False
) -> None:
    svs: dict[str, Any] = {}
    wss: dict[str, Any] = {}
    runs: dict[tuple[str, str], list[tuple[float, float, dict[str, float]]]] = {}
    loads: list[float] = []
    dists: dict[tuple[str, str], list[list[float]]] = {}
    try:
        for s in stores:
            svs[s] = await B.start_server(s)
            wss[s] = await B.start_workers(svs[s], 1, 32)
            await B._warm(svs[s])
        for r in range(rounds):
            # two stores: ABBA; more: each round starts one store later (reversing three or
            # more ran the last store twice in a row at every other round's turn, and it read
            # better: 0.742 against 0.825 per task, 0.781 against 0.743 with places swapped)
            k = r % len(stores)
            order = (stores if r % 2 == 0 else stores[::-1]) if len(stores) <= 2 else stores[k:] + stores[:k]
            for c in scenarios:
                for s in order:
                    sv = svs[s]
                    l0 = await sv.loop_stats()
                    t0 = thread_cpu(sv.pid)
                    m0 = machine_busy()
                    x = await B.counted(wss[s], scenario(sv, c, n), sv)
                    t1 = thread_cpu(sv.pid)
                    m1 = machine_busy()
                    per = {k: (v - t0.get(k, 0.0)) / x.n * 1e6 for k, v in t1.items()}
                    per["worker"] = x.worker_cpu_per_1k * 1000
                    if x.client_cpu_per_1k:
                        per["clients"] = x.client_cpu_per_1k * 1000
                    per["machine"] = (m1[0] - m0[0]) / os.sysconf("SC_CLK_TCK") / x.n * 1e6
                    per["busy%"] = 100.0 * (m1[0] - m0[0]) / max(1.0, m1[1] - m0[1])
                    l1 = await sv.loop_stats()
                    if l0 is not None and l1 is not None:
                        d = [b - a for a, b in zip(l0, l1)]
                        per["iters/task"] = d[0] / x.n
                        per["idle"] = d[1] / x.n * 1e6
                        per["idle-in-commit"] = d[2] / x.n * 1e6
                        if d[3]:
                            per["commits/ktask"] = d[3] / x.n * 1000
                            per["muts/commit"] = d[4] / d[3]
                            per["commit-ms"] = d[5] / d[3] * 1000
                            per["commits/s"] = d[3] / x.seconds
                        if len(d) > 8 and d[8]:
                            per["sync-ms"] = d[6] / d[8] * 1000
                            per["sync-cpu-ms"] = d[7] / d[8] * 1000
                        if len(d) > 10:
                            per["gc/ktask"] = d[9] / x.n * 1000
                            per["gc"] = d[10] / x.n * 1e6
                    runs.setdefault((s, c), []).append((x.rate, x.server_cpu_per_1k * 1000, per))
                    if x.commit_dist:
                        dists.setdefault((s, c), []).append(x.commit_dist)
            loads.append(os.getloadavg()[0])
            print(f"round {r + 1}/{rounds}: load {loads[-1]:.2f}", flush=True)
    finally:
        for s in list(svs):
            if s in wss:
                await B.stop_workers(wss[s])
            await B.stop_server(svs[s])
    base = stores[0]
    print(f"\nmedians over {rounds} interleaved rounds of {n} tasks; load {min(loads):.1f}-{max(loads):.1f}")
    for c in scenarios:
        for s in stores:
            rs = runs[(s, c)]
            bs = runs[(base, c)]
            rate = statistics.median(x[0] for x in rs)
            cpu = statistics.median(x[1] for x in rs)
            rr = statistics.median(a[0] / b[0] for a, b in zip(rs, bs))
            cr = statistics.median(a[1] / b[1] for a, b in zip(rs, bs) if b[1] > 0)
            names = sorted({k for x in rs for k in x[2]})
            threads = {k: statistics.median(x[2].get(k, 0.0) for x in rs) for k in names}
            split = ", ".join(
                f"{k} {v:.2f}" if v < 10 else f"{k} {v:.0f}" for k, v in threads.items() if v >= 0.01
            )
            if per_round:
                ratios = [round(a[0] / b[0], 3) for a, b in zip(rs, bs)]
                print(f"{c:7s} {s:16s} tasks/s ÷ {base} per round: {ratios}")
            print(
                f"{c:7s} {s:16s} {rate:8,.0f} tasks/s {cpu:7.1f} us/task  ÷ {base}: tasks/s {rr:.3f} "
                f"cpu {cr:.3f}  (per round: {[round(x[1]) for x in rs]}; per thread us: {split})"
            )
            if (s, c) in dists:
                d = [statistics.median(col) for col in zip(*dists[(s, c)])]
                print(
                    f"{'':24s} commits: {d[0]:.2f} ms p50, {d[1]:.2f} ms p90; {d[2]:.0f} mutations p50, "
                    f"{d[3]:.0f} p90; a submission's wait for its commit {d[4]:.2f} ms (mean)"
                    + (f"; database backend {d[5]:.0f} us/task" if len(d) > 5 else "")
                )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument(
        "--stores",
        default="memory,sqlite",
        help="comma-separated (bench/server.py names; NAME@SRC: cronoq imported from the directory SRC)",
    )
    p.add_argument("--scenarios", default="procs,shared", help=f"comma-separated of {', '.join(SCENARIOS)}")
    p.add_argument("--rounds", type=int, default=4)
    p.add_argument("--n", type=int, default=4000, help="tasks per run")
    p.add_argument("--per-round", action="store_true", help="also print each round's tasks/s ratio")
    a = p.parse_args()
    stores = a.stores.split(",")
    scenarios = a.scenarios.split(",")
    for s in stores:
        if s.partition("@")[0] not in B.STORES:
            raise SystemExit(f"unknown store {s!r} (one of {', '.join(B.STORES)})")
    for c in scenarios:
        if c not in SCENARIOS:
            raise SystemExit(f"unknown scenario {c!r} (one of {', '.join(SCENARIOS)})")
    asyncio.run(amain(stores, scenarios, max(1, a.rounds), max(100, a.n), a.per_round))


if __name__ == "__main__":
    main()
