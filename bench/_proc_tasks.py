"""The task functions of bench/processes.py (a child process imports them by name)."""

from __future__ import annotations

import os
import signal
import time
from typing import Any


def noop(ctx: Any, payload: Any) -> None:
    return None


def plain_noop(payload: Any) -> None:
    """The baseline's no-op (ProcessPoolExecutor passes no context)."""
    return None


def burn(ctx: Any, seconds: float) -> int:
    """Pure Python for ``seconds`` of CPU time of this process; its pid."""
    end = time.process_time() + seconds
    n = 0
    while time.process_time() < end:
        n += 1
    return os.getpid()


def stuck(ctx: Any, payload: Any) -> None:
    """Spin forever, ignoring SIGTERM (only the SIGKILL after kill_grace ends it)."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    while True:
        pass
