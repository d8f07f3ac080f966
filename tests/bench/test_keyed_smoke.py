"""Keeps bench/keyed.py from rotting: every figure comes out, with tiny sizes.

No timing assertions (docs/benchmarks.md#targets: targets are measured by ``bench/``, never by
timed tests); only that each figure and its baseline are positive numbers, and the memory per
idle key (deterministic, not a timing) is under its target.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.append(str(BENCH))  # appended: bench/server.py must not shadow tests/server

import keyed  # noqa: E402

TINY = {"n": 300, "keys": 30, "repeat": 1, "hot": 200, "probes": 20, "idle": 2_000}


def test_every_figure_comes_out_positive() -> None:
    results = keyed.bench_memory(TINY) + keyed.bench_hot_key(TINY) + keyed.bench_throughput(TINY)
    assert len(results) == 6
    for r in results:
        assert math.isfinite(r.value) and r.value > 0, r
        assert math.isfinite(r.baseline) and r.baseline > 0, r


def test_an_idle_key_costs_at_most_300_bytes() -> None:
    for kind in ("semaphore", "token_bucket"):
        assert keyed.bytes_per_idle_key(kind, 5_000) <= 300, kind
