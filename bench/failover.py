"""cronoq failover benchmark: how long a PostgreSQL-backed ``cronoq serve`` cluster is without a
dispatching leader after SIGKILL, and the submission throughput before and after failovers.

Run ``python bench/failover.py`` (``--quick`` for 3 kills instead of 10, ``--json PATH`` for the
output file; default ``bench/results/failover.json``). PostgreSQL at ``CRONOQ_TEST_PG_DSN``
(default the local ``test`` database); the run uses its own schema and drops it.

Setup (``tests/e2e/cluster.py``): two ``cronoq serve`` processes on one schema (default
settings), two worker processes (8 slots, 10 ms tasks) listing both addresses, and a failover
``Client`` with 4 coroutines submitting keyed tasks continuously. Every ``interval`` seconds
the leader is SIGKILLed at a random moment and started again as a standby.

Figures:

``failover_p50`` / ``failover_max``  leader killed → first lease sent by the new leader (the
    worker's wall clock, same host); baseline: the takeover alone (killed → new leader's
    ``/readyz`` 200). Target ≤ 2 s.
``throughput_after``  acknowledged submissions/s in the steady windows between failovers
    (from 1 s after a takeover to the next kill); baseline ``throughput_before``, the same
    before the first kill.

At the end every acknowledged key must be ``succeeded`` exactly once in the store (checked;
the run fails otherwise).
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from pathlib import Path

_HERE = Path(__file__).resolve().parent
for p in (_HERE, _HERE.parent / "tests" / "e2e"):
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))
try:  # the installed (editable) cronoq, or whatever PYTHONPATH points at; else this checkout
    import cronoq as _cronoq  # noqa: F401
except ImportError:  # pragma: no cover - not installed
    sys.path.insert(0, str(_HERE.parent / "src"))

import cluster as C  # noqa: E402
from _common import Result, describe, machine_info, median, percentile, source_info, table, write_json  # noqa: E402

DEFAULT_JSON = _HERE / "results" / "failover.json"
T_FAILOVER = 2.0  # seconds (issue 7: failover <= 2 s with default settings on PostgreSQL)


def rate(log: list[tuple[float, str, int]], lo: float, hi: float) -> float:
    n = sum(1 for t, _, _ in log if lo <= t < hi)
    return n / (hi - lo) if hi > lo else 0.0


def run(kills: int, interval: float, warm: float, seed: int) -> tuple[list[Result], dict[str, object]]:
    why = C.pg_unreachable()
    if why:
        raise SystemExit(f"failover bench: {why}")
    rng = random.Random(seed)
    tmp = Path(tempfile.mkdtemp(prefix="cronoq-failover-"))
    schema = C.PgSchema("cronoq_bench_fo")
    nodes = [
        C.ServerNode(
            tmp,
            name,
            C.pg_store_toml(
                schema.schema, C.DSN + ("&" if "?" in C.DSN else "?") + f"application_name={schema.app(name)}"
            ),
        )
        for name in ("A", "B")
    ]
    workers: list[C.WorkerProc] = []
    sub: C.Submitter | None = None
    rounds: list[dict[str, float]] = []
    windows: list[tuple[float, float]] = []
    try:
        nodes[0].start().wait_listening()
        C.wait_leader(nodes[:1])
        nodes[1].start().wait_listening()
        targets = [n.grpc for n in nodes]
        workers = [C.WorkerProc(targets, slots=8, exec_ms=10) for _ in range(2)]
        for w in workers:
            w.wait_for("REGISTERED", 30)
        sub = C.Submitter(targets, "bench", concurrency=4).start()
        time.sleep(1.0)
        t_before = time.time()
        time.sleep(warm)
        before = (t_before, time.time())
        steady_from = time.time()
        for k in range(kills):
            time.sleep(rng.uniform(0.3, 1.0) * interval)
            leader = C.wait_leader(nodes)
            t_kill = time.time()
            if k > 0:
                windows.append((steady_from, t_kill))
            leader.kill()
            new = C.wait_leader(nodes, exclude=leader)
            t_ready = time.time()
            end = time.monotonic() + 30
            while (first := C.first_dispatch_after(workers, new.grpc, t_kill)) is None:
                if time.monotonic() > end:
                    raise SystemExit("failover bench: the new leader never dispatched")
                time.sleep(0.02)
            rounds.append({"ready_s": t_ready - t_kill, "failover_s": first - t_kill})
            print(f"  kill {k + 1}/{kills}: {leader.name} → {new.name}  ready {t_ready - t_kill:.3f}s  "
                  f"first dispatch {first - t_kill:.3f}s", flush=True)  # fmt: skip
            leader.start().wait_listening()
            steady_from = time.time() + 1.0
        time.sleep(max(warm, 1.5))
        windows.append((steady_from, time.time()))
        sub.stop()
        rows = C.wait_all_terminal(schema.rows, sub.acked, 120)
        stats = C.check_rows(rows, sub.acked)
        log = list(sub.ack_log)
    finally:
        if sub is not None:
            sub.stop()
        for w in workers:
            w.cleanup()
        for n in nodes:
            n.cleanup()
        schema.drop()
    fo = [r["failover_s"] for r in rounds]
    ready = [r["ready_s"] for r in rounds]
    tp_before = rate(log, *before)
    tp_after = median([rate(log, lo, hi) for lo, hi in windows if hi - lo > 0.5])
    results = [
        Result("failover", "failover_p50", median(fo), "s", median(ready), "takeover (readyz) p50", False,
               T_FAILOVER, fo, ready),
        Result("failover", "failover_max", max(fo), "s", max(ready), "takeover (readyz) max", False,
               T_FAILOVER, fo, ready),
        Result("failover", "throughput_after", tp_after, "tasks/s", tp_before, "throughput_before", True),
    ]  # fmt: skip
    extra: dict[str, object] = {
        "rounds": rounds,
        "store_check": stats,
        "client_errors": dict(sub.errors),
        "failover_p90": percentile(fo, 90),
    }
    return results, extra


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="3 kills, shorter windows")
    ap.add_argument("--kills", type=int, default=None, help="leader kills (default 10; --quick 3)")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--json", type=Path, default=DEFAULT_JSON, help=f"output (default {DEFAULT_JSON})")
    args = ap.parse_args()
    kills = args.kills or (3 if args.quick else 10)
    interval, warm = (2.0, 2.0) if args.quick else (4.0, 5.0)
    machine = machine_info()
    machine["source"] = source_info()
    print(f"failover bench: {kills} leader kills on PostgreSQL ({C.DSN})", flush=True)
    results, extra = run(kills, interval, warm, args.seed)
    for r in results:
        print(describe(r))
    print(table(results))
    results[0].extra = extra
    write_json(args.json, machine, {"kills": kills, "interval_s": interval, "quick": args.quick}, results)
    print(f"wrote {args.json}")
    if any(r.target_ok is False for r in results):
        sys.exit(1)


if __name__ == "__main__":
    main()
