"""Celery's task and ``apply_async`` with the server (docs/how-to/from-celery.md): the worker
handler ``resize`` and a client that submits to it and waits for the result.

Run, with ``cronoq serve`` configured with a pool ``images``::

    cronoq worker celery_server:resize --app-dir examples --pool images --slots 8
    python examples/celery_server.py 127.0.0.1:7070

(``CRONOQ_TOKEN``: the client's token when the server has auth.) tests/examples runs it
against a real server and worker."""

import asyncio
import os
import sys

from cronoq.client import Client


# the worker's handler: Celery's task body (a plain function runs in a thread)
def resize(lease):
    payload = lease.json()
    return {
        "image": payload["image_id"],
        "width": payload["width"],
        "attempt": lease.attempt,
    }


# the submitter: Celery's resize.apply_async(...) and result.get()
async def main(target, token=None):
    async with Client(target, token=token) as client:
        sub = await client.submit(
            {"image_id": 7, "width": 640},
            pool="images",
            priority="high",
            # idempotent: a repeated submit returns this task
            key="resize-7-640",
            wait=True,
        )
        print(sub.result.status, sub.result.json())


if __name__ == "__main__":
    target = sys.argv[1] if len(sys.argv) > 1 else "127.0.0.1:7070"
    asyncio.run(main(target, os.environ.get("CRONOQ_TOKEN")))
