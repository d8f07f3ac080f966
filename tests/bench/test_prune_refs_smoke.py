"""Keeps bench/prune_refs.py from rotting: it runs with tiny sizes and prints its figures (no
timing assertions: docs/benchmarks.md#targets)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.append(str(BENCH))  # appended: bench/server.py must not shadow tests/server

import prune_refs  # noqa: E402


def test_it_prints_the_first_and_the_next_prunes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    prune_refs.main(["--n", "20", "--prunes", "3", "--dir", str(tmp_path)])
    out = capsys.readouterr().out
    assert out.startswith("n=20 first prune: ") and "next 2: median" in out
    assert len(re.findall(r"\d+\.\d ms", out)) == 4
