"""The tasks of the demo's remote worker: a :class:`cronoq.App` with named, typed tasks.

``examples/demo.py`` runs them with ``cronoq worker demo_worker:app --app-dir examples --pool
default --slots 4`` and submits them with ``app.bind(client)`` + ``resize.submit(...)``. The
worker runs each task the lease's kind names (the task's name); arguments arrive as typed Python
values, checked against the signature on both sides. Raise :class:`cronoq.Retryable` for a
transient failure (the server retries with backoff) and :class:`cronoq.Permanent` for one that
retrying cannot fix. ``cronoq tasks demo_worker:app --app-dir examples`` lists them.
"""

from __future__ import annotations

import asyncio
import random
import time

from cronoq import App, Permanent, Retryable, TaskContext

app = App("demo")
_rng = random.Random()

#: the demo's recurring schedule (created on the server by demo.py with app.apply_recurring)
SCHEDULE = "demo-heartbeat"


async def _work(seconds: float) -> None:
    await asyncio.sleep(seconds * _rng.uniform(0.7, 1.3))


@app.task(name="flaky")
async def flaky(ctx: TaskContext, url: str, seconds: float = 0.1) -> dict[str, object]:
    """An unreliable upstream: the first two attempts fail, the third succeeds."""
    await _work(seconds)
    if ctx.attempt < 3:
        raise Retryable(f"upstream timed out (attempt {ctx.attempt})", retry_after=0.5)
    return {"fetched": url, "attempts": ctx.attempt}


@app.task(name="broken")
async def broken(seconds: float = 0.05) -> None:
    await _work(seconds)
    raise Permanent("bad input: retrying cannot fix this")


@app.task(name="resize")
async def resize(image: int, seconds: float = 0.3) -> dict[str, str]:
    await _work(seconds)
    return {"thumbnail": f"img-{image}-128.jpg"}


@app.task(name="report", priority="low")
async def report(report: int, seconds: float = 0.8) -> str:
    await _work(seconds)
    return f"report {report}: {_rng.randint(100, 999)} rows"


@app.task(name="api", priority="high")
async def api(call: int, seconds: float = 0.05) -> dict[str, int]:
    await _work(seconds)
    return {"call": call}


@app.task(name="alert", priority="critical")
async def alert(ctx: TaskContext, team: str, seconds: float = 0.1) -> dict[str, object]:
    await _work(seconds)
    return {"paged": team, "late": time.time() > (ctx.deadline or float("inf"))}


@app.task(name="etl-extract")
async def etl_extract(seconds: float = 0.3) -> dict[str, object]:
    await _work(seconds)
    return {"step": "etl-extract", "rows": _rng.randint(1_000, 9_999)}


@app.task(name="etl-transform")
async def etl_transform(seconds: float = 0.3) -> dict[str, object]:
    await _work(seconds)
    return {"step": "etl-transform", "rows": _rng.randint(1_000, 9_999)}


@app.task(name="etl-load")
async def etl_load(seconds: float = 0.2) -> dict[str, object]:
    await _work(seconds)
    return {"step": "etl-load", "rows": _rng.randint(1_000, 9_999)}


@app.recurring("*/5 * * * * *", name=SCHEDULE, kwargs={"seconds": 0.05}, priority="high")
@app.task(name="tick")
async def tick(seconds: float = 0.05) -> dict[str, str]:
    await _work(seconds)
    return {"tick": time.strftime("%H:%M:%S")}
