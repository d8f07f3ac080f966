"""The Grafana dashboard and alert rules shipped in deploy/ (docs/how-to/prometheus-grafana.md).

The dashboard (deploy/grafana/cronoq.json) must be importable (the data source an import
input, every panel with an id, a grid position and PromQL targets on that data source) and be
what ``scripts/grafana_dashboard.py`` generates. The dashboard's queries and the alert rules
(deploy/prometheus/cronoq-alerts.yaml) must use only series a real ``cronoq serve`` exports:
their metric names and label names are checked against a scrape of a running server's
``/metrics``.
"""

from __future__ import annotations

import importlib.util
import json
import re
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from server.procs import start_server

ROOT = Path(__file__).resolve().parent.parent
DASHBOARD = ROOT / "deploy" / "grafana" / "cronoq.json"
ALERTS = ROOT / "deploy" / "prometheus" / "cronoq-alerts.yaml"

#: PromQL words that look like metric names but are not (functions, keywords, label names)
PROMQL_WORDS = {
    *("sum", "max", "min", "count", "rate", "increase", "label_values"),
    *("by", "without", "and", "or", "unless"),
}


def dashboard() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(DASHBOARD.read_text())
    return data


def exprs() -> list[str]:
    out = [t["expr"] for p in dashboard()["panels"] for t in p["targets"]]
    out += [v["definition"] for v in dashboard()["templating"]["list"]]
    return out + alert_exprs()


def alert_exprs() -> list[str]:
    rules = yaml.safe_load(ALERTS.read_text())
    return [r["expr"] for g in rules["groups"] for r in g["rules"]]


def metric_names(expr: str) -> set[str]:
    no_strings = re.sub(r'"[^"]*"', '""', expr)
    no_ranges = re.sub(r"\[[^\]]*\]", "", no_strings)
    no_selectors = re.sub(r"\{[^}]*\}", "", no_ranges)
    no_groupings = re.sub(r"\b(by|without)\s*\([^)]*\)", "", no_selectors)
    words = set(re.findall(r"[a-zA-Z_:][a-zA-Z0-9_:]*", no_groupings))
    return words - PROMQL_WORDS - {"pool", "instance"}


def label_names(expr: str) -> set[str]:
    names: set[str] = set()
    for sel in re.findall(r"\{([^}]*)\}", expr):
        names |= set(re.findall(r"(\w+)\s*=~?", sel))
    for grp in re.findall(r"\b(?:by|without)\s*\(([^)]*)\)", expr):
        names |= {x.strip() for x in grp.split(",") if x.strip()}
    return names


@pytest.fixture(scope="module")
def scraped(tmp_path_factory: pytest.TempPathFactory) -> dict[str, set[str]]:
    """metric name -> label names, from a real server's /metrics."""
    srv = start_server(tmp_path_factory.mktemp("grafana"), '[[pools]]\nname = "default"\n')
    try:
        with urllib.request.urlopen(f"http://{srv.http}/metrics", timeout=10) as r:
            text = r.read().decode()
    finally:
        assert srv.terminate() == 0
    out: dict[str, set[str]] = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            out.setdefault(s.name, set()).update(s.labels)
    return out


def test_dashboard_is_what_the_generator_makes() -> None:
    spec = importlib.util.spec_from_file_location(
        "grafana_dashboard", ROOT / "scripts" / "grafana_dashboard.py"
    )
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert DASHBOARD.read_text() == mod.render(), "stale: run scripts/grafana_dashboard.py"


def test_dashboard_is_importable() -> None:
    d = dashboard()
    assert d["uid"] and d["title"] and d["schemaVersion"] >= 36
    (inp,) = d["__inputs"]
    assert inp["name"] == "DS_PROMETHEUS" and inp["pluginId"] == "prometheus"
    ids = [p["id"] for p in d["panels"]]
    assert len(ids) == len(set(ids))
    for p in d["panels"]:
        assert p["type"] in {"stat", "timeseries"}
        assert {"x", "y", "w", "h"} <= p["gridPos"].keys() and p["gridPos"]["x"] + p["gridPos"]["w"] <= 24
        assert p["targets"], p["title"]
        for t in p["targets"]:
            assert t["datasource"] == {"type": "prometheus", "uid": "${DS_PROMETHEUS}"}
            assert t["expr"].count("(") == t["expr"].count(")"), t["expr"]


def test_dashboard_has_the_panels_operators_need() -> None:
    titles = {p["title"] for p in dashboard()["panels"]}
    for want in (
        "Capacity vs desired vs busy",
        "Pending by class",
        "Queue wait p50 / p99",
        "Utilization",
        "Task outcomes / s",
        "Workers connected",
        "Leader",
    ):
        assert want in titles, want


def test_alert_rules_are_well_formed() -> None:
    rules = yaml.safe_load(ALERTS.read_text())
    (group,) = rules["groups"]
    names = [r["alert"] for r in group["rules"]]
    assert len(names) == len(set(names)) and "CronoqNoLeader" in names
    for r in group["rules"]:
        assert r["labels"]["severity"] in {"critical", "warning"}
        assert r["annotations"]["summary"]
        assert r["expr"].count("(") == r["expr"].count(")"), r["expr"]


def test_every_queried_metric_is_exported(scraped: dict[str, set[str]]) -> None:
    used: set[str] = set()
    for e in exprs():
        names = metric_names(e)
        assert names, e
        used |= names
        for name in names:
            assert name in scraped, f"{name} (in {e!r}) is not exported by /metrics"
    # the panels the issue asks for use these
    assert {"cronoq_pool_capacity", "cronoq_pool_desired", "cronoq_pool_busy", "cronoq_leader"} <= used


def test_queried_labels_exist_on_their_series(scraped: dict[str, set[str]]) -> None:
    for e in exprs():
        for name in metric_names(e):
            wanted = label_names(e) - {"instance"}  # added by Prometheus at scrape time
            if name in {"cronoq_leader", "cronoq_workers_connected"} or name.startswith("cronoq_tasks_"):
                assert not wanted, e
            else:
                assert wanted <= scraped[name], f"{e!r}: {name} has labels {scraped[name]}"
