"""``cronoq worker`` with a task that calls ``sys.exit()`` (docs/reference/behaviour.md#reliability):
the task's attempt fails retryably with "SystemExit: 3" and the worker goes on serving, instead
of a worker process that exits with the task's code and leaves the task to kill the next worker
that takes it when its lease expires."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from cronoq.client import Client
from server.procs import ServerProc, child_env, start_server, start_worker, stop_worker

ROOT = Path(__file__).resolve().parents[1]

POOLS_TOML = """
[[pools]]
name = "default"
retry = {max_attempts = 2, initial_backoff_s = 0, max_backoff_s = 0}
"""


@pytest.fixture(scope="module")
def srv(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProc]:
    sp = start_server(tmp_path_factory.mktemp("cli-exit"), POOLS_TOML)
    try:
        yield sp
    finally:
        assert sp.terminate() == 0, sp.log()


@pytest.mark.parametrize("handler", ["exits", "exits_sync"], ids=["async", "thread"])
async def test_a_task_calling_sys_exit_fails_and_the_worker_serves_on(
    srv: ServerProc, tmp_path: Path, handler: str
) -> None:
    log = tmp_path / "worker.log"
    env = child_env()
    env["CRONOQ_SERVER"] = srv.grpc
    argv = [sys.executable, "-m", "cronoq.cli", "worker", f"tests.cli_handlers:{handler}"]
    proc: subprocess.Popen[bytes] = start_worker(
        log, [*argv, "--pool", "default", "--slots", "1"], cwd=ROOT, env=env
    )
    try:
        async with Client(srv.grpc) as c:
            h = await c.submit(b"exit", key=f"exit-{handler}")
            res = await c.wait(h.id, timeout=30)
            # both attempts ran on the one worker, which is still up
            assert (res.status, res.message) == ("dead_lettered", "SystemExit: 3"), log.read_text()
            assert (await c.get(h.id)).attempt == 2
            assert proc.poll() is None, log.read_text()
            ok = await c.wait((await c.submit(b"next")).id, timeout=30)
            assert (ok.status, ok.json()) == ("succeeded", proc.pid)  # the same worker serves on
    finally:
        if proc.poll() is None:
            stop_worker(proc, log)
        else:
            raise AssertionError(f"the worker exited with {proc.returncode}:\n{log.read_text()}")
