"""Waits of the process tests: a child's pid file, a process's death (polling with a deadline)."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path


async def read_pid(path: Path, timeout: float = 10.0) -> int:
    """The pid a child wrote to ``path`` (polling with a deadline)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            text = path.read_text()
        except FileNotFoundError:
            text = ""
        if text:
            return int(text)
        await asyncio.sleep(0.01)
    raise AssertionError(f"no pid in {path} after {timeout} s")


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


async def gone_within(pid: int, seconds: float) -> float:
    """Seconds until process ``pid`` is gone; AssertionError if it outlives ``seconds``."""
    start = time.monotonic()
    while alive(pid):
        if time.monotonic() - start > seconds:
            raise AssertionError(f"process {pid} still alive after {seconds} s")
        await asyncio.sleep(0.01)
    return time.monotonic() - start
