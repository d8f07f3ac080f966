"""Plot a benchmark's figures as ratios to their same-run baselines (the docs' benchmark images).

Run ``python bench/plot.py RESULT.json OUT.png [--title TEXT]`` on the JSON any of
``bench/throughput.py``, ``punctuality.py``, ``durable.py``, ``server.py`` or ``failover.py``
writes (``--json PATH``). Each figure becomes one horizontal bar: ``value / baseline`` on a log
axis, with the baseline (1.0) as a vertical line. A bar is green when the figure beats its
baseline in its own direction (higher throughput, lower latency or memory) and orange when it
does not; figures without a measured baseline are left out and listed under the plot. The
machine's load average during the run is in the title, because every figure on a shared
machine is only meaningful beside its baseline.

matplotlib (the ``bench`` extra) is imported only here, with the Agg backend (no display).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any

GOOD = "#2e7d32"
BAD = "#ef6c00"


def bars(doc: dict[str, Any]) -> tuple[list[dict[str, Any]], list[str]]:
    """The figures that have a baseline, and the names of those that have none."""
    shown: list[dict[str, Any]] = []
    missing: list[str] = []
    for r in doc.get("results", []):
        ratio = r.get("ratio")
        if not isinstance(ratio, (int, float)) or not math.isfinite(ratio) or ratio <= 0:
            missing.append(str(r.get("name", "?")))
            continue
        shown.append(r)
    return shown, missing


def load_note(doc: dict[str, Any]) -> str:
    machine = doc.get("machine", {})
    load = machine.get("loadavg") or []
    cpus = machine.get("cpu_count")
    if not load:
        return ""
    return f"load average {load[0]:.2f} on {cpus} CPUs"


def plot(doc: dict[str, Any], out: Path, title: str | None = None) -> int:
    """Write the PNG; returns how many figures it shows."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch
    from matplotlib.ticker import FuncFormatter, LogLocator

    shown, missing = bars(doc)
    if not shown:
        raise SystemExit(f"no figure with a baseline in the results ({len(missing)} without one)")
    labels = [f"{r['name']}\nvs {r['baseline_name']}" for r in shown]
    ratios = [float(r["ratio"]) for r in shown]
    better = [(x >= 1) if r["higher_is_better"] else (x <= 1) for x, r in zip(ratios, shown)]
    height = 0.9 + 0.55 * len(shown)
    fig, ax = plt.subplots(figsize=(10, height))
    y = list(range(len(shown)))[::-1]
    ax.barh(y, ratios, color=[GOOD if b else BAD for b in better], height=0.6)
    ax.axvline(1.0, color="#444", linewidth=1, linestyle="--")
    ax.set_xscale("log")
    lo, hi = min(*ratios, 1.0), max(*ratios, 1.0)
    ax.set_xlim(lo / 1.6, hi * 2.6)

    ax.xaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    ax.xaxis.set_minor_locator(LogLocator(base=10, subs=()))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:g}×"))
    ax.legend(
        handles=[
            Patch(color=GOOD, label="beats its baseline"),
            Patch(color=BAD, label="behind its baseline"),
        ],
        loc="lower right",
        fontsize=7.5,
    )
    ax.set_yticks(y)
    ax.set_yticklabels(labels, fontsize=7.5)
    for yy, x, r in zip(y, ratios, shown):
        arrow = "higher is better" if r["higher_is_better"] else "lower is better"
        ax.text(x * 1.04, yy, f"{x:.2f}× ({arrow})", va="center", fontsize=7.5)
    ax.set_xlabel("value / same-run baseline (log scale; dashed line = baseline)")
    head = title or "cronoq benchmark"
    note = load_note(doc)
    ax.set_title(f"{head}\n{note}" if note else head, fontsize=10)
    if missing:
        fig.text(0.01, 0.005, "no baseline measured: " + "; ".join(missing), fontsize=6.5, wrap=True)
    fig.tight_layout(rect=(0, 0.03 if missing else 0, 1, 1))
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return len(shown)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("result", type=Path, help="a bench --json output file")
    p.add_argument("out", type=Path, help="the PNG to write")
    p.add_argument("--title", default=None)
    args = p.parse_args(argv)
    doc = json.loads(args.result.read_text())
    n = plot(doc, args.out, args.title)
    print(f"wrote {args.out} ({n} figures)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
