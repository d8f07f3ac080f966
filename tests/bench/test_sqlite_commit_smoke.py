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


def test_apsw_comparison_comes_out(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("apsw")
    argv = ["--apsw", "--sizes", "2,20", "--rounds", "2", "--commits", "2", "--arms", "sqlite3,apsw"]
    sqlite_commit.main([*argv, "--dir", str(tmp_path)])
    out = capsys.readouterr().out
    rows = [r for r in map(str.split, out.splitlines()) if r and re.fullmatch(r"[\d. ]+", " ".join(r[1:]))]
    assert [r[0] for r in rows] == ["sqlite3", "apsw", "sqlite3", "apsw"], out
    for r in rows:
        assert len(r) == 9 and float(r[4]) > 0, r  # fold, stmts, COMMIT, CPU, wall, 3 ratios
    assert [r[6] for r in rows[::2]] == ["1.000", "1.000"]  # (sqlite3: the base)
