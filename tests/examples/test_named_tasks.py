"""examples/tutorials/named_tasks.py (docs/tutorials/named-tasks.md) runs to completion."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from cronoq.server.config import loads_config

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


def test_the_server_section_configures_every_pool_the_app_uses(monkeypatch: pytest.MonkeyPatch) -> None:
    """docs/tutorials/named-tasks.md starts ``cronoq serve`` and one worker per pool of the app:
    the configuration it shows must declare those pools (without one the server has only
    ``default`` and the ``warehouse`` worker stops with "unknown pool")."""
    page = (PROGRAM.parents[2] / "docs" / "tutorials" / "named-tasks.md").read_text()
    blocks = re.findall(r"^```toml\n(.*?)^```", page, re.S | re.M)
    assert len(blocks) == 1, "the page shows the server's configuration"
    configured = {p.name for p in loads_config(blocks[0]).pools}
    monkeypatch.syspath_prepend(str(PROGRAM.parent))
    monkeypatch.delitem(sys.modules, NAME, raising=False)
    app = __import__(NAME).app
    used = {t.pool or "default" for t in app.tasks.values()}
    assert used == {"default", "warehouse"}
    assert used <= configured
    started = set(re.findall(rf"cronoq worker {NAME}:app .*--pool (\w+)", page))
    assert started == used
    assert "cronoq serve --config shop.toml" in page
