"""cronoq quick start: mixed-priority work with deadlines and retries on an in-process pool.

Run with ``make example``.  It submits a burst of Low/Normal background jobs, a few High jobs,
an urgent deadline job, and a flaky job that succeeds on its third attempt; then it prints
each result as it arrives and a snapshot of the pool.
"""

from __future__ import annotations

import asyncio
import random
import time

import cronoq
from cronoq import Pool, Priority, Retryable, RetryPolicy, Scheduler

attempts: dict[str, int] = {}


async def work(ctx: cronoq.TaskContext, payload: dict[str, object]) -> str:
    name = str(payload["name"])
    await asyncio.sleep(float(payload.get("seconds", 0.02)))  # type: ignore[arg-type]
    if payload.get("flaky"):
        attempts[name] = attempts.get(name, 0) + 1
        if attempts[name] < 3:
            raise Retryable(f"transient failure #{attempts[name]}", retry_after=0.05)
    return f"{name} done (attempt {ctx.attempt})"


async def main() -> None:
    rng = random.Random(7)
    pool = Pool("default", work, min=4, max=4, retry=RetryPolicy(max_attempts=4, initial_backoff=0.05))
    async with Scheduler([pool], emit_transitions=False) as sched:
        events = sched.events()
        t0 = time.perf_counter()
        handles = []
        for i in range(40):
            prio = rng.choice([Priority.LOW, Priority.NORMAL])
            handles.append(await sched.submit({"name": f"bg-{i}", "seconds": 0.03}, priority=prio, kind="bg"))
        for i in range(3):
            handles.append(await sched.submit({"name": f"high-{i}"}, priority="high", kind="api"))
        handles.append(
            await sched.submit({"name": "urgent"}, priority="low", deadline_in=0.05, duration_hint=0.02)
        )
        handles.append(await sched.submit({"name": "flaky", "flaky": True}, key="flaky-job"))
        dup = await sched.submit({"name": "flaky", "flaky": True}, key="flaky-job")
        print(f"submitted {len(handles)} tasks (the second 'flaky-job' is a duplicate: {dup.duplicate})")

        async def report() -> None:
            async for ev in events:
                if ev.status != "succeeded":
                    print(f"  event: task {ev.id} {ev.status} ({ev.message})")

        reporter = asyncio.create_task(report())
        order = []
        for fut in asyncio.as_completed([h.result() for h in handles]):
            order.append(await fut)
        print("first five finished:", ", ".join(r.split()[0] for r in order[:5]))
        print("flaky result:", await dup)
        snap = await sched.snapshot()
        p = snap.pool("default")
        assert p is not None
        print(f"\nall {len(order)} tasks done in {time.perf_counter() - t0:.2f}s")
        print(
            f"pool default: capacity={p.capacity} dispatched={p.dispatched} succeeded={p.succeeded}"
            f" retried={p.retried} wait p50={p.wait_p50 * 1000:.1f}ms p99={p.wait_p99 * 1000:.1f}ms"
            f" utilization={p.utilization:.0%} priority_adherence={p.priority_adherence:.2f}"
        )
        print("totals:", {k: v for k, v in snap.totals.items() if v})
        events.close()
        reporter.cancel()


if __name__ == "__main__":
    asyncio.run(main())
