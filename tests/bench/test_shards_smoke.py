"""Keeps bench/shards.py from rotting: one tiny run of every figure (no timing assertions,
docs/benchmarks.md#targets); each figure comes out positive and the JSON report is written."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.append(str(BENCH))  # appended: bench/server.py must not shadow tests/server

import shards  # noqa: E402


def test_quick_run_writes_every_figure(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(shards.SIZES, "quick", {"n": 200, "slots": 8})
    out = tmp_path / "s.json"
    assert shards.main(["--quick", "--json", str(out)]) == 0
    doc = json.loads(out.read_text())
    names = [r["name"] for r in doc["results"]]
    assert names == [
        f"{label} {mode}"
        for label in ("1 shard", "2 shards direct", "2 shards forwarded")
        for mode in ("batch", "per-task")
    ]
    for r in doc["results"]:
        assert math.isfinite(r["tasks_per_s"]) and r["tasks_per_s"] > 0
        assert all(v >= 0 for v in r["cpu_s_per_1000_tasks"].values())
