"""Keeps bench/punctuality.py from rotting: every benchmark function runs with tiny sizes.

No timing assertions (docs/benchmarks.md#targets: targets are measured by ``bench/``, never by timed tests);
only that each figure and its baseline come out as finite numbers.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.append(str(BENCH))  # appended: bench/server.py must not shadow tests/server

import punctuality  # noqa: E402

from cronoq import Task  # noqa: E402

TINY = {
    "fixed_n": 20,
    "fixed_span": 0.5,
    "fixed_slots": 16,
    "tolerance": 0.05,
    "bg_task_s": 0.05,
    "dag_n": 120,
    "dag_width": 10,
    "dag_fan_in": 3,
    "dag_slots": 8,
    "repeat": 1,
}


def _check(results: list[punctuality.Result], n: int) -> None:
    assert len(results) == n
    for r in results:
        assert math.isfinite(r.value) and r.value >= 0, r
        assert math.isfinite(r.baseline) and r.baseline >= 0, r
        json.dumps(r.to_json())


def test_fixed() -> None:
    results = punctuality.bench_fixed(TINY)
    _check(results, 4)
    assert 0.0 <= results[0].value <= 1.0  # hit rate
    assert results[0].extra["failed_or_missed"] == 0  # run_late: every task ran


def test_dag_shape() -> None:
    tasks = punctuality.dag_tasks(TINY["dag_n"], TINY["dag_width"], TINY["dag_fan_in"])
    assert len(tasks) == TINY["dag_n"]
    assert len({t.key for t in tasks}) == TINY["dag_n"]


def test_dag_scatter_is_the_same_batch_in_another_layout() -> None:
    def edges(tasks: list[Task]) -> set[tuple[object, tuple[tuple[int | str, int], ...]]]:
        return {(t.key, tuple(t.submission.deps or ())) for t in tasks}

    args = (TINY["dag_n"], TINY["dag_width"], TINY["dag_fan_in"])
    built = punctuality.dag_tasks(*args)
    scattered = punctuality.dag_tasks(*args, scatter=True)
    assert edges(built) == edges(scattered)
    assert [t.key for t in built] != sorted((t.key for t in built), key=lambda k: int(str(k)[1:]))


def test_dag() -> None:
    results = punctuality.bench_dag(TINY)
    _check(results, 4)
    assert results[1].value > 0 and results[1].baseline > 0


def test_cli_writes_json(tmp_path: Path) -> None:
    out = tmp_path / "p.json"
    assert punctuality.run(dict(TINY), ["dag"], out) == 0
    doc = json.loads(out.read_text())
    assert doc["machine"]["cpu_count"] >= 1
    assert [r["bench"] for r in doc["results"]] == ["dag"] * 4
