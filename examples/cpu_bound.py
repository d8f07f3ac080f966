"""CPU-bound work in child processes (docs/how-to/processes.md): `python examples/cpu_bound.py`.

Four 'PDF renders' of pure Python run in parallel in two child processes, while the event loop
stays free (a ticker keeps ticking); a task stuck in an endless loop that ignores SIGTERM is
killed at its 1 s timeout; a task whose process crashes fails alone, with its exit code; and
children are recycled every 3 tasks.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time

import cronoq
from cronoq import Processes, RetryPolicy, TaskFailed

app = cronoq.App("cpu")


@app.task(run_in="process")
def render_pdf(pages: int) -> dict[str, int]:
    """Pure Python for a while: in a thread this would hold the GIL and stall the loop."""
    total = 0
    for i in range(pages * 300_000):
        total += i % 7
    return {"pages": pages, "pid": os.getpid()}


@app.task(run_in="process", timeout=1, retry=RetryPolicy(max_attempts=1))
def stuck() -> None:
    """Ignores SIGTERM and never returns: only a SIGKILL ends it."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    while True:
        pass


@app.task(run_in="process", retry=RetryPolicy(max_attempts=1))
def crash() -> None:
    os._exit(7)


async def main() -> None:
    settings = Processes(max_tasks_per_child=3, kill_grace=0.5)
    async with app.scheduler([app.pool("default", min=2, max=2, autoscale=False)], processes=settings):
        ticks = 0

        async def ticker() -> None:
            nonlocal ticks
            while True:
                await asyncio.sleep(0.01)
                ticks += 1

        tick_task = asyncio.create_task(ticker())
        started = time.monotonic()
        renders = [await render_pdf.submit(p) for p in (2, 2, 2, 2)]
        outs = await asyncio.gather(*renders)
        print(f"rendered {sum(o['pages'] for o in outs)} pages in {len({o['pid'] for o in outs})} processes")
        print(f"loop stayed responsive: {ticks > 0}")
        print(f"rendered in the loop's own process: {os.getpid() in {o['pid'] for o in outs}}")

        t0 = time.monotonic()
        try:
            await (await stuck.submit())
        except TaskFailed as e:
            print(f"stuck: {e.status} ({e.message}) after {time.monotonic() - t0:.1f} s")
        try:
            await (await crash.submit())
        except TaskFailed as e:
            print(f"crash: {e.status} ({e.message.split(': ', 1)[1]})")
        again = await (await render_pdf.submit(1))
        print(f"still serving: {again['pages']} page")
        tick_task.cancel()
        print(f"total {time.monotonic() - started:.1f} s")


if __name__ == "__main__":  # (a child process imports this module: keep the guard)
    asyncio.run(main())
