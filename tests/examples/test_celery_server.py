"""examples/celery_server.py (docs/how-to/from-celery.md, with the server) runs as the page
says: a real ``cronoq serve`` with a pool ``images``, a real ``cronoq worker
celery_server:resize``, and the program submitting to it and printing the result."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from server.procs import child_env, start_server, start_worker, stop_worker

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
PROGRAM = EXAMPLES / "celery_server.py"


def test_the_server_example_runs_against_a_server_and_a_worker(tmp_path: Path) -> None:
    sp = start_server(tmp_path, '[[pools]]\nname = "images"\n', name="celery")
    try:
        log = tmp_path / "worker.log"
        argv = [sys.executable, "-m", "cronoq.cli", "worker", "celery_server:resize", "--app-dir",
                str(EXAMPLES), "--pool", "images", "--slots", "8", "--server", sp.grpc]  # fmt: skip
        w = start_worker(log, argv)
        try:
            for _ in range(2):  # the second submit has the same key: the same task and result
                r = subprocess.run(
                    [sys.executable, str(PROGRAM), sp.grpc],
                    env=child_env(),
                    capture_output=True,
                    text=True,
                    timeout=60,
                )
                assert r.returncode == 0, r.stderr
                assert r.stdout.splitlines() == ["succeeded {'image': 7, 'width': 640, 'attempt': 1}"]
        finally:
            stop_worker(w, log)
    finally:
        assert sp.terminate() == 0, sp.log()


def test_the_celery_page_shows_the_program_and_the_commands_that_run_it() -> None:
    page = (ROOT / "docs" / "how-to" / "from-celery.md").read_text(encoding="utf-8")
    assert '--8<-- "examples/celery_server.py"' in page
    assert "cronoq worker celery_server:resize --app-dir examples --pool images" in page
    assert "python examples/celery_server.py 127.0.0.1:7070" in page
    assert 'async with Client("cronoq:7070"' not in page  # (the fragment it replaces)
