"""Keeps bench/durable_waits.py from rotting: the benchmark runs with tiny sizes (no timing
assertions: docs/benchmarks.md#targets)."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.append(str(BENCH))  # appended: bench/server.py must not shadow tests/server

import durable_waits  # noqa: E402


def test_durable_waits_bench_runs(tmp_path: Path) -> None:
    out = tmp_path / "durable_waits.json"
    sizes = {"n": 200, "parked": 50, "steps": 20, "repeat": 1}
    assert durable_waits.run(sizes, out, quick=True) == 0
    doc = json.loads(out.read_text())
    assert len(doc["results"]) == 3
    for r in doc["results"]:
        assert math.isfinite(r["value"]) and r["value"] > 0
        assert math.isfinite(r["baseline"]) and r["baseline"] > 0
