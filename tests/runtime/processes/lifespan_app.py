"""An app whose ``@app.lifespan`` and call hook must run in each process child (a child imports
this module by name); ``broken`` has a lifespan that fails in children only."""

from __future__ import annotations

import contextlib
import multiprocessing
import os
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import cronoq
from cronoq import TaskContext

app = cronoq.App("proclife")
#: how many times this process entered the lifespan (a child's own count)
ENTRIES = 0
#: the call hooks this process is inside now
INSIDE: list[str] = []


@app.lifespan
@contextlib.asynccontextmanager
async def resources() -> AsyncIterator[dict[str, object]]:
    global ENTRIES
    ENTRIES += 1
    state: dict[str, object] = {"pid": os.getpid(), "exit_log": None}
    yield state
    if state["exit_log"]:  # a task told this child where to say it left
        with open(str(state["exit_log"]), "a") as f:
            f.write(f"exit {os.getpid()}\n")


class Hook:
    @contextlib.contextmanager
    def sync_context(self) -> Iterator[None]:
        INSIDE.append("sync")
        try:
            yield
        finally:
            INSIDE.pop()

    @contextlib.asynccontextmanager
    async def async_context(self) -> AsyncIterator[None]:
        INSIDE.append("async")
        try:
            yield
        finally:
            INSIDE.pop()


app.add_call_hook(Hook())


@app.task(name="proclife.look", run_in="process")
def look(ctx: TaskContext, exit_log: str) -> dict[str, object]:
    ctx.state["exit_log"] = exit_log
    return {"pid": os.getpid(), "state_pid": ctx.state["pid"], "entries": ENTRIES, "hooks": list(INSIDE)}


@app.task(name="proclife.look_async", run_in="process")
async def look_async(ctx: TaskContext) -> dict[str, object]:
    return {"pid": os.getpid(), "state_pid": ctx.state["pid"], "entries": ENTRIES, "hooks": list(INSIDE)}


broken = cronoq.App("proclife_broken")


@broken.lifespan
async def no_database() -> AsyncIterator[None]:
    if multiprocessing.parent_process() is not None:  # a child: the worker itself starts fine
        raise RuntimeError("no database in a child")
    yield


@broken.task(name="proclife.never", run_in="process")
def never() -> int:
    return os.getpid()


def exits(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []
