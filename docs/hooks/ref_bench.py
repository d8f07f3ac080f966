"""Benchmark tables rendered from the committed results (``docs/assets/bench/<name>.json``).

The JSON is what the bench script wrote (``--json``) and the PNG beside it was plotted from it
(``bench/plot.py``), so the page's numbers, its plot and its load note come from one run.
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

ASSETS = Path(__file__).resolve().parents[1] / "assets" / "bench"
NAMES = ("throughput", "punctuality", "durable", "server", "failover", "progress")


def _fmt(v: float, unit: str) -> str:
    if not isinstance(v, (int, float)) or not math.isfinite(v):
        return "-"
    if unit.endswith("/s") or unit in ("bytes/task", "B"):
        return f"{v:,.0f} {unit}"
    return f"{v:.3g} {unit}"


def load(name: str) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads((ASSETS / f"{name}.json").read_text())
    return doc


def table(name: str) -> str:
    doc = load(name)
    m = doc.get("machine", {})
    lines = [
        f"Measured {m.get('time', '?')} with `--quick`; load average {m.get('loadavg', ['?'])[0]:.2f} "
        f"on {m.get('cpu_count', '?')} CPUs (a shared machine: read the ratios, not the absolute "
        f"figures); Python {m.get('python', '?')}.",
        "",
        "| figure | value | baseline | ratio | target |",
        "|---|---|---|---|---|",
    ]
    for r in doc.get("results", []):
        ratio = r.get("ratio")
        shown = f"{ratio:.2f}×" if isinstance(ratio, (int, float)) and math.isfinite(ratio) else "-"
        target = "-"
        if r.get("target") is not None:
            cmp = "≥" if r["higher_is_better"] else "≤"
            target = f"{cmp} {_fmt(r['target'], r['unit'])} ({'met' if r.get('target_ok') else 'missed'})"
        baseline = f"{_fmt(r['baseline'], r['unit'])} ({r['baseline_name']})"
        lines.append(f"| {r['name']} | {_fmt(r['value'], r['unit'])} | {baseline} | {shown} | {target} |")
    return "\n".join(lines)


def autoscale_table() -> str:
    doc = load("autoscale")
    m = doc.get("machine", {})
    lines = [
        f"Virtual time, deterministic (independent of machine load); {doc.get('tasks')} tasks; the "
        f"fixed pool has {doc.get('fixed_slots')} slots. Measured {m.get('time', '?')}.",
        "",
        "| scaler configuration | worker-seconds | fixed pool | saving | wait p99 | fixed wait p99 |",
        "|---|---|---|---|---|---|",
    ]
    for r in doc.get("results", []):
        lines.append(
            f"| {r['config']} | {r['worker_seconds']:,.0f} | {r['fixed_worker_seconds']:,.0f} | "
            f"{r['saving']:.0%} | {r['wait_p99']:.2f} s | {r['fixed_wait_p99']:.2f} s |"
        )
    return "\n".join(lines)


def blocks() -> dict[str, Callable[[], str]]:
    out: dict[str, Callable[[], str]] = {f"bench-{n}": functools.partial(table, n) for n in NAMES}
    out["bench-autoscale"] = autoscale_table
    return out
