"""A remote worker for the HA tests: ``python ha_worker.py TARGETS POOL SLOTS EXEC_MS``.

``TARGETS`` is a comma-separated list of every server's gRPC address (the worker moves to the
next one on reconnect, at once after ``Shutdown{not_leader}``). Prints
``REGISTERED <wall> <target>`` per registration, ``LEASE <wall> <target> <task_id> <attempt>``
when a lease arrives (``target``: the server that sent it) and ``DONE <wall> <task_id>`` when
the handler returns. SIGTERM stops it (drain).
"""

from __future__ import annotations

import asyncio
import signal
import sys
import time

from cronoq.client import Worker


async def main(targets: list[str], pool: str, slots: int, exec_ms: int) -> None:
    w: Worker

    async def handle(lease):  # type: ignore[no-untyped-def]
        print(f"LEASE {time.time():.6f} {w.target} {lease.task_id} {lease.attempt}", flush=True)
        if exec_ms:
            await asyncio.sleep(exec_ms / 1000)
        print(f"DONE {time.time():.6f} {lease.task_id}", flush=True)
        return lease.payload

    w = Worker(targets, pool, handle, slots=slots, name="ha-worker", grace=2.0)
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    run = asyncio.create_task(w.run())

    async def registrations() -> None:
        while True:
            await w.wait_registered()
            print(f"REGISTERED {time.time():.6f} {w.target}", flush=True)
            while w.registered:
                await asyncio.sleep(0.01)

    reg = asyncio.create_task(registrations())
    await stop.wait()
    reg.cancel()
    await w.stop()
    await run


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1].split(","), sys.argv[2], int(sys.argv[3]), int(sys.argv[4])))
