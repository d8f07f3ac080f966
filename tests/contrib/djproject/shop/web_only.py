"""A task module the worker cannot import (a dependency only the web servers have)."""

import os

try:
    from django.tasks import task
except ImportError:
    from django_tasks import task

if os.environ.get("SHOP_WORKER_SIDE"):
    raise ImportError("shop.web_only needs a package this worker does not have")


@task(queue_name="django")
def render_pdf(order_id: int) -> str:
    return f"order-{order_id}.pdf"
