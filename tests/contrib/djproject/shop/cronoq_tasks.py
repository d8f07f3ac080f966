"""The project's cronoq app (settings.CRONOQ["APPS"])."""

from __future__ import annotations

from cronoq import App
from shop.models import Note

app = App("shop")


@app.task(name="shop.receipt", pool="django")
def receipt(order_id: int) -> int:
    return Note.objects.create(text=f"receipt {order_id}").id


@app.task(name="shop.receipt_in_process", pool="django", run_in="process")
def receipt_in_process(order_id: int) -> list:
    import os

    return [Note.objects.create(text=f"receipt {order_id}").id, os.getpid()]
