"""The handler of the ``cronoq worker --run-in process`` tests (a child imports it by name)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any


def handle(lease: Any) -> dict[str, Any]:
    """``{"op": ...}``: ``pid`` (the child's pid and the lease's fields), ``sleep`` (``s``
    seconds, reporting progress), ``spin`` (write the pid to ``pidfile``, ignore SIGTERM, spin),
    ``others`` (which of ``pids`` run now), ``family`` (start a grandchild that sleeps for an
    hour, write ``"<pid> <grandchild pid>"`` to ``pidfile``, ignore SIGTERM, spin)."""
    job = lease.json()
    op = job["op"]
    if op == "family":
        sub = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)"])
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        Path(job["pidfile"]).write_text(f"{os.getpid()} {sub.pid}")
        while True:
            pass
    if op == "spin":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        Path(job["pidfile"]).write_text(str(os.getpid()))
        while True:
            pass
    if op == "others":  # which of these pids run now (a zombie does not count)
        return {"alive": [p for p in job["pids"] if _runs(p)]}
    if op == "sleep":
        lease.report_progress(1, 2, "sleeping")
        time.sleep(job["s"])
    return {
        "pid": os.getpid(),
        "task_id": lease.task_id,
        "attempt": lease.attempt,
        "cancelled": bool(lease.cancelled),
    }


def _runs(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except OSError:
        return False
