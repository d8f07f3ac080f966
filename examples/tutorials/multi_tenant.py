"""Tutorial: a multi-tenant pool with weighted fair share.

Three customers share one pool of 2 slots.  ``acme`` (a big account, weight 3) dumps 60 jobs
into the queue first, ``globex`` (weight 1) 60 jobs right after, ``initech`` (weight 1, the
default) only 10.  The program runs the same workload twice and counts, for the first 50
dispatches, which tenant got the slot:

* plain FIFO (``fair_share=False``, the default): acme's jobs came first, so acme gets
  everything until its backlog is gone;
* ``fair_share=True`` with ``tenant_weights={"acme": 3}``: the slots are shared 3:1:1.

Run it: ``python examples/tutorials/multi_tenant.py`` (about one second).
Walked through in docs/tutorials/multi-tenant.md.
"""

from __future__ import annotations

import asyncio
from collections import Counter

from cronoq import Pool, Scheduler, TaskContext

WORKLOAD = [("acme", 60), ("globex", 60), ("initech", 10)]
FIRST = 50  # dispatches to count


async def run_workload(fair: bool) -> list[str]:
    order: list[str] = []  # tenant of each dispatch, in dispatch order

    async def job(ctx: TaskContext, tenant: str) -> None:
        order.append(tenant)
        await asyncio.sleep(0.002)

    pool = Pool("shared", job, min=2, max=2, fair_share=fair, tenant_weights={"acme": 3.0} if fair else None)
    async with Scheduler([pool]) as sched:
        for tenant, count in WORKLOAD:
            for _ in range(count):
                await sched.enqueue(tenant, tenant=tenant)
        while (await sched.snapshot()).live_tasks:
            await asyncio.sleep(0.01)
    return order


def shares(order: list[str]) -> str:
    counts = Counter(order[:FIRST])
    return "  ".join(
        f"{tenant}={counts[tenant]:>2} ({counts[tenant] / FIRST:4.0%})" for tenant, _ in WORKLOAD
    )


async def main() -> None:
    fifo = await run_workload(fair=False)
    fair = await run_workload(fair=True)
    print(f"first {FIRST} dispatches, FIFO:       {shares(fifo)}")
    print(f"first {FIRST} dispatches, fair share: {shares(fair)}")
    print("fair share, first 15:", " ".join(t[0] for t in fair[:15]))
    print(f"all done: {len(fifo)} and {len(fair)} jobs")


if __name__ == "__main__":
    asyncio.run(main())
