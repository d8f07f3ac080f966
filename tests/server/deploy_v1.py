"""Release 1 of the app a real ``cronoq worker`` serves in test_serve_deploys.py."""

from __future__ import annotations

from cronoq import App

app = App("shop")


@app.task(name="shop.refund")
async def refund(cents: int) -> int:
    return -cents
