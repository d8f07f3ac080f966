"""Keeps bench/sqlite_commit.py from rotting: every phase comes out, with tiny sizes (no timing
assertions: docs/benchmarks.md#targets)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.append(str(BENCH))  # appended: bench/server.py must not shadow tests/server

import sqlite_commit  # noqa: E402


def test_every_phase_comes_out(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    sqlite_commit.main(["--n", "5", "--rounds", "2", "--repeat", "1", "--split", "--dir", str(tmp_path)])
    lines = [ln for ln in capsys.readouterr().out.splitlines() if "total" in ln]
    assert [ln.split()[0] for ln in lines] == ["store", "no", "execute"]
    for ln in lines:
        figures = [float(x) for x in re.findall(r"(\d+\.\d+)", ln)]
        assert len(figures) == 4 and figures[-1] > 0, ln
