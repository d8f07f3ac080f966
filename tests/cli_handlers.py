"""Handlers for the ``cronoq worker`` tests (tests/test_cli.py): ``tests.cli_handlers:handle``."""

from __future__ import annotations

import os
import sys
import threading
import time
from typing import Any

from cronoq.errors import Permanent


async def handle(lease: Any) -> object:
    """Echo: ``{"echo": <payload>, "attempt": n}``; a payload ``{"fail": true}`` fails permanently."""
    value = lease.value()
    if isinstance(value, dict) and value.get("fail"):
        raise Permanent("asked to fail")
    return {"echo": value, "attempt": lease.attempt}


def handle_sync(lease: Any) -> str:
    """A plain function (the CLI runs it in a thread)."""
    time.sleep(0.01)
    return f"sync:{lease.text()}"


not_callable = 42


def stuck(lease: Any) -> None:
    """A plain function stuck for good (a hung C call, a lock never released): its thread never
    returns, whatever the worker does.  It says so first, on the worker's stdout (the test
    waits for that line: the server's "running" only means the lease was sent)."""
    print(f"stuck: started {lease.task_id}", flush=True)
    threading.Event().wait()


async def exits(lease: Any) -> int:
    """``sys.exit(3)`` for the payload ``"exit"``; otherwise the worker's pid."""
    if lease.text() == "exit":
        sys.exit(3)
    return os.getpid()


def exits_sync(lease: Any) -> int:
    """As :func:`exits`, a plain function (the CLI runs it in a thread)."""
    if lease.text() == "exit":
        sys.exit(3)
    return os.getpid()
