"""Keeps bench/pipelines.py from rotting: a tiny run of each figure. No timing assertions
(docs/benchmarks.md#targets): only that the figures come out, and the pin's memory is sane."""

from __future__ import annotations

import asyncio
import importlib.util
import math
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench"
if str(BENCH) not in sys.path:
    sys.path.append(str(BENCH))

_spec = importlib.util.spec_from_file_location("cronoq_bench_pipelines", BENCH / "pipelines.py")
assert _spec is not None and _spec.loader is not None
pipelines = importlib.util.module_from_spec(_spec)
sys.modules["cronoq_bench_pipelines"] = pipelines
_spec.loader.exec_module(pipelines)

TINY = {"fan": 50, "chain": 20, "pairs": 1, "pins": 200, "size": 1000}


def test_pipelines_bench_tiny() -> None:
    fan, chain, pin = asyncio.run(pipelines.bench(dict(TINY)))
    assert fan.value > 0 and fan.baseline > 0 and not math.isnan(fan.ratio)
    assert not math.isnan(chain.value) and chain.baseline > 0
    assert fan.extra["cpu_ratio"] > 0 and not math.isnan(chain.extra["cpu_us_per_step"])
    assert 0 < pin.value < 1000  # a pin costs far less than the output it keeps
    assert pin.extra["past_retention_bytes_beyond_size"] > pin.value  # past retention: its record too
