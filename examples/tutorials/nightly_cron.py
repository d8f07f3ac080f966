"""Tutorial: a nightly cron job with a time zone and an overlap policy.

Part 1 registers the real thing, ``0 3 * * *`` in Europe/Berlin, and shows when it runs next
(in Berlin time and in UTC: the offset changes with daylight saving time, the wall-clock time
does not).  Part 2 cannot wait for 3 a.m., so it uses a cron with a seconds field that fires
every second, with a job that takes 1.5 s: each occurrence comes due while the previous one
is still running.  Two schedules show the difference between ``overlap="skip"`` (drop the
occurrence) and ``overlap="queue"`` (run it after the previous one).

Run it: ``python examples/tutorials/nightly_cron.py`` (about five seconds).
Walked through in docs/tutorials/nightly-cron.md.
"""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime
from zoneinfo import ZoneInfo

from cronoq import Pool, Scheduler, TaskContext

BERLIN = ZoneInfo("Europe/Berlin")


started: dict[str, float] = {}  # occurrence key -> Unix time its attempt began


async def job(ctx: TaskContext, payload: dict[str, float]) -> None:
    """The recurring job: each occurrence is an ordinary task with its own id and key."""
    assert ctx.key is not None
    started[ctx.key] = time.time()
    await asyncio.sleep(payload["seconds"])


def occurrence_time(key: str) -> float:
    """An occurrence's key is "<template key>@<UTC start>Z": its nominal start as Unix time."""
    return datetime.fromisoformat(key.split("@")[1].replace("Z", "+00:00")).timestamp()


async def main() -> None:
    pools = [Pool(name, job, min=2, max=4) for name in ("maintenance", "skip", "queue")]
    async with Scheduler(pools) as sched:
        # Part 1: every night at 03:00 Berlin time
        info = await sched.add_recurring(
            "nightly",
            "0 3 * * *",
            {"seconds": 60.0},
            tz="Europe/Berlin",
            overlap="skip",
            pool="maintenance",
            key="nightly",
        )
        assert info.next_run is not None
        nxt = datetime.fromtimestamp(info.next_run, UTC)
        print(f"nightly: cron={info.cron!r} tz={info.tz} overlap={info.overlap}")
        print(f"  next run {nxt.astimezone(BERLIN):%Y-%m-%d %H:%M %Z} = {nxt:%Y-%m-%d %H:%M} UTC")
        print(f"  its occurrence: task {info.last_task_id}, {await sched.status(info.last_task_id)}")
        maintenance = (await sched.snapshot()).pool("maintenance")
        assert maintenance is not None
        print(f"  the pool holds its reservation: reservations={maintenance.reservations}")
        await sched.remove_recurring("nightly")
        await sched.cancel(info.last_task_id)  # (removing a schedule keeps its next occurrence)

        # Part 2: every second, a job of 1.5 s, two overlap policies side by side
        events = sched.events()
        for overlap in ("skip", "queue"):
            await sched.add_recurring(
                f"every-second-{overlap}",
                "*/1 * * * * *",  # six fields: the first one is seconds
                {"seconds": 1.4},
                overlap=overlap,
                pool=overlap,  # one pool per schedule: each has its own reservations
                key=overlap,
            )
        outcome: dict[str, str] = {}  # occurrence key -> how it ended
        loop = asyncio.get_running_loop()
        stop_at = loop.time() + 3.5
        while (left := stop_at - loop.time()) > 0:
            try:
                ev = await asyncio.wait_for(anext(events), left)  # terminal events only
            except TimeoutError:
                break
            if ev.key is not None and ev.status in ("succeeded", "skipped"):
                outcome[ev.key] = ev.status if ev.message is None else f"{ev.status} ({ev.message})"
        events.close()
        conflicts = (await sched.snapshot()).totals["recurring_conflicts"]
        for info in await sched.list_recurring():
            await sched.remove_recurring(info.name)
        for overlap in ("skip", "queue"):
            print(f"overlap={overlap!r}:")
            keys = sorted(k for k in {*outcome, *started} if k.startswith(f"{overlap}@"))
            for key in keys:
                at = occurrence_time(key)
                line = f"  {datetime.fromtimestamp(at, UTC):%H:%M:%S}"
                if key in started:
                    line += f" started {started[key] - at:+.1f} s"
                line += f"  {outcome.get(key, 'still running')}"
                print(line)
        print(f"occurrences dropped for want of a reservation: {conflicts}")


if __name__ == "__main__":
    asyncio.run(main())
