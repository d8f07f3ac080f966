"""examples/tutorials/order_pipeline.py (docs/tutorials/order-pipeline.md) runs to completion."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

NAME = "order_pipeline"
PROGRAM = Path(__file__).resolve().parents[2] / "examples" / "tutorials" / f"{NAME}.py"


def test_the_tutorial_program_runs() -> None:
    r = subprocess.run([sys.executable, str(PROGRAM)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == [
        "sent 25.00 due 2026-01-16 to ann@example.com (after task 2 succeeded)",
        "reminder due: 2026-02-01",
        "8 orders from 2 customers; failed: ['customer c3 has no orders']",
        "strict total: skipped",
    ]
