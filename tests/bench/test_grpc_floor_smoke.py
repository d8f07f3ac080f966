"""Keeps bench/grpc_floor.py from rotting: the bare grpc.aio echo server and its load processes
run with tiny sizes and give positive figures (no timing assertions: targets live in bench/)."""

from __future__ import annotations

import math
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench"
if str(BENCH) not in sys.path:
    sys.path.append(str(BENCH))

import grpc_floor  # noqa: E402


async def test_floor_measures_calls_and_cpu() -> None:
    floor = await grpc_floor.measure(clients=2, calls=50)
    assert floor.calls == 100 and floor.clients == 2
    assert floor.calls_per_s > 0 and math.isfinite(floor.calls_per_s)
    assert floor.cpu_s_per_1k >= 0 and floor.seconds > 0
    assert floor.client_cpu_s_per_1k > 0  # the load processes' own CPU
    assert set(floor.to_json()) == {
        "calls_per_s",
        "cpu_s_per_1k",
        "calls",
        "clients",
        "seconds",
        "client_cpu_s_per_1k",
    }
