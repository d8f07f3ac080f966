"""The handler of the demo's remote worker (``examples/demo.py`` runs it with
``cronoq worker demo_worker:handle --app-dir examples --pool default --slots 4``).

A handler takes the lease (``lease.json()``, ``lease.kind``, ``lease.attempt``, ...) and returns
the task's output: None, bytes, str or anything JSON. Raise :class:`cronoq.Retryable` for a
transient failure (the server retries with backoff) and :class:`cronoq.Permanent` for one that
retrying cannot fix.
"""

from __future__ import annotations

import asyncio
import random
import time
from typing import Any

from cronoq import Permanent, Retryable

_rng = random.Random()


async def handle(lease: Any) -> object:
    job: dict[str, Any] = lease.json() or {}
    seconds = float(job.get("seconds", 0.1))
    await asyncio.sleep(seconds * _rng.uniform(0.7, 1.3))
    kind = lease.kind
    if kind == "flaky":
        # an unreliable upstream: the first two attempts fail, the third succeeds
        if lease.attempt < 3:
            raise Retryable(f"upstream timed out (attempt {lease.attempt})", retry_after=0.5)
        return {"fetched": job.get("url"), "attempts": lease.attempt}
    if kind == "broken":
        raise Permanent("bad input: retrying cannot fix this")
    if kind == "resize":
        return {"thumbnail": f"img-{job.get('image')}-128.jpg"}
    if kind == "report":
        return f"report {job.get('report')}: {_rng.randint(100, 999)} rows"
    if kind == "alert":
        return {"paged": job.get("team"), "late": time.time() > (lease.deadline or float("inf"))}
    if kind.startswith("etl-"):
        return {"step": kind, "rows": _rng.randint(1_000, 9_999)}
    if kind == "tick":
        return {"tick": time.strftime("%H:%M:%S")}
    return {"ok": True}
