"""The app a real ``cronoq worker named_app:app`` serves in test_serve_named_tasks.py."""

from __future__ import annotations

import datetime as dt

import pydantic

from cronoq import App, Retryable, RetryPolicy, TaskContext

app = App("named")


class Order(pydantic.BaseModel):
    id: int
    placed: dt.datetime


@app.task(name="named.add")
async def add(x: int, y: int = 1) -> int:
    return x + y


@app.task(name="named.ship")
def ship(order: Order, days: int) -> dt.datetime:  # a plain function: runs in a thread
    return order.placed + dt.timedelta(days=days)


@app.task(name="named.flaky", retry=RetryPolicy(max_attempts=3, initial_backoff=0.05, max_backoff=0.1))
async def flaky(ctx: TaskContext, word: str) -> dict[str, object]:
    if ctx.attempt < 2:
        raise Retryable("not yet")
    return {"word": word, "attempt": ctx.attempt, "kind": ctx.kind}


@app.task(name="named.echo")
async def echo(text: str) -> str:
    return text


@app.task(name="named.shape")
async def shape(point: tuple[int, ...]) -> tuple[str, ...]:
    """JSON has arrays only: one annotated as a tuple arrives as a tuple, as in process."""
    return (type(point).__name__, *map(str, point))


@app.task(name="named.resize", kind="resize")
async def resize(size: int) -> str:
    """A kind set at decoration: workers register and dispatch by it, not by the name."""
    return f"resized to {size}"


@app.recurring("0 3 * * *", name="named.nightly", args=[40], kwargs={"y": 2}, priority="low")
@app.task(name="named.nightly_sum")
async def nightly_sum(x: int, y: int) -> int:
    return x + y


@app.task(name="named.fanout")
async def fanout(n: int) -> list[int]:
    """A task that submits tasks: on ``cronoq worker named_app:app`` the app is bound to the
    worker's server with no code here."""
    handles = [await add.submit(i) for i in range(n)]
    return [await h for h in handles]
