"""``cronoq worker --run-in process`` end to end: a real ``cronoq serve``, a real worker
subprocess and its child processes (docs/how-to/processes.md): recycling, hard time limit,
heartbeats while a child runs, progress, and no orphan child when the worker is SIGKILLed."""

from __future__ import annotations

import asyncio
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.runtime.processes.waits import (
    alive,
    gone_within,
    leave_nothing,
    read_pid,
    read_pids,
    sigkill_outlived_by_none,
)
from tests.tasks import proc_app

from cronoq import Processes
from cronoq.client import Client

from .procs import ServerProc, child_env, start_server

HERE = Path(__file__).resolve().parent

SERVER_TOML = """
[[pools]]
name = "default"
max = 2

[[pools]]
name = "cpu"
max = 2
lease_ttl_s = 0.6
retry = {max_attempts = 1}
"""


async def _pid_in(path: Path, timeout: float = 20.0) -> int:
    return await read_pid(path, timeout)


def _start_worker(sp: ServerProc, log_path: Path) -> subprocess.Popen[bytes]:
    import sys

    with open(log_path, "wb") as log:
        worker = subprocess.Popen(
            [sys.executable, "-m", "cronoq.cli", "worker", "proc_handlers:handle", "--run-in", "process",
             "--pool", "cpu", "--slots", "2", "--kill-grace", "0.5", "--max-tasks-per-child", "2",
             "--grace", "0.5", "--app-dir", str(HERE), "--server", sp.grpc],
            stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=child_env(),
        )  # fmt: skip
    deadline = time.monotonic() + 30
    while "cronoq worker: registered" not in log_path.read_text(errors="replace"):
        assert worker.poll() is None, log_path.read_text()
        assert time.monotonic() < deadline, log_path.read_text()
        time.sleep(0.05)
    return worker


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProc]:
    sp = start_server(tmp_path_factory.mktemp("procs"), SERVER_TOML, name="procs")
    try:
        yield sp
    finally:
        assert sp.terminate() == 0, sp.log()


async def test_process_worker_end_to_end(server: ServerProc, tmp_path: Path) -> None:
    log = tmp_path / "worker.log"
    worker = _start_worker(server, log)
    try:
        async with Client(server.grpc) as c:
            # recycling by count (--max-tasks-per-child 2), in children of the worker
            pids = []
            for _ in range(3):
                r = await c.submit({"op": "pid"}, pool="cpu", wait=True, wait_timeout=30)
                assert r.result is not None and r.result.status == "succeeded", r
                pids.append(r.result.json()["pid"])
            assert worker.pid not in pids
            assert pids[0] == pids[1] != pids[2]
            # a 2 s task with a 0.6 s lease ttl: the worker heartbeats while its child runs
            r = await c.submit({"op": "sleep", "s": 2}, pool="cpu", wait=True, wait_timeout=30)
            assert r.result is not None and r.result.status == "succeeded", r
            assert r.result.json()["attempt"] == 1
            # the hard time limit: a child spinning with SIGTERM ignored is killed
            pidfile = tmp_path / "spin"
            start = time.monotonic()
            s = await c.submit({"op": "spin", "pidfile": str(pidfile)}, pool="cpu", timeout=1.5)
            pid = await _pid_in(pidfile)
            res = await c.wait(s.id, timeout=30)
            assert res.status == "dead_lettered" and "timed out" in res.message, res
            await gone_within(pid, 3.0)
            assert time.monotonic() - start < 1.5 + 0.5 + 3.0
            # SIGTERM drains the worker (--grace 0.5), then its running child is killed
            pidfile = tmp_path / "drained"
            await c.submit({"op": "spin", "pidfile": str(pidfile)}, pool="cpu")
            pid = await _pid_in(pidfile)
            worker.terminate()
            # the attempt was cut short: the worker says so and exits 6 (docs/reference/cli.md)
            assert worker.wait(30) == 6, log.read_text()
            assert "abandoning 1 running task(s)" in log.read_text()
            await gone_within(pid, 2.0)
    finally:
        if worker.poll() is None:
            worker.terminate()
            assert worker.wait(30) == 0, log.read_text()


async def _two(c: Client, tmp_path: Path, op: str, **fields: Any) -> tuple[list[Any], list[Path]]:
    """Two ``op`` tasks (each with its own pid file) to the cpu pool: their refs and pid files."""
    files = [tmp_path / "a", tmp_path / "b"]
    return [await c.submit({"op": op, "pidfile": str(f)}, pool="cpu", **fields) for f in files], files


async def test_a_killed_child_holds_its_worker_slot_until_exit(server: ServerProc, tmp_path: Path) -> None:
    """The worker's slots bound its children, the ones being killed included: with both slots'
    children timed out and spinning until their SIGKILL, the next task's child starts only
    once one of them has exited."""
    log = tmp_path / "worker.log"
    worker = _start_worker(server, log)
    pids: list[int] = []
    try:
        async with Client(server.grpc) as c:
            spins, files = await _two(c, tmp_path, "spin", timeout=1)
            pids = [await _pid_in(f) for f in files]
            for s in spins:
                res = await c.wait(s.id, timeout=30)
                assert res.status == "dead_lettered" and "timed out" in res.message, res
            r = await c.submit({"op": "others", "pids": pids}, pool="cpu", wait=True, wait_timeout=30)
            assert r.result is not None and r.result.status == "succeeded", r
            assert len(r.result.json()["alive"]) < 2  # never both killed children and a third
        worker.terminate()
        assert worker.wait(30) == 0, log.read_text()
    finally:
        leave_nothing(worker, pids)


async def test_app_process_tasks_on_a_remote_worker(server: ServerProc) -> None:
    """An app's run_in="process" task served by a client Worker (in this process, with
    processes=...): the LeaseHandler runs it in a child with the lease's context."""
    async with Client(server.grpc) as c:
        worker = proc_app.app.worker(server.grpc, "default", processes=Processes(kill_grace=0.5))
        async with worker:
            await worker.wait_registered(20)
            proc_app.app.bind(c)
            try:
                h = await proc_app.on_process.submit(21)
                out = await asyncio.wait_for(_result(h), 30)
            finally:
                proc_app.app.bind(None)
        assert out["n"] == 42 and out["pid"] != os.getpid() and out["attempt"] == 1
        assert out["kind"] == "tests.tasks.proc_app.on_process"


async def _result(h: object) -> dict[str, object]:
    return await h  # type: ignore[misc,no-any-return]


async def test_worker_sigkilled_leaves_no_orphan_children(server: ServerProc, tmp_path: Path) -> None:
    """Neither the children nor the processes their tasks started outlive a SIGKILLed worker."""
    log = tmp_path / "worker.log"
    worker = _start_worker(server, log)
    pids: list[int] = []
    try:
        async with Client(server.grpc) as c:
            _, files = await _two(c, tmp_path, "family")
            for f in files:
                pids += await read_pids(f, 20.0)  # a child and its grandchild
            assert len(pids) == 4 and all(alive(p) for p in pids)
            await sigkill_outlived_by_none(worker, pids)
    finally:
        leave_nothing(worker, pids)
