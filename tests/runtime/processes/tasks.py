"""Module-level task functions for the process tests (a child imports them by name)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from cronoq import Permanent, Retryable

_LEAK: list[bytearray] = []


def pid(ctx: Any, payload: Any) -> dict[str, Any]:
    """The child's pid and what its context shows."""
    return {
        "pid": os.getpid(),
        "id": ctx.id,
        "kind": ctx.kind,
        "key": ctx.key,
        "attempt": ctx.attempt,
        "tags": ctx.tags,
        "deadline": ctx.deadline,
        "payload": payload,
    }


def write_pid(path: str) -> None:
    Path(path).write_text(str(os.getpid()))


def spin(ctx: Any, payload: dict[str, Any]) -> None:
    """Write the pid, then spin in pure Python forever (ignoring SIGTERM if asked); ``warm``:
    return at once (starts the child, so a test's timeout does not count its start)."""
    if payload.get("warm"):
        return
    if payload.get("ignore_term"):
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    write_pid(payload["pidfile"])
    while True:
        pass


def sleep_forever(ctx: Any, payload: dict[str, Any]) -> None:
    write_pid(payload["pidfile"])
    time.sleep(3600)


def die(ctx: Any, how: str) -> None:
    if how == "segv":
        os.kill(os.getpid(), signal.SIGSEGV)
    os._exit(3)


def fail(ctx: Any, how: str) -> Any:
    if how == "permanent":
        raise Permanent("no way")
    if how == "retry":
        raise Retryable("later", retry_after=30.0)
    if how == "unpicklable":
        return lambda: None
    raise KeyError("boom")


def leak(ctx: Any, mib: int) -> int:
    """Keep ``mib`` MiB alive in the child (a leak); the child's pid."""
    if mib:
        _LEAK.append(bytearray(mib * 1024 * 1024))
    return os.getpid()


def progress(ctx: Any, payload: Any) -> str:
    ctx.progress(3, 4, "almost")
    ctx.heartbeat()
    return "ok"


async def async_pid(ctx: Any, payload: Any) -> int:
    await ctx.sleep(0)
    return os.getpid()


def exit_or_pid(ctx: Any, how: str) -> int:
    """``sys.exit(3)`` (``"exit"``) or the child's pid."""
    if how == "exit":
        sys.exit(3)
    return os.getpid()


async def async_exit_or_pid(ctx: Any, how: str) -> int:
    """``sys.exit(3)`` from a coroutine (``"exit"``) or the child's pid."""
    await ctx.sleep(0)
    if how == "exit":
        sys.exit(3)
    return os.getpid()


def cooperative(ctx: Any, payload: dict[str, Any]) -> str:
    """Handle SIGTERM itself and stop at ``ctx.is_cancelled()`` (within kill_grace)."""
    signal.signal(signal.SIGTERM, lambda *_: None)
    write_pid(payload["pidfile"])
    while not ctx.is_cancelled():
        time.sleep(0.005)
    Path(payload["marker"]).write_text("saw the cancel")
    return "stopped"


def gated(ctx: Any, payload: dict[str, Any]) -> int:
    """Write the pid, wait until the file ``gate`` exists (at most 30 s), return the pid: tasks
    that end together."""
    write_pid(payload["pidfile"])
    deadline = time.monotonic() + 30
    while not Path(payload["gate"]).exists() and time.monotonic() < deadline:
        time.sleep(0.005)
    return os.getpid()


def parents(ctx: Any, payload: Any) -> list[list[Any]]:
    """How each parent ended, as a child process sees it (``ctx.parents``)."""
    return [[p.id, p.key, p.status, p.output, p.message] for p in ctx.parents]


def grandchild(ctx: Any, payload: dict[str, Any]) -> None:
    """Start a grandchild process that sleeps for an hour, write ``"<child pid> <grandchild
    pid>"`` to ``pidfile``, then ``spin`` (SIGTERM ignored), ``exit`` (``os._exit(5)``),
    ``return`` (leaving the grandchild running) or sleep."""
    sub = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)"])
    Path(payload["pidfile"]).write_text(f"{os.getpid()} {sub.pid}")
    how = payload.get("how")
    if how == "return":
        return
    if how == "exit":
        os._exit(5)
    if how == "spin":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        while True:
            pass
    time.sleep(3600)


def others_alive(ctx: Any, pids: list[int]) -> list[int]:
    """Which of ``pids`` run while this task does (``/proc``: a zombie does not count)."""
    out = []
    for p in pids:
        try:
            with open(f"/proc/{p}/stat", "rb") as f:
                if f.read().rsplit(b")", 1)[1].split()[0] != b"Z":
                    out.append(p)
        except OSError:
            pass
    return out


def stuck_in_c(ctx: Any, payload: dict[str, Any]) -> None:
    """Start a grandchild that sleeps for an hour, write ``"<pid> <grandchild pid>"`` to
    ``pidfile``, then hold the GIL in C for ages (a regular expression that backtracks 2**40
    times): no Python code, the child's pipe watchdog included, runs meanwhile."""
    import re

    sub = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)"])
    Path(payload["pidfile"]).write_text(f"{os.getpid()} {sub.pid}")
    re.match(r"(a+)+$", "a" * 40 + "b")
