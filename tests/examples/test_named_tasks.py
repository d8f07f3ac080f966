"""examples/tutorials/named_tasks.py (docs/tutorials/named-tasks.md) runs to completion."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

NAME = "named_tasks"
PROGRAM = Path(__file__).resolve().parents[2] / "examples" / "tutorials" / f"{NAME}.py"


def test_the_tutorial_program_runs() -> None:
    r = subprocess.run([sys.executable, str(PROGRAM)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == [
        "charged: ch_42",
        "receipt: {'to': 'ann@example.com', 'charge': 'ch_42'}",
        "ships on: 2026-01-05 date",
        "batch: ch_43 2026-01-09",
        "rejected: task 'shop.ship', argument 'order_id': expected int, got 'forty-two'",
        "schedules: ['shop.purge_carts']",
    ]
