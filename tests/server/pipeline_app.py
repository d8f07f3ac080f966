"""The app a real ``cronoq worker pipeline_app:app`` serves in test_serve_pipelines.py."""

from __future__ import annotations

import datetime as dt

import pydantic

from cronoq import App, Outcome, Permanent, TaskContext

app = App("pipeline")


class Order(pydantic.BaseModel):
    id: int
    placed: dt.datetime


@app.task(name="pipe.fetch_order")
async def fetch_order(n: int) -> Order:
    if n < 0:
        raise Permanent(f"no order {n}")
    return Order(id=n, placed=dt.datetime(2026, 1, 2, tzinfo=dt.UTC))


@app.task(name="pipe.render_invoice")
def render_invoice(order: Order, due: dt.datetime) -> dict[str, object]:  # runs in a thread
    assert isinstance(order.placed, dt.datetime) and isinstance(due, dt.datetime)
    return {"order": order.id, "days": (due - order.placed).days}


@app.task(name="pipe.email_invoice")
async def email_invoice(ctx: TaskContext, invoice: dict[str, object], cc: list[str]) -> str:
    statuses = [o.status for o in ctx.parents]  # (the worker's lease: protocol version 6)
    return f"{invoice['order']}:{invoice['days']}:{','.join(cc)}:{statuses}"


@app.task(name="pipe.total")
async def total(values: list[int]) -> int:
    return sum(values)


@app.task(name="pipe.number")
async def number(n: int) -> int:
    return n


@app.task(name="pipe.big")
async def big(n: int) -> str:
    return "x" * n


@app.task(name="pipe.count")
async def count(parts: list[str]) -> int:
    return sum(map(len, parts))


@app.task(name="pipe.report")
async def report(o: Outcome) -> str:
    return f"{o.status}: {o.message}"
