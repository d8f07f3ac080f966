"""Waits of the process tests: a child's pid file, a process's death (polling with a deadline),
and the end of a SIGKILLed parent's processes."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import time
from pathlib import Path


async def read_pid(path: Path, timeout: float = 10.0) -> int:
    """The pid a child wrote to ``path`` (polling with a deadline)."""
    return (await read_pids(path, timeout))[0]


async def read_pids(path: Path, timeout: float = 10.0) -> list[int]:
    """The pids a child wrote to ``path``, separated by spaces (polling with a deadline)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            text = path.read_text()
        except FileNotFoundError:
            text = ""
        if text:
            return [int(p) for p in text.split()]
        await asyncio.sleep(0.01)
    raise AssertionError(f"no pid in {path} after {timeout} s")


def alive(pid: int) -> bool:
    """Whether process ``pid`` runs (a zombie, dead but not yet reaped by its parent, does not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except OSError:
        return True  # (no /proc: signal 0 is all we can tell)


async def gone_within(pid: int, seconds: float) -> float:
    """Seconds until process ``pid`` is gone; AssertionError if it outlives ``seconds``."""
    start = time.monotonic()
    while alive(pid):
        if time.monotonic() - start > seconds:
            raise AssertionError(f"process {pid} still alive after {seconds} s")
        await asyncio.sleep(0.01)
    return time.monotonic() - start


async def sigkill_outlived_by_none(parent: subprocess.Popen[bytes], pids: list[int]) -> None:
    """SIGKILL ``parent`` (a scheduler or worker process); each of ``pids`` must be gone
    within 5 s."""
    parent.kill()
    parent.wait(10)
    for p in pids:
        await gone_within(p, 5.0)


def leave_nothing(parent: subprocess.Popen[bytes], pids: list[int]) -> None:
    """(A test's ``finally``) SIGKILL ``parent`` and whichever of ``pids`` still runs: a failed
    test leaves no spinning or hour-long process behind."""
    if parent.poll() is None:
        parent.kill()
        parent.wait()
    for p in pids:
        if alive(p):
            os.kill(p, signal.SIGKILL)
