"""A remote worker process for the server tests: ``python worker_main.py TARGET POOL MODE``.

Modes: ``hang`` (prints ``STARTED <task_id> <attempt>`` for each lease, then never finishes),
``echo`` (returns the payload). Prints ``REGISTERED <worker_id>`` once registered.
"""

from __future__ import annotations

import asyncio
import sys

from cronoq.client import Worker


async def main(target: str, pool: str, mode: str) -> None:
    async def handle(lease):  # type: ignore[no-untyped-def]
        print(f"STARTED {lease.task_id} {lease.attempt}", flush=True)
        if mode == "hang":
            await asyncio.sleep(3600)
        return lease.payload

    w = Worker(target, pool, handle, slots=1, name=f"proc-{mode}")
    task = asyncio.create_task(w.run())
    wid = await w.wait_registered(30)
    print(f"REGISTERED {wid}", flush=True)
    await task


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3]))
