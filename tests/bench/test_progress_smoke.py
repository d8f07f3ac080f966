"""Keeps bench/progress.py from rotting: a tiny run against a real ``cronoq serve``, real
version-5 workers reporting progress and real SSE subscribers. No timing assertions
(docs/benchmarks.md#targets): only that the figure comes out and progress events arrived."""

from __future__ import annotations

import asyncio
import importlib.util
import math
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench"
if str(BENCH) not in sys.path:
    sys.path.append(str(BENCH))

_spec = importlib.util.spec_from_file_location("cronoq_bench_progress", BENCH / "progress.py")
assert _spec is not None and _spec.loader is not None
progress = importlib.util.module_from_spec(_spec)
sys.modules["cronoq_bench_progress"] = progress
_spec.loader.exec_module(progress)

TINY = {"n": 60, "workers": 1, "slots": 16, "duration": 0.6, "steps": 12, "subs": 2, "pairs": 1}


def test_progress_bench_tiny() -> None:
    [res] = asyncio.run(progress.bench(dict(TINY)))
    assert res.value > 0 and res.baseline > 0 and not math.isnan(res.ratio)
    assert res.extra["progress_events_per_task_per_subscriber"] >= 1  # at least the first report
    assert res.extra["status_events_per_task_per_subscriber_without"] == 1  # terminal events only
