"""A Scheduler whose process task is stuck in C, to be SIGKILLed by a test:
``python killed_scheduler.py PIDFILE`` (the task writes its child's and grandchild's pids)."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))  # (the repository: tests.*)

from tests.runtime.processes import tasks

from cronoq import Pool, Scheduler


async def main(pidfile: str) -> None:
    async with Scheduler([Pool("p", tasks.stuck_in_c, run_in="process", autoscale=False)]) as sched:
        await sched.submit({"pidfile": pidfile})
        await asyncio.Event().wait()  # until SIGKILLed


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
