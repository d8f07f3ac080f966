"""Child processes of ``bench/server.py`` (not a benchmark by itself).

``python bench/_server_worker.py worker TARGET POOL SLOTS OUT``
    A remote :class:`cronoq.client.Worker` with a no-op handler and ``SLOTS`` slots.  A
    non-empty payload (an ASCII index) has its handler-start time (``time.monotonic_ns``,
    system-wide on Linux, so comparable with the driver's) recorded.  Prints
    ``REGISTERED <id>``; on SIGTERM drains, writes ``{"handled": n, "starts": {index: ns}}``
    to ``OUT`` and exits.  ``CRONOQ_BENCH_WORKER_PROTOCOL=N`` (``bench/server.py
    --worker-protocol N``) makes it register asking for worker protocol ``N`` (e.g. 3: one
    message per lease and per report, as the published v3 worker) instead of
    :data:`cronoq.client.PROTOCOL_VERSION`; the server answers with the lower of the two.
    ``CRONOQ_BENCH_COUNT_MESSAGES=1`` (``--messages``) counts the gRPC messages of its Work
    stream each way through a thin wrapper of the stream (a few microseconds per message of this
    process's CPU, so it is off by default); on SIGUSR1 the worker prints ``MESSAGES <in> <out>
    <handled>`` (the driver takes the difference over a run), and ``OUT`` has the totals.

``python bench/_server_worker.py load TARGET MODE N CHUNK``
    A load generator: connects, prints ``READY``, waits for a line on stdin, then submits
    ``N`` no-op tasks (``MODE`` ``submit``: one awaited ``Client.submit`` after another;
    ``batch``: ``Client.submit_batch`` of ``CHUNK`` tasks) and prints ``DONE <seconds> <CPU
    seconds>`` (its own ``time.process_time`` over the submissions).

``python bench/_server_worker.py sse URL N``
    ``N`` concurrent streams of ``URL`` (Server-Sent Events); prints ``LIVE`` once every
    stream sent its ``: live`` comment, counts ``event: status`` frames, and on SIGTERM prints
    ``EVENTS <count> <streams that got an event: error> <the first error as JSON>``.  Each
    stream is a plain asyncio protocol on its own connection (an HTTP/1.1 GET, then a scan of
    the raw bytes: no HTTP client, no parsing, no copies; see :class:`_SseCounter`), so the
    subscribers take as little as possible of the CPU they share with the server.

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

_MESSAGES = {"in": 0, "out": 0}


class _CountedCall:
    """A Work stream call that counts the messages read from it."""

    def __init__(self, call: Any) -> None:
        self._call = call

    async def read(self) -> Any:
        import grpc

        msg = await self._call.read()
        if msg is not grpc.aio.EOF:
            _MESSAGES["in"] += 1
        return msg

    def __getattr__(self, name: str) -> Any:
        return getattr(self._call, name)


def _count_messages() -> None:
    """Wrap the Worker's ``WorkersStub`` so its Work stream's messages are counted each way."""
    import cronoq.client.worker as worker_module

    real = worker_module.pb_grpc.WorkersStub

    async def counted(requests: Any) -> Any:
        async for msg in requests:
            _MESSAGES["out"] += 1
            yield msg

    class CountingStub:
        def __init__(self, channel: Any) -> None:
            self._stub = real(channel)

        def Work(self, requests: Any, **kw: Any) -> Any:
            return _CountedCall(self._stub.Work(counted(requests), **kw))

    worker_module.pb_grpc = type("pb_grpc", (), {"WorkersStub": CountingStub})  # type: ignore[assignment]


async def run_worker(target: str, pool: str, slots: int, out: str) -> None:
    from cronoq.client import Worker

    version = os.environ.get("CRONOQ_BENCH_WORKER_PROTOCOL")
    if version:
        # the version the Worker asks for at Register is this module constant (a bench-only knob)
        import cronoq.client.worker as worker_module

        worker_module.PROTOCOL_VERSION = int(version)
    if os.environ.get("CRONOQ_BENCH_COUNT_MESSAGES"):
        _count_messages()

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
    loop.add_signal_handler(
        signal.SIGUSR1,
        lambda: print(f"MESSAGES {_MESSAGES['in']} {_MESSAGES['out']} {handled[0]}", flush=True),
    )
    task = asyncio.create_task(w.run())
    wid = await w.wait_registered(30)
    print(f"REGISTERED {wid} {w.granted_slots} {w.server_protocol_version}", flush=True)
    stopper = asyncio.create_task(stop.wait())
    await asyncio.wait({task, stopper}, return_when=asyncio.FIRST_COMPLETED)
    await w.stop(grace=2.0)
    with contextlib.suppress(Exception):
        await task
    with open(out, "w") as f:
        json.dump(
            {
                "handled": handled[0],
                "starts": starts,
                "messages_in": _MESSAGES["in"],
                "messages_out": _MESSAGES["out"],
            },
            f,
        )


# --------------------------------------------------------------------------- cronoq load


async def run_load(target: str, mode: str, n: int, chunk: int) -> None:
    from cronoq.client import Client

    loop = asyncio.get_running_loop()
    async with Client(target) as client:
        await client.snapshot()  # the connection is up before GO
        print("READY", flush=True)
        await loop.run_in_executor(None, sys.stdin.readline)
        t0, c0 = time.perf_counter(), time.process_time()
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
        print(f"DONE {time.perf_counter() - t0:.6f} {time.process_time() - c0:.6f}", flush=True)


# --------------------------------------------------------------------------- SSE subscribers


class _SseCounter(asyncio.Protocol):
    """One SSE subscriber on a plain socket: an HTTP/1.1 GET, then the raw response bytes are
    scanned without parsing them (no HTTP client, no chunk decoding, no copies).

    Every frame is counted: a frame is ``event: status\\ndata: <JSON>\\n\\n`` and a JSON line
    cannot hold a newline, so each occurrence of ``event: status\\n`` is exactly one frame; the
    chunked transfer framing between the server's sends never splits a frame (the server sends
    whole frames), and a marker split between two socket reads is found at the seam.
    """

    MARKER = b"event: status\n"
    ERROR = b"event: error\n"

    def __init__(self, request: bytes, on_live: Any, on_end: Any) -> None:
        self.request = request
        self.on_live = on_live
        self.on_end = on_end
        self.head: bytes | None = b""  # the response head until it is complete, then None
        self.live = False
        self.tail = b""  # the last bytes of the previous read (a marker may span two reads)
        self.count = 0
        self.error: bytes | None = None  # what follows the first ``event: error``
        self.transport: asyncio.Transport | None = None

    def itself(self) -> _SseCounter:  # the protocol factory
        return self

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        transport.write(self.request)

    def data_received(self, data: bytes) -> None:
        if self.head is not None:
            head = self.head + data
            end = head.find(b"\r\n\r\n")
            if end < 0:
                self.head = head
                return
            status = head.split(b"\r\n", 1)[0]
            if b" 200 " not in status + b" ":
                self.on_end(RuntimeError(f"SSE response: {status.decode(errors='replace')}"))
                return
            self.head = None
            data = head[end + 4 :]
        k = len(self.MARKER) - 1
        seam = self.tail + data[:k]
        self.count += data.count(self.MARKER) + seam.count(self.MARKER)
        if not self.live and b": live" in data:
            self.live = True
            self.on_live()
        if self.error is None and (self.ERROR in data or self.ERROR in seam):
            where = self.tail + data
            self.error = where[where.index(self.ERROR) + len(self.ERROR) :][:200]
        self.tail = data[-k:] if len(data) >= k else (self.tail + data)[-k:]

    def connection_lost(self, exc: Exception | None) -> None:
        self.on_end(exc)


async def run_sse(url: str, n: int) -> None:
    from urllib.parse import urlsplit

    u = urlsplit(url)
    host, port = u.hostname or "127.0.0.1", u.port or 80
    target = u.path + (f"?{u.query}" if u.query else "")
    request = (f"GET {target} HTTP/1.1\r\nHost: {u.netloc}\r\nAccept: text/event-stream\r\n\r\n").encode(
        "ascii"
    )
    live = [0]
    all_live = asyncio.Event()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    failed: list[BaseException] = []

    def on_live() -> None:
        live[0] += 1
        if live[0] == n:
            all_live.set()

    def on_end(exc: BaseException | None) -> None:
        if exc is not None and not all_live.is_set():
            failed.append(exc)
            all_live.set()

    subs = [_SseCounter(request, on_live, on_end) for _ in range(n)]
    for sub in subs:
        await loop.create_connection(sub.itself, host, port)
    try:
        await asyncio.wait_for(all_live.wait(), 30)
    except TimeoutError:
        raise SystemExit(f"only {live[0]} of {n} SSE streams went live") from None
    if failed:
        raise failed[0]
    print("LIVE", flush=True)
    await stop.wait()
    for sub in subs:
        if sub.transport is not None:
            sub.transport.close()
    errors = [s.error.decode(errors="replace") for s in subs if s.error is not None]
    print(f"EVENTS {sum(s.count for s in subs)} {len(errors)} {json.dumps(errors[:1])}", flush=True)


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
