"""The benchmark plots can be made again from the committed results, and the configuration
examples on the reference page are valid configurations."""

from __future__ import annotations

import importlib.util
import json
import re
import sys
from pathlib import Path
from types import ModuleType

import pytest
from tests.docs.conftest import DOCS, ROOT

BENCH_ASSETS = DOCS / "assets" / "bench"


def _plot_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_plot", ROOT / "bench" / "plot.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("bench_plot", mod)
    spec.loader.exec_module(mod)
    return mod


def _result(name: str, ratio: float, higher: bool = True) -> dict[str, object]:
    return {"name": name, "ratio": ratio, "higher_is_better": higher, "baseline_name": "asyncio"}


def test_plot_keeps_figures_with_a_baseline(tmp_path: Path) -> None:
    plot = _plot_module()
    doc = {
        "machine": {"loadavg": [3.5, 2.0, 1.0], "cpu_count": 2},
        "results": [
            _result("tasks/s", 0.5),
            _result("latency", 2.0, higher=False),
            _result("celery", float("nan")),
        ],
    }
    shown, missing = plot.bars(doc)
    assert [r["name"] for r in shown] == ["tasks/s", "latency"] and missing == ["celery"]
    assert plot.load_note(doc) == "load average 3.50 on 2 CPUs"
    out = tmp_path / "x.png"
    assert plot.plot(doc, out, "t") == 2
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize("name", ["throughput", "punctuality", "durable", "server", "failover", "progress"])
def test_every_committed_plot_has_its_results(name: str) -> None:
    plot = _plot_module()
    assert (BENCH_ASSETS / f"{name}.png").is_file()
    doc = json.loads((BENCH_ASSETS / f"{name}.json").read_text())
    shown, _ = plot.bars(doc)
    assert shown, f"{name}.json has no figure with a baseline"
    page = (DOCS / "benchmarks.md").read_text(encoding="utf-8")
    assert f"assets/bench/{name}.png" in page


def test_config_examples_are_valid() -> None:
    from cronoq.server.config import loads_config

    page = (DOCS / "reference" / "config.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```toml\n(.*?)```", page, re.DOTALL)
    assert blocks
    env = {"CRONOQ_ADMIN_TOKEN": "an-admin-token-of-some-length", "DATABASE_URL": "postgresql://h/db"}
    for text in blocks:
        cfg = loads_config(text, env=env)
        assert cfg.pools
