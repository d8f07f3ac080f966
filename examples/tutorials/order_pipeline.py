"""The order pipeline of docs/tutorials/order-pipeline.md: outputs passed along edges.

fetch_order -> render_invoice -> email_invoice is a chain whose steps hand their results to the
next; a chord of per-customer summaries fans in to one report, which also runs (and says so)
when a customer's summary fails. Run: python examples/tutorials/order_pipeline.py
"""

from __future__ import annotations

import asyncio
import datetime as dt
from dataclasses import dataclass
from decimal import Decimal

import pydantic

import cronoq

app = cronoq.App("shop")
ORDERS = {42: ("ann@example.com", "c1", [Decimal("19.90"), Decimal("5.10")])}


class Order(pydantic.BaseModel):
    id: int
    email: str
    lines: list[Decimal]
    placed: dt.datetime


@dataclass
class Invoice:
    order: int
    to: str
    total: Decimal
    due: dt.date


@app.task(name="shop.fetch_order")
async def fetch_order(order_id: int) -> Order:
    email, _customer, lines = ORDERS[order_id]
    return Order(id=order_id, email=email, lines=lines, placed=dt.datetime(2026, 1, 2, 9, tzinfo=dt.UTC))


@app.task(name="shop.render_invoice")
def render_invoice(order: Order, terms_days: int) -> Invoice:  # a plain def: runs in a thread
    due = order.placed.date() + dt.timedelta(days=terms_days)
    return Invoice(order.id, order.email, sum(order.lines, Decimal(0)), due)


@app.task(name="shop.email_invoice")
async def email_invoice(ctx: cronoq.TaskContext, invoice: Invoice) -> str:
    (parent,) = ctx.parents  # how the step before ended (one Outcome per edge)
    return f"sent {invoice.total} due {invoice.due} to {invoice.to} (after task {parent.id} {parent.status})"


@app.task(name="shop.customer_summary")
async def customer_summary(customer: str) -> dict[str, int]:
    if customer == "c3":
        raise cronoq.Permanent("customer c3 has no orders")
    return {"customer": int(customer[1:]), "orders": len(customer) * 2}


@app.task(name="shop.report")
async def report(summaries: list[cronoq.Outcome]) -> str:
    ok = [s.output["orders"] for s in summaries if s.status == "succeeded"]
    failed = [s.message for s in summaries if s.status != "succeeded"]
    return f"{sum(ok)} orders from {len(ok)} customers; failed: {failed}"


@app.task(name="shop.total_orders")
async def total_orders(summaries: list[dict[str, int]]) -> int:
    return sum(s["orders"] for s in summaries)


async def main() -> None:
    async with app.scheduler():
        # a chain: each step's output is the next one's argument, typed on both sides
        order = fetch_order.spec(42)
        invoice = render_invoice.spec(order.output, terms_days=14)
        mail = email_invoice.spec(invoice.output)
        fetched, _, sent = await app.submit_batch([order, invoice, mail])
        print(await sent)

        # a later call can take the output of a task submitted before (a handle, id or key)
        reminder = await render_invoice.submit(cronoq.output_of(fetched), terms_days=30)
        print("reminder due:", (await reminder).due)

        # a chord: per-customer summaries fan in to one report
        summaries = [customer_summary.options(key=f"summary-{c}").spec(c) for c in ("c1", "c2", "c3")]
        everyone = report.spec([cronoq.outcome_of(s) for s in summaries])  # runs after failures too
        strict = total_orders.spec([s.output for s in summaries])  # needs every summary
        *_, done, needs_all = await app.submit_batch([*summaries, everyone, strict])
        print(await done)
        try:
            await needs_all
        except cronoq.TaskFailed as e:
            print("strict total:", e.status)


if __name__ == "__main__":
    asyncio.run(main())
