"""``examples/demo.py`` (what ``make run`` starts): server + ``cronoq worker`` + submitter.

Each run uses a temporary working directory (so ``cronoq.db`` goes there) and any free ports
(``--grpc-port 0 --http-port 0``).
"""

from __future__ import annotations

import asyncio
import importlib.util
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

import pytest

from cronoq.client import ClientError, Event
from server.procs import child_env

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "examples" / "demo.py"
SUMMARY_RE = re.compile(r"(\d+) tasks submitted, (\d+) of them finished")


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
    # the suggested submit names a task the demo worker serves (a plain payload would wait)
    assert re.search(r"cronoq submit --task resize --args '\[7\]' --wait --server 127\.0\.0\.1:\d+", out)
    completed = re.findall(r"✓ .*succeeded", out)
    assert len(completed) >= 10, out
    assert re.search(r"↻ flaky fetch attempt 1 failed, retrying", out), out
    assert re.search(r"✓ flaky fetch .*succeeded.*'attempts': 3", out), out
    assert re.search(r"✓ dag 1: load .*succeeded", out), out
    assert "critical" in out and "snapshot" in out
    m = SUMMARY_RE.search(out)
    assert m is not None, out
    assert 0 < int(m[2]) <= int(m[1]), m[0]
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


# ---------------------------------------------------------------------------- the closing line


def _load_demo(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    monkeypatch.syspath_prepend(str(DEMO.parent))  # demo.py imports demo_worker from there
    spec = importlib.util.spec_from_file_location("cronoq_demo_example", DEMO)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, module)  # (its dataclasses look themselves up)
    spec.loader.exec_module(module)
    return module


class FakeClient:
    """What ``Submitter.on_event`` asks the server: ``get`` (kind, priority, creation time) and
    ``wait`` (a result to show); ``on_get`` runs during a ``get``, as a submit returning would."""

    def __init__(self, infos: dict[int, tuple[str, float]]) -> None:
        self.infos = infos
        self.on_get: dict[int, Any] = {}

    async def get(self, ref: int, call_timeout: float | None = None) -> SimpleNamespace:
        if ref in self.on_get:
            self.on_get.pop(ref)()
        if ref not in self.infos:
            raise ClientError("not_found", f"task {ref} not found")
        kind, created = self.infos[ref]
        return SimpleNamespace(kind=kind, priority="normal", created_at=created)

    async def wait(self, ref: int, timeout: float | None = None) -> SimpleNamespace:
        return SimpleNamespace(value=lambda: None)


def _ev(task_id: int, status: str) -> Event:
    return Event(id=task_id, pool="default", key=None, status=status, attempt=1, at=0.0, message="")


def test_the_closing_line_counts_only_submitted_tasks_as_finished(monkeypatch: pytest.MonkeyPatch) -> None:
    """Schedule occurrences and tasks of earlier runs finish too, but they were not submitted by
    this run: counting them among the finished read "70 finished of 69 submitted".  They are
    counted apart; a task of ours that finishes before its submit returned is still ours."""
    demo = _load_demo(monkeypatch)
    now = time.time()
    client = FakeClient(
        {3: ("tick", now + 1), 4: ("tick", now + 6), 5: ("resize", now - 3600), 6: ("api", now)}
    )
    sub = demo.Submitter(client, "run", 2.0, time.monotonic())
    for task_id in (1, 2):
        sub.sent[task_id] = demo.Sent(f"resize {task_id}", "normal", time.monotonic())
    # task 6 finishes while its submit is still returning: noted during the lookup
    client.on_get[6] = lambda: sub.sent.setdefault(6, demo.Sent("api call 6", "high", time.monotonic()))

    async def feed() -> None:
        await sub.on_event(_ev(1, "retrying"))
        await sub.on_event(_ev(5, "retrying"))  # (an earlier run's task: not this run's retry)
        for task_id, status in [(1, "succeeded"), (2, "failed"), (3, "succeeded"), (4, "succeeded")]:
            await sub.on_event(_ev(task_id, status))
        for task_id, status in [(5, "succeeded"), (6, "succeeded"), (7, "succeeded")]:
            await sub.on_event(_ev(task_id, status))

    asyncio.run(feed())
    line = sub.summary()
    m = SUMMARY_RE.search(line.replace("[bold]", "").replace("[/bold]", ""))
    assert m is not None, line
    assert (int(m[1]), int(m[2])) == (3, 3), line
    assert "(1 failed, 2 succeeded), 1 retry\n" in line
    assert line.endswith(
        "also finished: 2 schedule occurrences, 1 task from an earlier run, 1 task the server no longer knows"
    ), line
