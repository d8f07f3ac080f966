"""Release 2 of the app of test_serve_deploys.py: it adds the task ``shop.charge``."""

from __future__ import annotations

from cronoq import App

app = App("shop")


@app.task(name="shop.refund")
async def refund(cents: int) -> int:
    return -cents


@app.task(name="shop.charge")
async def charge(cents: int) -> dict[str, int]:
    return {"charged": cents}
