"""Tutorial: rate-limited API calls, one token bucket shared by two pools.

A partner API allows 40 calls per second with bursts of 5.  Two pools call it: ``search``
(interactive lookups) and ``enrich`` (bulk enrichment).  Each has plenty of slots, so without a
limit they would call the API far faster.  One ``Resource.token_bucket`` shared by both keeps
their sum at the allowed rate; a third pool that does not touch the API is not slowed down.

Run it: ``python examples/tutorials/rate_limits.py`` (about two seconds).
Walked through in docs/tutorials/rate-limits.md.
"""

from __future__ import annotations

import asyncio
import time
from collections import defaultdict

from cronoq import Pool, Resource, Scheduler, TaskContext

RATE, BURST = 40.0, 5
calls: dict[str, list[float]] = defaultdict(list)  # pool -> monotonic times of its calls


async def call_api(ctx: TaskContext, payload: int) -> None:
    calls[ctx.pool].append(time.monotonic())  # the moment the "request" goes out
    await asyncio.sleep(0.005)


def rate(times: list[float]) -> float:
    """Calls per second between the first and the last call."""
    return (len(times) - 1) / (times[-1] - times[0])


async def main() -> None:
    pools = [Pool(name, call_api, min=8, max=8) for name in ("search", "enrich", "local")]
    bucket = Resource.token_bucket("partner-api", rate=RATE, burst=BURST)
    async with Scheduler(pools, resources=[bucket]) as sched:
        handles = []
        for i in range(50):  # bulk work, submitted first
            handles.append(await sched.submit(i, pool="enrich", resources={"partner-api": 1}))
        for i in range(30):  # interactive lookups: High priority, so they get the tokens first
            handles.append(
                await sched.submit(i, pool="search", priority="high", resources={"partner-api": 1})
            )
        for i in range(50):  # no resources: not limited by the bucket
            handles.append(await sched.submit(i, pool="local"))
        await asyncio.gather(*(h.result() for h in handles))

    api = sorted(calls["search"] + calls["enrich"])
    print(f"partner-api bucket: rate={RATE:.0f}/s burst={BURST}")
    for name in ("enrich", "search"):
        t = calls[name]
        print(f"{name}: {len(t)} calls from {t[0] - api[0]:.2f} s to {t[-1] - api[0]:.2f} s")
    first_burst = sum(1 for t in api if t - api[0] < 0.01)
    print(f"calls in the first 10 ms (the burst): {first_burst}")
    after_burst = api[BURST - 1 :]
    print(f"both pools together after the burst: {rate(after_burst):.1f} calls/s")
    local = calls["local"]
    print(f"local pool (no bucket): {len(local)} calls in {local[-1] - local[0]:.2f} s")


if __name__ == "__main__":
    asyncio.run(main())
