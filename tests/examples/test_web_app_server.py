"""examples/tutorials/web_app_server.py (docs/tutorials/web-app.md#on-the-server-instead): a
FastAPI app with a lifespan Client and ``app.bind``, a real ``cronoq serve`` and a remote worker
process whose task submits a task, run to completion."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("fastapi", reason="the tutorial's web app is a FastAPI app (the dev extra has it)")

NAME = "web_app_server"
PROGRAM = Path(__file__).resolve().parents[2] / "examples" / "tutorials" / f"{NAME}.py"


def test_web_app_server(tmp_path: Path) -> None:
    cmd = [sys.executable, str(PROGRAM)]
    r = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=90)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.splitlines() == [
        "POST /orders/7: 202 duplicate=False",
        "POST /orders/8: 202 duplicate=False",
        # the same key: the retried POST returns the existing task
        "POST /orders/7: 202 duplicate=True",
        # the receipts were submitted by the checkout tasks, on the worker
        "order 7: succeeded, receipt for order 7 sent to ann@example.com",
        "order 8: succeeded, receipt for order 8 sent to ann@example.com",
        "POST /orders/seven: 422",
        "worker exited with 0",
        "server exited with 0",
    ]
