"""An app of named tasks: a small shop, run in process (docs/tutorials/named-tasks.md).

Run it: ``.venv/bin/python examples/tutorials/named_tasks.py`` (a second or two).
"""

from __future__ import annotations

import asyncio
import datetime as dt
from decimal import Decimal

import pydantic

import cronoq
from cronoq import Retryable, RetryPolicy, TaskContext

app = cronoq.App("shop")


class Order(pydantic.BaseModel):
    id: int
    email: str
    total: Decimal


# 1. tasks are plain functions; annotations are the contract
@app.task(name="shop.charge", priority="high", retry=RetryPolicy(max_attempts=3, initial_backoff=0.05))
async def charge(ctx: TaskContext, order: Order) -> str:
    if ctx.attempt == 1:  # the payment provider is flaky
        raise Retryable("provider timed out")
    return f"ch_{order.id}"


@app.task(name="shop.send_receipt")
def send_receipt(email: str, charge_id: str) -> dict[str, str]:  # a plain def runs in a thread
    return {"to": email, "charge": charge_id}


@app.task(name="shop.ship", pool="warehouse")
async def ship(order_id: int, *, priority: str = "standard") -> dt.date:
    return dt.date(2026, 1, 5) if priority == "express" else dt.date(2026, 1, 9)


# 2. a schedule that calls a task (created when the app's scheduler starts)
@app.recurring("0 3 * * *", args=[30])
@app.task(name="shop.purge_carts")
async def purge_carts(older_than_days: int) -> int:
    return 0


async def main() -> None:
    order = Order(id=42, email="ann@example.com", total=Decimal("19.90"))
    async with app.scheduler(pools=["default", "warehouse"]) as scheduler:
        # 3. call them: arguments are checked against the signature, results come back typed
        charge_id = await (await charge.submit(order))
        print("charged:", charge_id)
        receipt = await (await send_receipt.submit(order.email, charge_id))
        print("receipt:", receipt)
        # a task argument named `priority` is the task's; the scheduling priority goes in options
        eta = await (await ship.options(priority="critical", key="ship-42").submit(42, priority="express"))
        print("ships on:", eta.isoformat(), type(eta).__name__)

        # 4. a dependency chain submitted atomically
        first = charge.options(key="charge-43").spec(Order(id=43, email="bo@example.com", total=Decimal(5)))
        then = ship.options(after="charge-43").spec(43)
        h_charge, h_ship = await app.submit_batch([first, then])
        print("batch:", await h_charge, (await h_ship).isoformat())

        # 5. bad calls fail before anything is submitted
        try:
            await ship.submit("forty-two")
        except cronoq.SubmitError as e:
            print("rejected:", e)
        schedules = [s.name for s in await scheduler.list_recurring()]
        print("schedules:", schedules)


if __name__ == "__main__":
    asyncio.run(main())
