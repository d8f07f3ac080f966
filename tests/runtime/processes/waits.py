"""Waits of the process tests: a child's pid file, a process's death (polling with a deadline)."""

from __future__ import annotations

import asyncio
import os
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
