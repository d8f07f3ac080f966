"""``examples/cpu_bound.py`` (docs/how-to/processes.md) runs and prints what the page says."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_cpu_bound_example(tmp_path: Path) -> None:
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    r = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "cpu_bound.py")],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    out = r.stdout
    assert r.returncode == 0, out + r.stderr
    assert "Traceback" not in r.stderr, r.stderr
    assert "rendered 8 pages in 2 processes" in out
    assert "loop stayed responsive: True" in out
    assert "rendered in the loop's own process: False" in out
    m = re.search(r"^stuck: dead_lettered \(attempt timed out\) after (\d+\.\d) s$", out, re.M)
    assert m and float(m.group(1)) < 1 + 0.5 + 0.5, out
    assert "crash: dead_lettered (exit code 7)" in out
    assert "still serving: 1 page" in out
