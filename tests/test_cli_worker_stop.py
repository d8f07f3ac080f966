"""``cronoq worker`` on SIGTERM with a plain function stuck in its thread (docs/reference/cli.md):
after ``--grace`` the process names the task it abandons and exits 6, and the server gets the
task back (a retryable failure), instead of a process that says "stopped" and never ends."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from cronoq.client import Client
from server.procs import ServerProc, child_env, start_server

ROOT = Path(__file__).resolve().parents[1]

POOLS_TOML = """
[[pools]]
name = "default"
retry = {max_attempts = 3, initial_backoff_s = 30, max_backoff_s = 30}
"""

WORKER = ["worker", "tests.cli_handlers:stuck", "--pool", "default", "--grace", "0.5"]


@pytest.fixture(scope="module")
def srv(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProc]:
    sp = start_server(tmp_path_factory.mktemp("cli-stop"), POOLS_TOML, grace=2.0)
    try:
        yield sp
    finally:
        assert sp.terminate() == 0, sp.log()


def wait_for(path: Path, needle: str, proc: subprocess.Popen[str], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while needle not in path.read_text(errors="replace"):
        assert proc.poll() is None, path.read_text(errors="replace")
        assert time.monotonic() < deadline, f"{needle!r} not seen:\n{path.read_text(errors='replace')}"
        time.sleep(0.05)


async def test_sigterm_ends_a_worker_whose_thread_is_stuck(srv: ServerProc, tmp_path: Path) -> None:
    log = tmp_path / "worker.log"
    env = child_env()
    env["CRONOQ_SERVER"] = srv.grpc
    with open(log, "w") as f:
        proc = subprocess.Popen(
            [sys.executable, "-m", "cronoq.cli", *WORKER],
            cwd=ROOT,
            env=env,
            stdout=f,
            stderr=subprocess.STDOUT,
            text=True,
        )
    try:
        wait_for(log, "cronoq worker: registered", proc)
        async with Client(srv.grpc) as c:
            h = await c.submit(b"x", key="hung-report")
            deadline = time.monotonic() + 30
            while (await c.get(h.id)).status != "running":
                assert time.monotonic() < deadline
                await asyncio.sleep(0.05)
            # (the lease may still be on its way: the function's own line says it runs; CI once
            # sent SIGTERM before it started, and the worker drained nothing and exited 0)
            wait_for(log, f"stuck: started {h.id}", proc)
            proc.send_signal(signal.SIGTERM)
            code = proc.wait(30)
            text = log.read_text()
            assert code == 6, text
            assert f"abandoning 1 running task(s): {h.id} (default key=hung-report)" in text, text
            # the server has the task back, to retry
            info = await c.get(h.id)
            assert info.status in ("retrying", "ready"), info
            assert "worker stopped" in info.message
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
