"""examples/celery_canvas.py (docs/how-to/from-celery.md#chains-groups-and-chords) runs to
completion: its asserts are the canvas table's claims."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PROGRAM = ROOT / "examples" / "celery_canvas.py"


def test_the_canvas_example_runs() -> None:
    r = subprocess.run([sys.executable, str(PROGRAM)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == ["chain, group, chord, link_error: ok"]


def test_the_celery_page_shows_the_example_and_no_stale_text() -> None:
    page = (ROOT / "docs" / "how-to" / "from-celery.md").read_text(encoding="utf-8")
    assert '--8<-- "examples/celery_canvas.py"' in page
    assert "being added" not in page
    canvas = page.split("## Chains, groups and chords", 1)[1].split("\n## ", 1)[0]
    lines = canvas.splitlines()
    rows = [i for i, line in enumerate(lines) if line.startswith("|")]
    assert rows == list(range(rows[0], rows[-1] + 1)), "the canvas table is one block"
    table = "\n".join(lines[i] for i in rows)
    for celery in ("| `chain(", "| `group(", "| `chord(", "link_error=", "| `chain(...)` by task id"):
        assert celery in table, celery
