"""An app mixing loop, thread and process tasks (a child process imports it by name)."""

from __future__ import annotations

import asyncio
import os
import threading

import cronoq
from cronoq import TaskContext

app = cronoq.App("mixed")


@app.task
async def on_loop(n: int) -> list[int]:
    await asyncio.sleep(0)
    return [n, os.getpid(), threading.get_ident()]


@app.task
def on_thread(n: int) -> list[int]:
    return [n, os.getpid(), threading.get_ident()]


@app.task(run_in="process", timeout=5)
def on_process(ctx: TaskContext, n: int) -> dict[str, object]:
    ctx.progress(n, n + 1)
    return {"n": n * 2, "pid": os.getpid(), "id": ctx.id, "kind": ctx.kind, "attempt": ctx.attempt}


@app.task(run_in="process")
async def async_in_process(n: int) -> list[int]:
    await asyncio.sleep(0)
    return [n, os.getpid()]
