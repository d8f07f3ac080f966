"""``examples/demo.py`` (what ``make run`` starts): server + ``cronoq worker`` + submitter.

Each run uses a temporary working directory (so ``cronoq.db`` goes there) and any free ports
(``--grpc-port 0 --http-port 0``).
"""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import time
from pathlib import Path

from server.procs import child_env

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "examples" / "demo.py"


def _cmd(*extra: str) -> list[str]:
    return [sys.executable, str(DEMO), "--grpc-port", "0", "--http-port", "0", *extra]


def test_demo_runs_for_its_duration_and_exits_cleanly(tmp_path: Path) -> None:
    t0 = time.monotonic()
    r = subprocess.run(
        _cmd("--duration", "8"), cwd=tmp_path, env=child_env(), capture_output=True, text=True, timeout=150
    )
    out = r.stdout + r.stderr
    assert r.returncode == 0, out
    assert time.monotonic() - t0 < 120
    assert (tmp_path / "cronoq.db").exists()
    assert "cronoq serve: leading" in out and "cronoq worker: registered" in out
    assert re.search(r"dashboard\s+http://127\.0\.0\.1:\d+/", out)
    completed = re.findall(r"✓ .*succeeded", out)
    assert len(completed) >= 10, out
    assert re.search(r"↻ flaky fetch attempt 1 failed, retrying", out), out
    assert re.search(r"✓ flaky fetch .*succeeded.*'attempts': 3", out), out
    assert re.search(r"✓ dag 1: load .*succeeded", out), out
    assert "critical" in out and "snapshot" in out
    assert re.search(r"\d+ tasks submitted, \d+ finished", out)
    assert "worker exited with 0, server exited with 0" in out
    assert "cronoq serve: stopped" in out and "cronoq worker: stopped" in out


def test_demo_stops_cleanly_on_ctrl_c(tmp_path: Path) -> None:
    log = tmp_path / "demo.log"
    with open(log, "w") as f:
        proc = subprocess.Popen(
            _cmd(),
            cwd=tmp_path,
            env=child_env(),
            stdout=f,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
    try:
        deadline = time.monotonic() + 90
        while "✓" not in log.read_text(errors="replace"):
            assert proc.poll() is None, log.read_text()
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.1)
        proc.send_signal(signal.SIGINT)
        code = proc.wait(90)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    out = log.read_text()
    assert code == 0, out
    assert "worker exited with 0, server exited with 0" in out
