"""Tutorial: fixed starts with reservations.

Part 1: a pool of 4 slots, busy with a backlog of background work, gets two jobs that must
start at a given moment (a market-open snapshot and a report).  Each fixed start reserves
room in the pool; the pool accepts at most half its size of overlapping reservations, so a
third job for the same moment is refused with ``reservation_conflict``.  Shortly before the
start the scheduler *holds* a free slot for each job (``held`` in the snapshot), so they start
on time although background work is waiting.

Part 2: what happens when a job cannot start on time (the only slot of a pool is taken by a
long job that started before the hold): ``on_miss="skip"`` gives up (``missed``),
``on_miss="run_late"`` runs as soon as it can.

Run it: ``python examples/tutorials/fixed_starts.py`` (about two seconds).
Walked through in docs/tutorials/fixed-starts.md.
"""

from __future__ import annotations

import asyncio
import time

from cronoq import Pool, Scheduler, SubmitError, TaskContext, TaskFailed

started: dict[str, float] = {}  # job name -> Unix time its attempt began
long_job_running = asyncio.Event()


async def run(ctx: TaskContext, job: dict[str, object]) -> str:
    started[str(job["name"])] = time.time()
    if job["name"] == "long-job":
        long_job_running.set()
    await asyncio.sleep(float(job["seconds"]))  # type: ignore[arg-type]
    return f"{job['name']} done"


async def part1(sched: Scheduler) -> None:
    for i in range(60):  # a backlog: 60 x 0.1 s on 4 slots keeps the pool busy for 1.5 s
        await sched.enqueue({"name": f"bg-{i}", "seconds": 0.1}, pool="ops", priority="high")
    start_at = time.time() + 1.2
    jobs = {}
    for name in ("market-open-snapshot", "report"):
        jobs[name] = await sched.submit(
            {"name": name, "seconds": 0.1},
            pool="ops",
            start_at=start_at,  # Unix seconds or an aware datetime; start_in=1.2 is the same
            tolerance=0.25,  # on time = started within 0.25 s of start_at
            duration_hint=0.1,
            on_miss="run_late",  # (the default) if it cannot start on time, run it late
        )
    try:
        await sched.submit({"name": "one-too-many", "seconds": 0.1}, pool="ops", start_at=start_at)
    except SubmitError as e:
        print(f"one-too-many: refused, {e.code} ({e.message})")
    snap = (await sched.snapshot()).pool("ops")
    assert snap is not None
    print(f"at submit: capacity={snap.capacity} reservations={snap.reservations} held={snap.held}")
    await asyncio.sleep(start_at - 0.5 - time.time())
    snap = (await sched.snapshot()).pool("ops")
    assert snap is not None
    print(f"0.5 s before the start: busy={snap.busy} held={snap.held} ready={snap.ready}")
    for name, handle in jobs.items():
        await handle
        print(f"{name}: started {started[name] - start_at:+.3f} s from its start time")
    while (await sched.snapshot()).live_tasks:
        await asyncio.sleep(0.05)
    snap = (await sched.snapshot()).pool("ops")
    assert snap is not None
    print(f"fixed_start_hit_rate={snap.fixed_start_hit_rate:.2f}")


async def part2(sched: Scheduler) -> None:
    long_job = await sched.submit({"name": "long-job", "seconds": 0.6}, pool="single")
    await long_job_running.wait()  # it holds the only slot before the fixed starts are submitted
    t0 = time.time()
    skip = await sched.submit(
        {"name": "skip-me", "seconds": 0.05},
        pool="single",
        start_in=0.2,
        tolerance=0.1,
        duration_hint=0.05,
        on_miss="skip",
    )
    late = await sched.submit(
        {"name": "run-late", "seconds": 0.05},
        pool="single",
        start_in=0.45,
        tolerance=0.1,
        duration_hint=0.05,
        on_miss="run_late",
    )
    try:
        await skip
    except TaskFailed as e:
        print(f"skip-me: {e.status} ({e.message})")
    await late
    print(f"run-late: started {started['run-late'] - (t0 + 0.45):+.2f} s late, after long-job")
    await long_job


async def main() -> None:
    pools = [
        # reservable_fraction=0.5 (the default): at most 2 overlapping reservations on 4 slots
        Pool("ops", run, min=4, max=4),
        Pool("single", run, min=1, max=1),
    ]
    async with Scheduler(pools) as sched:
        await part1(sched)
        await part2(sched)


if __name__ == "__main__":
    asyncio.run(main())
