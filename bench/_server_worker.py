"""Child processes of ``bench/server.py`` (not a benchmark by itself).

``python bench/_server_worker.py worker TARGET POOL SLOTS OUT``
    A remote :class:`cronoq.client.Worker` with a no-op handler and ``SLOTS`` slots.  A
    non-empty payload (an ASCII index) has its handler-start time (``time.monotonic_ns``,
    system-wide on Linux, so comparable with the driver's) recorded.  Prints
    ``REGISTERED <id>``; on SIGTERM drains, writes ``{"handled": n, "starts": {index: ns}}``
    to ``OUT`` and exits.

``python bench/_server_worker.py load TARGET MODE N CHUNK``
    A load generator: connects, prints ``READY``, waits for a line on stdin, then submits
    ``N`` no-op tasks (``MODE`` ``submit``: one awaited ``Client.submit`` after another;
    ``batch``: ``Client.submit_batch`` of ``CHUNK`` tasks) and prints ``DONE <seconds>``.

``python bench/_server_worker.py sse URL N``
    ``N`` concurrent httpx streams of ``URL`` (Server-Sent Events); prints ``LIVE`` once every
    stream sent its ``: live`` comment, counts ``event: status`` frames, and on SIGTERM prints
    ``EVENTS <count> <streams that got an event: error> <the first error as JSON>``.

``python bench/_server_worker.py celery-load MODE N CHUNK`` and the Celery app (``celery -A
_server_worker worker``): the Celery + Redis baseline; configured by ``CRONOQ_BENCH_BROKER``,
``CRONOQ_BENCH_BACKEND`` and ``CRONOQ_BENCH_QUEUE``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
import time
from typing import Any

# --------------------------------------------------------------------------- cronoq worker


async def run_worker(target: str, pool: str, slots: int, out: str) -> None:
    from cronoq.client import Worker

    starts: dict[str, int] = {}
    handled = [0]
    mono = time.monotonic_ns

    def handle(lease: Any) -> None:
        now = mono()
        handled[0] += 1
        if lease.payload:
            starts[lease.payload.decode()] = now
        return None

    w = Worker(target, pool, handle, slots=slots, name=f"bench-{os.getpid()}", grace=5.0)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    loop.add_signal_handler(signal.SIGINT, stop.set)
    task = asyncio.create_task(w.run())
    wid = await w.wait_registered(30)
    print(f"REGISTERED {wid} {w.granted_slots}", flush=True)
    stopper = asyncio.create_task(stop.wait())
    await asyncio.wait({task, stopper}, return_when=asyncio.FIRST_COMPLETED)
    await w.stop(grace=2.0)
    with contextlib.suppress(Exception):
        await task
    with open(out, "w") as f:
        json.dump({"handled": handled[0], "starts": starts}, f)


# --------------------------------------------------------------------------- cronoq load


async def run_load(target: str, mode: str, n: int, chunk: int) -> None:
    from cronoq.client import Client

    loop = asyncio.get_running_loop()
    async with Client(target) as client:
        await client.snapshot()  # the connection is up before GO
        print("READY", flush=True)
        await loop.run_in_executor(None, sys.stdin.readline)
        t0 = time.perf_counter()
        if mode == "submit":
            submit = client.submit
            for _ in range(n):
                await submit()
        elif mode == "batch":
            left = n
            while left:
                k = min(chunk, left)
                await client.submit_batch([{}] * k)
                left -= k
        else:
            raise SystemExit(f"unknown load mode {mode!r}")
        print(f"DONE {time.perf_counter() - t0:.6f}", flush=True)


# --------------------------------------------------------------------------- SSE subscribers


async def run_sse(url: str, n: int) -> None:
    import httpx

    count = [0]
    errors: list[str] = []
    live = [0]
    all_live = asyncio.Event()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    marker = b"event: status"

    async def one(client: httpx.AsyncClient) -> None:
        async with client.stream("GET", url, headers={"accept": "text/event-stream"}) as resp:
            resp.raise_for_status()
            tail = b""
            first = True
            async for chunk in resp.aiter_raw():
                if first and b": live" in chunk:
                    first = False
                    live[0] += 1
                    if live[0] == n:
                        all_live.set()
                data = tail + chunk
                count[0] += data.count(marker)
                if b"event: error" in data:
                    errors.append(data.split(b"event: error", 1)[1][:200].decode(errors="replace"))
                tail = data[-(len(marker) - 1) :]

    limits = httpx.Limits(max_connections=n + 4, max_keepalive_connections=n + 4)
    async with httpx.AsyncClient(timeout=httpx.Timeout(None, connect=10.0), limits=limits) as client:
        tasks = [asyncio.create_task(one(client)) for _ in range(n)]
        waiter = asyncio.create_task(all_live.wait())
        await asyncio.wait({waiter, *tasks}, return_when=asyncio.FIRST_COMPLETED, timeout=30)
        if not all_live.is_set():
            for t in tasks:
                if t.done() and t.exception() is not None:
                    raise t.exception()  # type: ignore[misc]
            raise SystemExit(f"only {live[0]} of {n} SSE streams went live")
        print("LIVE", flush=True)
        await stop.wait()
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    print(f"EVENTS {count[0]} {len(errors)} {json.dumps(errors[:1])}", flush=True)


# --------------------------------------------------------------------------- Celery baseline

app: Any = None
if os.environ.get("CRONOQ_BENCH_BROKER"):
    from celery import Celery

    app = Celery(
        "cronoq_bench",
        broker=os.environ["CRONOQ_BENCH_BROKER"],
        backend=os.environ.get("CRONOQ_BENCH_BACKEND") or None,
    )
    _queue = os.environ.get("CRONOQ_BENCH_QUEUE", "cronoq-bench")
    app.conf.update(
        task_default_queue=_queue,
        task_serializer="json",
        result_serializer="json",
        accept_content=["json"],
        result_expires=600,
        worker_hijack_root_logger=False,
        worker_send_task_events=False,
        task_send_sent_event=False,
        broker_connection_retry_on_startup=True,
    )

    @app.task(name="cronoq_bench.noop")
    def noop(index: str | None = None) -> None:
        if index is not None:
            # the latency figure: handler start, same clock as the driver's
            app.backend.client.hset(_queue + ":starts", index, time.monotonic_ns())
        return None


def run_celery_load(mode: str, n: int, chunk: int) -> None:
    from celery import group

    task = app.tasks["cronoq_bench.noop"]
    with app.connection_for_write() as conn:
        conn.ensure_connection()
        print("READY", flush=True)
        sys.stdin.readline()
        t0 = time.perf_counter()
        if mode == "submit":
            for _ in range(n):
                task.apply_async(connection=conn)
        elif mode == "batch":
            left = n
            while left:
                k = min(chunk, left)
                group(task.s() for _ in range(k)).apply_async(connection=conn)
                left -= k
        else:
            raise SystemExit(f"unknown load mode {mode!r}")
        print(f"DONE {time.perf_counter() - t0:.6f}", flush=True)


def main(argv: list[str]) -> None:
    cmd = argv[0]
    if cmd == "worker":
        asyncio.run(run_worker(argv[1], argv[2], int(argv[3]), argv[4]))
    elif cmd == "load":
        asyncio.run(run_load(argv[1], argv[2], int(argv[3]), int(argv[4])))
    elif cmd == "sse":
        asyncio.run(run_sse(argv[1], int(argv[2])))
    elif cmd == "celery-load":
        run_celery_load(argv[1], int(argv[2]), int(argv[3]))
    else:
        raise SystemExit(f"unknown command {cmd!r}")


if __name__ == "__main__":
    main(sys.argv[1:])
