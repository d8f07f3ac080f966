"""Tutorial: an image pipeline with priorities, deadlines and retries.

A pool of two "resizer" slots receives a backlog of low-priority backfill work, a few
normal uploads, one high-priority upload, one low-priority thumbnail with a tight deadline,
a flaky image (a storage hiccup: fails twice, then works), a corrupt image (can never work)
and an image whose storage never answers. The program prints the order in which the images
started, the outcome of each interesting one and the pool's counters.

Run it: ``python examples/tutorials/image_pipeline.py`` (about one second).
Walked through in docs/tutorials/image-pipeline.md.
"""

from __future__ import annotations

import asyncio

from cronoq import Permanent, Pool, Priority, Retryable, RetryPolicy, Scheduler, TaskContext, TaskFailed

started: list[str] = []  # image names, in the order their first attempt began
flaky_attempts: dict[str, int] = {}


async def resize(ctx: TaskContext, image: dict[str, str]) -> str:
    """The executor: one call per attempt."""
    name = image["name"]
    if ctx.attempt == 1:
        started.append(name)
    await asyncio.sleep(0.02)  # stands in for download + resize + upload
    if name == "corrupt.jpg":
        raise Permanent("not a JPEG file")  # retrying cannot help: fail at once
    if name == "unreachable.jpg":
        raise ConnectionError("storage did not answer")  # any other exception is retryable
    if name == "flaky.jpg" and ctx.attempt < 3:
        raise Retryable(f"storage busy (attempt {ctx.attempt})", retry_after=0.05)
    return f"{name} -> thumbs/{name} (attempt {ctx.attempt})"


async def main() -> None:
    pool = Pool(
        "resize",
        resize,
        min=2,
        max=2,  # a fixed size keeps the printed order reproducible (no autoscaling)
        retry=RetryPolicy(max_attempts=3, initial_backoff=0.02, max_backoff=0.1),
    )
    async with Scheduler([pool]) as sched:
        # 1. a backlog of backfill work: Low priority, submitted first
        for i in range(8):
            await sched.enqueue({"name": f"backfill-{i}.jpg"}, priority=Priority.LOW, kind="backfill")
        # 2. ordinary uploads, and one from a paying customer
        for i in range(3):
            await sched.enqueue({"name": f"upload-{i}.jpg"}, kind="upload")
        await sched.enqueue({"name": "vip-upload.jpg"}, priority="high", kind="upload")
        # 3. a Low task that must be done within 0.3 s: its deadline makes it urgent
        urgent = await sched.submit(
            {"name": "urgent-thumb.jpg"}, priority="low", deadline_in=0.3, duration_hint=0.02
        )
        # 4. three images that go wrong in different ways
        flaky = await sched.submit({"name": "flaky.jpg"}, key="img-flaky")
        corrupt = await sched.submit({"name": "corrupt.jpg"}, key="img-corrupt")
        lost = await sched.submit(
            {"name": "unreachable.jpg"}, retry=RetryPolicy(max_attempts=2, initial_backoff=0.01)
        )
        # a second submission with the same key is not run again: it is the same task
        again = await sched.submit({"name": "flaky.jpg"}, key="img-flaky")
        print(f"resubmitting key img-flaky: duplicate={again.duplicate}, same id={again.id == flaky.id}")

        print("urgent:", await urgent)
        print("flaky:", await flaky)
        for name, handle in (("corrupt", corrupt), ("unreachable", lost)):
            try:
                await handle
            except TaskFailed as e:
                print(f"{name}: {e.status} ({e.message})")

        while (snap := await sched.snapshot()).live_tasks:  # let the backlog drain
            await asyncio.sleep(0.05)
        print("start order:", " ".join(n.removesuffix(".jpg") for n in started))
        totals = snap.totals
        print(
            f"totals: submitted={totals['submitted']} succeeded={totals['succeeded']}"
            f" failed={totals['failed']} dead_lettered={totals['dead_lettered']} retries={totals['retries']}"
        )


if __name__ == "__main__":
    asyncio.run(main())
