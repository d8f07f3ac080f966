"""The app a real ``cronoq worker lifespan_app:app`` serves in test_lifespan.py: its lifespan
appends ``enter``/``exit`` lines to the file named by ``$LIFESPAN_LOG``."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator

from cronoq import App, TaskContext

app = App("lifespan")


@app.lifespan
async def resources() -> AsyncIterator[dict[str, object]]:
    with open(os.environ["LIFESPAN_LOG"], "a") as f:
        f.write(f"enter {os.getpid()}\n")
    yield {"pid": os.getpid(), "pool": "db-pool"}
    with open(os.environ["LIFESPAN_LOG"], "a") as f:
        f.write(f"exit {os.getpid()}\n")


@app.task(name="lifespan.which")
async def which(ctx: TaskContext) -> list[object]:
    return [ctx.state["pool"], ctx.state["pid"]]  # type: ignore[attr-defined]


@app.task(name="lifespan.which_sync")
def which_sync(ctx: TaskContext) -> str:
    return str(ctx.state["pool"])  # type: ignore[attr-defined]
