"""Keeps bench/durable.py from rotting: every store runs with tiny sizes.

No timing assertions (docs/benchmarks.md#targets: targets are measured by ``bench/``, never by timed tests);
only that each figure comes out positive, that group commit batched (fewer commits than
tasks) and that the JSON report is written.  PostgreSQL figures are skipped, saying why, when
the server cannot be reached.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.append(str(BENCH))  # appended: bench/server.py must not shadow tests/server

import durable  # noqa: E402

from services import missing_service  # noqa: E402

TINY = {"n": 300, "concurrency": 32, "slots": 16, "repeat": 1, "fsync_n": 200}


@pytest.mark.parametrize("kind", ["memory", "sqlite", "sqlite_nosync", "postgres"])
def test_run_once(kind: str, tmp_path: Path) -> None:
    if kind == "postgres" and (why := durable.pg_reachable()):
        missing_service("PostgreSQL", why)
    got = durable.measure(kind, TINY, str(tmp_path))
    assert math.isfinite(got["tasks_per_s"]) and got["tasks_per_s"] > 0
    if kind != "memory":
        assert got["mutations_per_task"] >= 2  # Submitted + the terminal status at least
        assert 0 < got["commits_per_task"] < 1  # group commit: fewer commits than tasks


def test_sqlite_fsync_count() -> None:
    got = durable.sqlite_fsyncs("sqlite", TINY)
    if got is None:
        pytest.skip("strace is not installed")
    assert "error" not in got, got
    assert got["fsyncs"] >= got["commits"] > 0  # synchronous=FULL: at least one per commit


def test_cli_quick_writes_json(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(durable.SIZES, "quick", TINY)
    out = tmp_path / "d.json"
    assert durable.main(["--quick", "--only", "sqlite", "--no-fsyncs", "--json", str(out)]) == 0
    doc = json.loads(out.read_text())
    names = [r["name"] for r in doc["results"]]
    assert names == ["sqlite tasks/s", "sqlite commits/task"]
    assert all(r["value"] > 0 and r["baseline"] > 0 for r in doc["results"])
    assert doc["machine"]["loadavg"]
