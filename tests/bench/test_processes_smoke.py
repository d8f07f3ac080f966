"""Keeps bench/processes.py from rotting: a tiny run with real child processes and a real
``ProcessPoolExecutor`` baseline. No timing assertions (docs/benchmarks.md#targets) beyond the
kill window's upper bound, which is a correctness bound: only that every figure comes out."""

from __future__ import annotations

import asyncio
import importlib.util
import math
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench"
if str(BENCH) not in sys.path:
    sys.path.append(str(BENCH))

_spec = importlib.util.spec_from_file_location("cronoq_bench_processes", BENCH / "processes.py")
assert _spec is not None and _spec.loader is not None
processes = importlib.util.module_from_spec(_spec)
sys.modules["cronoq_bench_processes"] = processes
_spec.loader.exec_module(processes)

TINY = {"n": 60, "burn": 0.05, "rounds": 1, "short": 0.01, "recycle_n": 30, "timeout": 0.5, "grace": 0.2}


def test_processes_bench_tiny() -> None:
    results = asyncio.run(processes.bench(dict(TINY)))
    assert [r.name.split(":")[0] for r in results] == [
        "overhead",
        "parallelism",
        "kill window",
        "kill window",
        "recycling every 10 tasks",
    ]
    for r in results:
        assert r.value > 0 and r.baseline > 0 and not math.isnan(r.ratio), r
    window = results[2]
    assert window.value < 0.5 + 0.2 + 5.0  # ended and gone: a loose bound for a loaded machine
