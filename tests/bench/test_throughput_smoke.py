"""Keeps bench/throughput.py from rotting: every benchmark function runs with tiny sizes.

No timing assertions (docs/benchmarks.md#targets: targets are measured by ``bench/``, never by timed tests);
only that each figure and its baseline come out as positive numbers.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.append(str(BENCH))  # appended: bench/server.py must not shadow tests/server

import throughput  # noqa: E402

TINY = {
    "engine_n": 500,
    "engine_batch": 16,
    "e2e_n": 300,
    "batch_chunk": 100,
    "submit_n": 300,
    "memory_n": 500,
    "latency_n": 10,
    "preempt_low": 30,
    "preempt_high": 5,
    "repeat": 1,
}


def _check(results: list[throughput.Result], n: int) -> None:
    assert len(results) == n
    for r in results:
        assert math.isfinite(r.value) and r.value > 0, r
        assert math.isfinite(r.baseline) and r.baseline > 0, r
        assert r.ratio > 0
        json.dumps(r.to_json())


def test_engine() -> None:
    _check(throughput.bench_engine(TINY), 3)


def test_e2e() -> None:
    _check(throughput.bench_e2e(TINY), 2)


def test_submit() -> None:
    _check(throughput.bench_submit(TINY), 1)


def test_named() -> None:
    _check(throughput.bench_named(TINY), 1)


def test_memory_tracemalloc_in_process() -> None:
    for kind in ("asyncio", "asyncio_kept", "enqueue", "submit"):
        assert throughput.memory_per_task(kind, "trace", TINY["memory_n"]) > 0


def test_latency() -> None:
    _check(throughput.bench_latency(TINY), 2)


def test_preempt() -> None:
    _check(throughput.bench_preempt(TINY), 2)


@pytest.mark.parametrize("group", ["engine"])
def test_cli_quick_writes_json(tmp_path: Path, group: str) -> None:
    out = tmp_path / "t.json"
    assert throughput.main(["--quick", "--only", group, "--json", str(out)]) == 0
    doc = json.loads(out.read_text())
    assert doc["machine"]["cpu_count"] >= 1
    assert doc["results"] and all(r["value"] > 0 for r in doc["results"])


def test_memory_child_process() -> None:
    assert throughput.memory_isolated("enqueue", "trace", TINY["memory_n"]) > 0
