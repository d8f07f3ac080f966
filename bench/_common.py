"""Shared helpers for the cronoq benchmarks: results, statistics, machine info, reporting.

Every figure is a :class:`Result` that carries its own baseline (measured in the same run)
and the ratio ``value / baseline``.  ``higher_is_better`` says how to read the ratio and the
target: throughput figures are better when higher, latency and memory when lower.
"""

from __future__ import annotations

import asyncio
import gc
import json
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


@dataclass
class Result:
    """One benchmark figure beside its baseline."""

    bench: str  # the --only group it belongs to
    name: str  # a short, unique label
    value: float
    unit: str
    baseline: float
    baseline_name: str
    higher_is_better: bool
    target: float | None = None
    samples: list[float] = field(default_factory=list)
    baseline_samples: list[float] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def ratio(self) -> float:
        return self.value / self.baseline if self.baseline else float("nan")

    @property
    def target_ok(self) -> bool | None:
        if self.target is None:
            return None
        return self.value >= self.target if self.higher_is_better else self.value <= self.target

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["ratio"] = self.ratio
        d["target_ok"] = self.target_ok
        return d


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (``q`` in [0, 100]) of ``values``; 0.0 for no values."""
    if not values:
        return 0.0
    s = sorted(values)
    k = max(0, min(len(s) - 1, round(q / 100 * len(s) + 0.5) - 1))
    return float(s[k])


def median(values: Sequence[float]) -> float:
    return float(statistics.median(values)) if values else 0.0


def run_async(factory: Callable[[], Any]) -> Any:
    """Run ``factory()`` (a coroutine) on a fresh event loop after a full collection."""
    gc.collect()
    return asyncio.run(factory())


def rss_bytes() -> int:
    """Current resident set size (Linux /proc; falls back to ru_maxrss elsewhere)."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * _PAGE
    except OSError:  # pragma: no cover - non-Linux
        import resource

        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def machine_info() -> dict[str, Any]:
    try:
        load = list(os.getloadavg())
    except OSError:  # pragma: no cover - not available
        load = []
    return {
        "loadavg": load,
        "cpu_count": os.cpu_count(),
        "affinity": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "python": sys.version.split()[0],
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "event_loop": type(asyncio.new_event_loop()).__name__,
        "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }


def source_info() -> dict[str, Any]:
    """Which cronoq tree is measured: its path, and the git commit/dirtiness if in a checkout."""
    import subprocess

    import cronoq

    pkg = Path(cronoq.__file__).resolve().parent
    info: dict[str, Any] = {"path": str(pkg), "commit": None, "dirty": None}
    try:
        top = subprocess.run(
            ["git", "-C", str(pkg), "rev-parse", "--show-toplevel", "HEAD"],
            capture_output=True, text=True, check=True, timeout=10,
        ).stdout.split()  # fmt: skip
        status = subprocess.run(
            ["git", "-C", top[0], "status", "--porcelain", "--", str(pkg)],
            capture_output=True, text=True, check=True, timeout=10,
        ).stdout  # fmt: skip
        info["commit"] = top[1][:12]
        info["dirty"] = len(status.splitlines())
    except (OSError, subprocess.SubprocessError, IndexError):
        pass
    return info


def fmt(value: float, unit: str) -> str:
    if unit.endswith("/s"):
        return f"{value:,.0f} {unit}"
    if unit == "ms":
        return f"{value:.3f} ms"
    if unit in ("B", "bytes/task"):
        return f"{value:,.0f} {unit}"
    return f"{value:,.3g} {unit}"


def describe(r: Result) -> str:
    target = ""
    if r.target is not None:
        cmp = ">=" if r.higher_is_better else "<="
        target = f"  target {cmp} {fmt(r.target, r.unit)}: {'PASS' if r.target_ok else 'MISS'}"
    return (
        f"  {r.name}: {fmt(r.value, r.unit)}   baseline ({r.baseline_name}): "
        f"{fmt(r.baseline, r.unit)}   ratio {r.ratio:.3f}{target}"
    )


def table(results: Sequence[Result]) -> str:
    rows = [("figure", "value", "baseline", "ratio", "target", "ok")]
    for r in results:
        tgt = "-"
        if r.target is not None:
            tgt = ("≥ " if r.higher_is_better else "≤ ") + fmt(r.target, r.unit)
        ok = "-" if r.target_ok is None else ("PASS" if r.target_ok else "MISS")
        rows.append((r.name, fmt(r.value, r.unit), fmt(r.baseline, r.unit), f"{r.ratio:.3f}", tgt, ok))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = []
    for j, row in enumerate(rows):
        lines.append(
            "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths)))
        )
        if j == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


def write_json(
    path: Path, machine: dict[str, Any], config: dict[str, Any], results: Sequence[Result]
) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    doc = {
        "machine": machine,
        "config": config,
        "results": [r.to_json() for r in results],
    }
    path.write_text(json.dumps(doc, indent=2, default=str) + "\n")


def run_and_report(
    title: str, sizes: dict[str, Any], quick: bool, path: Path, run: Callable[[], Sequence[Result]]
) -> None:
    """Print the header (with the load average), ``run()`` the benchmark, print its table and
    the load average at the end, and write the JSON results to ``path``."""
    machine = machine_info()
    machine["cronoq"] = source_info()
    print(f"{title} ({'quick' if quick else 'full'})")
    print(f"load average: {', '.join(f'{x:.2f}' for x in os.getloadavg())}   sizes: {sizes}", flush=True)
    t0 = time.perf_counter()
    results = run()
    print("\nsummary (ratio = value / baseline)")
    print(table(results))
    print(f"load average at end: {', '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"total {time.perf_counter() - t0:.1f} s")
    write_json(path, machine, {"sizes": sizes, "quick": quick}, results)
    print(f"wrote {path}")
