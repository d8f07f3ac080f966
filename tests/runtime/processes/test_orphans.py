"""No process outlives a SIGKILLed scheduler, even while its child is stuck in C code holding
the GIL (so the child's own pipe watchdog cannot run): the child, the processes its task
started and the forkserver all end (docs/how-to/processes.md#guarantees)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.runtime.processes.waits import alive, leave_nothing, read_pids, sigkill_outlived_by_none

HERE = Path(__file__).resolve().parent


def _parent_of(pid: int) -> int:
    with open(f"/proc/{pid}/stat", "rb") as f:
        return int(f.read().rsplit(b")", 1)[1].split()[1])


async def test_a_sigkilled_scheduler_leaves_nothing_behind(tmp_path: Path) -> None:
    pidfile = tmp_path / "pids"
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    sched = subprocess.Popen([sys.executable, str(HERE / "killed_scheduler.py"), str(pidfile)], env=env)
    pids: list[int] = []
    try:
        child, grandchild = await read_pids(pidfile, 30.0)
        forkserver = _parent_of(child)
        pids = [child, grandchild, forkserver]
        assert forkserver != sched.pid and _parent_of(forkserver) == sched.pid
        assert all(alive(p) for p in pids)
        await sigkill_outlived_by_none(sched, pids)
    finally:
        leave_nothing(sched, pids)
