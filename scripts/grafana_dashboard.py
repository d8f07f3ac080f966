#!/usr/bin/env python3
"""Regenerate the Grafana dashboard shipped in deploy/grafana/cronoq.json.

    python scripts/grafana_dashboard.py            # rewrite deploy/grafana/cronoq.json
    python scripts/grafana_dashboard.py --check    # exit 1 when the committed file is stale

The dashboard reads the Prometheus series of ``cronoq serve``'s ``/metrics`` (see
docs/how-to/prometheus-grafana.md). It is importable as is (Dashboards → New → Import): the
Prometheus data source is an import input (``DS_PROMETHEUS``), and a ``pool`` variable
(multi-select, all by default) filters every per-pool panel.

Only the leader exports per-pool series and totals (a standby exports ``cronoq_leader 0``
and ``cronoq_workers_connected``), so per-pool queries aggregate with ``max by (pool)``: the
result is the leader's figure whichever instance leads. Totals are per-leader counters (they
restart with a new leader's term); ``rate()`` handles those resets.

``tests/test_grafana_dashboard.py`` checks that every metric a query names is one the server
really exports.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "deploy" / "grafana" / "cronoq.json"

DS = {"type": "prometheus", "uid": "${DS_PROMETHEUS}"}
POOL = 'pool=~"$pool"'


def target(expr: str, legend: str, ref: str) -> dict[str, Any]:
    return {"datasource": DS, "expr": expr, "legendFormat": legend, "refId": ref, "range": True}


class Layout:
    """Assigns panel ids and grid positions row by row (24 columns wide)."""

    def __init__(self) -> None:
        self.panels: list[dict[str, Any]] = []
        self.x = 0
        self.y = 0
        self.row_h = 0

    def add(self, panel: dict[str, Any], w: int, h: int) -> None:
        if self.x + w > 24:
            self.x, self.y, self.row_h = 0, self.y + self.row_h, 0
        panel["id"] = len(self.panels) + 1
        panel["gridPos"] = {"x": self.x, "y": self.y, "w": w, "h": h}
        panel["datasource"] = DS
        self.panels.append(panel)
        self.x += w
        self.row_h = max(self.row_h, h)


def stat(title: str, expr: str, description: str, *, thresholds: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "type": "stat",
        "title": title,
        "description": description,
        "targets": [target(expr, title, "A")],
        "fieldConfig": {
            "defaults": {"thresholds": {"mode": "absolute", "steps": thresholds}, "unit": "none"},
            "overrides": [],
        },
        "options": {
            "reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False},
            "colorMode": "background",
            "graphMode": "none",
            "textMode": "value",
        },
    }


def series(
    title: str,
    targets: list[tuple[str, str]],
    description: str,
    *,
    unit: str = "none",
    stack: bool = False,
    max_: float | None = None,
) -> dict[str, Any]:
    defaults: dict[str, Any] = {
        "unit": unit,
        "custom": {
            "drawStyle": "line",
            "lineWidth": 1,
            "fillOpacity": 30 if stack else 5,
            "stacking": {"mode": "normal" if stack else "none", "group": "A"},
            "showPoints": "never",
        },
    }
    if max_ is not None:
        defaults["max"] = max_
        defaults["min"] = 0
    return {
        "type": "timeseries",
        "title": title,
        "description": description,
        "targets": [target(e, legend, chr(ord("A") + i)) for i, (e, legend) in enumerate(targets)],
        "fieldConfig": {"defaults": defaults, "overrides": []},
        "options": {
            "legend": {"displayMode": "list", "placement": "bottom", "showLegend": True},
            "tooltip": {"mode": "multi", "sort": "desc"},
        },
    }


def dashboard() -> dict[str, Any]:
    lay = Layout()
    green, red = "green", "red"
    lay.add(
        stat(
            "Leaders",
            "sum(cronoq_leader)",
            "Server processes that lead (1 expected; 0 during a failover or a database outage).",
            thresholds=[
                {"color": red, "value": None},
                {"color": green, "value": 1},
                {"color": red, "value": 2},
            ],
        ),
        4,
        4,
    )
    lay.add(
        stat(
            "Server processes",
            "count(cronoq_leader)",
            "Scraped server processes (leader + standbys).",
            thresholds=[{"color": red, "value": None}, {"color": green, "value": 2}],
        ),
        4,
        4,
    )
    lay.add(
        stat(
            "Workers connected",
            "max(cronoq_workers_connected)",
            "Remote workers connected to the leader (a standby reports 0).",
            thresholds=[{"color": red, "value": None}, {"color": green, "value": 1}],
        ),
        4,
        4,
    )
    lay.add(
        stat(
            "Pending tasks",
            f"sum(cronoq_pool_pending{{{POOL}}})",
            "Tasks not yet running (blocked, scheduled, ready, retrying) in the selected pools.",
            thresholds=[{"color": green, "value": None}],
        ),
        4,
        4,
    )
    lay.add(
        stat(
            "Running attempts",
            f"sum(cronoq_pool_busy{{{POOL}}})",
            "Busy slots in the selected pools.",
            thresholds=[{"color": green, "value": None}],
        ),
        4,
        4,
    )
    lay.add(
        stat(
            "Dead-lettered (1h)",
            "sum(increase(cronoq_tasks_dead_lettered_total[1h]))",
            "Tasks that ran out of attempts in the last hour.",
            thresholds=[{"color": green, "value": None}, {"color": red, "value": 1}],
        ),
        4,
        4,
    )
    lay.add(
        series(
            "Capacity vs desired vs busy",
            [
                (f"max by (pool) (cronoq_pool_capacity{{{POOL}}})", "{{pool}} capacity"),
                (f"max by (pool) (cronoq_pool_desired{{{POOL}}})", "{{pool}} desired"),
                (f"max by (pool) (cronoq_pool_busy{{{POOL}}})", "{{pool}} busy"),
                (f"max by (pool) (cronoq_pool_held{{{POOL}}})", "{{pool}} held"),
            ],
            "Slots per pool: capacity (granted slots of connected workers), the autoscaler's desired "
            "figure (what KEDA scales on), busy slots, and slots held for fixed starts.",
        ),
        12,
        8,
    )
    lay.add(
        series(
            "Pending by class",
            [(f"sum by (pool, class) (cronoq_pool_pending{{{POOL}}})", "{{pool}} {{class}}")],
            "Tasks not yet running, per priority class.",
            stack=True,
        ),
        12,
        8,
    )
    lay.add(
        series(
            "Queue wait p50 / p99",
            [
                (f'max by (pool) (cronoq_pool_wait_seconds{{{POOL}, quantile="0.5"}})', "{{pool}} p50"),
                (f'max by (pool) (cronoq_pool_wait_seconds{{{POOL}, quantile="0.99"}})', "{{pool}} p99"),
            ],
            "Time from ready to running over the server's metrics window (60 s).",
            unit="s",
        ),
        12,
        8,
    )
    lay.add(
        series(
            "Utilization",
            [
                (f"max by (pool) (cronoq_pool_utilization{{{POOL}}})", "{{pool}} utilization"),
                (f"max by (pool) (cronoq_pool_schedule_efficiency{{{POOL}}})", "{{pool}} efficiency"),
            ],
            "Busy slot-time over available slot-time, and useful run time over provisioned "
            "slot-time, over the metrics window.",
            unit="percentunit",
            max_=1,
        ),
        12,
        8,
    )
    outcomes = ("succeeded", "failed", "dead_lettered", "cancelled", "skipped", "missed", "shed")
    lay.add(
        series(
            "Task outcomes / s",
            [(f"sum(rate(cronoq_tasks_{o}_total[5m]))", o) for o in outcomes],
            "Terminal outcomes per second (5 m rate, whole server).",
            unit="ops",
        ),
        12,
        8,
    )
    lay.add(
        series(
            "Throughput and trouble / s",
            [
                ("sum(rate(cronoq_tasks_submitted_total[5m]))", "submitted"),
                ("sum(rate(cronoq_tasks_dispatched_total[5m]))", "dispatched (attempts)"),
                ("sum(rate(cronoq_tasks_retries_total[5m]))", "retries"),
                ("sum(rate(cronoq_tasks_timeouts_total[5m]))", "timeouts"),
                ("sum(rate(cronoq_tasks_lease_expiries_total[5m]))", "lease expiries"),
                ("sum(rate(cronoq_tasks_stale_completions_total[5m]))", "stale completions"),
            ],
            "Submissions and attempts per second, and the reliability counters.",
            unit="ops",
        ),
        12,
        8,
    )
    lay.add(
        series(
            "Workers connected per pool",
            [(f"max by (pool) (cronoq_pool_workers_connected{{{POOL}}})", "{{pool}}")],
            "Remote workers registered for each pool.",
        ),
        8,
        7,
    )
    lay.add(
        series(
            "Leader",
            [("max by (instance) (cronoq_leader)", "{{instance}}")],
            "1 on the process that leads; a failover shows as the 1 moving between instances.",
            max_=1,
        ),
        8,
        7,
    )
    lay.add(
        series(
            "Quality",
            [
                (f"max by (pool) (cronoq_pool_priority_adherence{{{POOL}}})", "{{pool}} priority adherence"),
                (f"max by (pool) (cronoq_pool_fixed_start_hit_rate{{{POOL}}})", "{{pool}} fixed-start hits"),
            ],
            "Share of dispatches in priority order, and of fixed starts within tolerance (1 when "
            "there is no data).",
            unit="percentunit",
            max_=1,
        ),
        8,
        7,
    )
    return {
        "__inputs": [
            {
                "name": "DS_PROMETHEUS",
                "label": "Prometheus",
                "description": "The Prometheus that scrapes cronoq serve's /metrics",
                "type": "datasource",
                "pluginId": "prometheus",
                "pluginName": "Prometheus",
            }
        ],
        "__requires": [
            {"type": "grafana", "id": "grafana", "name": "Grafana", "version": "10.0.0"},
            {"type": "datasource", "id": "prometheus", "name": "Prometheus", "version": "1.0.0"},
            {"type": "panel", "id": "stat", "name": "Stat", "version": ""},
            {"type": "panel", "id": "timeseries", "name": "Time series", "version": ""},
        ],
        "uid": "cronoq-overview",
        "title": "cronoq",
        "description": "Pools, queues and task outcomes of a cronoq server (deploy/grafana/cronoq.json)",
        "tags": ["cronoq"],
        "editable": True,
        "graphTooltip": 1,
        "schemaVersion": 39,
        "version": 1,
        "refresh": "10s",
        "time": {"from": "now-1h", "to": "now"},
        "timepicker": {},
        "timezone": "",
        "annotations": {"list": []},
        "links": [],
        "templating": {
            "list": [
                {
                    "name": "pool",
                    "label": "pool",
                    "type": "query",
                    "datasource": DS,
                    "query": {"query": "label_values(cronoq_pool_capacity, pool)", "refId": "pool"},
                    "definition": "label_values(cronoq_pool_capacity, pool)",
                    "refresh": 2,
                    "multi": True,
                    "includeAll": True,
                    "allValue": ".*",
                    "current": {"selected": True, "text": ["All"], "value": ["$__all"]},
                    "sort": 1,
                }
            ]
        },
        "panels": lay.panels,
    }


def render() -> str:
    return json.dumps(dashboard(), indent=2) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="exit 1 when the committed file is stale")
    args = ap.parse_args()
    if args.check:
        if not OUT.exists() or OUT.read_text() != render():
            print(f"{OUT.relative_to(ROOT)} is stale: run scripts/grafana_dashboard.py", file=sys.stderr)
            return 1
        return 0
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(render())
    return 0


if __name__ == "__main__":
    sys.exit(main())
