"""The throughput benchmark behind ``cronoq bench``: no-op tasks through a real server.

:func:`run_benchmark` connects a :class:`~cronoq.client.Client` and an in-process remote
:class:`~cronoq.client.Worker` (a handler that does nothing) to the server, waits until the
worker registered, then measures:

1. a watch on the pool's terminal events opens first, so no completion is missed;
2. ``count`` tasks are submitted in ``SubmitBatch`` calls of ``batch`` tasks, one after the
   other (the submit rate is this phase alone);
3. the run ends when every submitted task's terminal event was seen. An event may arrive
   before the submit call that created its task returned, so events are kept by id and counted
   when both sides are known.

The clock starts before the watch opens and stops at the last terminal event: the end-to-end
rate includes submit, dispatch, the worker round trip and the event stream. Other workers of
the pool may take some of the tasks (their events count the same).

What the run shows while it goes is left to a :class:`BenchObserver` (the CLI draws progress
bars with it); the result is a :class:`BenchReport`, whose :meth:`BenchReport.to_json` is the
``cronoq bench --json`` document. Failures are exceptions: :class:`WorkerNotRegistered`,
:class:`BenchTimeout`, and :class:`~cronoq.client.ClientError` from the calls (also
``aborted`` when the event stream ends early).

The module imports the client (grpc) only inside :func:`run_benchmark`.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from cronoq.client import Client, Lease, Watch, Worker

__all__ = [
    "BenchError",
    "BenchObserver",
    "BenchOptions",
    "BenchReport",
    "BenchTimeout",
    "WorkerNotRegistered",
    "run_benchmark",
]

#: How often (seconds) the observer hears the completed count while the run goes.
PROGRESS_INTERVAL = 0.1


@dataclasses.dataclass(frozen=True)
class BenchOptions:
    """What to run: ``count`` tasks on ``pool`` of the server at ``server``."""

    server: str
    count: int = 2000
    pool: str = "default"
    #: slots the benchmark's worker asks for (the pool's max caps the grant)
    slots: int = 64
    #: tasks per ``SubmitBatch`` call
    batch: int = 100
    #: payload bytes per task (0: no payload)
    payload_size: int = 0
    #: give up (:class:`BenchTimeout`) after this many seconds from the start of the run
    timeout: float = 300.0
    token: str | None = None
    tls: bool = False
    #: deadline of one unary call and of the worker's registration
    call_timeout: float = 30.0


@dataclasses.dataclass(frozen=True)
class BenchReport:
    """The figures of one run (seconds from the start of the run)."""

    tasks: int
    pool: str
    worker_slots: int
    batch: int
    payload_bytes: int
    submit_seconds: float
    seconds: float
    #: terminal status → number of the submitted tasks (``unknown``: no event seen)
    statuses: dict[str, int]

    @property
    def submit_per_s(self) -> float | None:
        return self.tasks / self.submit_seconds if self.submit_seconds else None

    @property
    def tasks_per_s(self) -> float:
        return self.tasks / self.seconds

    @property
    def all_succeeded(self) -> bool:
        return self.statuses.get("succeeded", 0) == self.tasks

    def to_json(self) -> dict[str, Any]:
        """The ``cronoq bench --json`` document."""
        submit_per_s = self.submit_per_s
        return {
            "tasks": self.tasks,
            "pool": self.pool,
            "worker_slots": self.worker_slots,
            "batch": self.batch,
            "payload_bytes": self.payload_bytes,
            "submit_seconds": round(self.submit_seconds, 6),
            "submit_per_s": round(submit_per_s, 1) if submit_per_s is not None else None,
            "seconds": round(self.seconds, 6),
            "tasks_per_s": round(self.tasks_per_s, 1),
            "statuses": self.statuses,
        }


class BenchError(Exception):
    """The benchmark could not run to its end."""


class WorkerNotRegistered(BenchError):
    """The benchmark's worker did not register within the call timeout."""

    def __init__(self, server: str, timeout: float) -> None:
        super().__init__(f"the benchmark worker could not register with {server} within {timeout:g}s")


class BenchTimeout(BenchError):
    """Not every task finished within :attr:`BenchOptions.timeout`."""

    def __init__(self, completed: int, count: int, timeout: float) -> None:
        super().__init__(f"only {completed} of {count} tasks finished within {timeout:g}s")
        self.completed, self.count, self.timeout = completed, count, timeout


class BenchObserver:
    """What a run reports while it goes; every method does nothing here (override some).

    Called in this order: :meth:`started` once the worker registered; :meth:`submitted` after
    each batch and :meth:`completed` at most every :data:`PROGRESS_INTERVAL`;
    :meth:`submit_finished` once; :meth:`finished` with the final figures; :meth:`stopped`
    always, last (also when the run fails).
    """

    def started(self, count: int) -> None:
        """The run begins (``count`` tasks)."""

    def submitted(self, submitted: int) -> None:
        """``submitted`` tasks were acknowledged so far."""

    def completed(self, completed: int, elapsed: float) -> None:
        """``completed`` of the submitted tasks finished, ``elapsed`` seconds into the run."""

    def submit_finished(self, seconds: float) -> None:
        """Every task was submitted, ``seconds`` into the run."""

    def finished(self, completed: int, seconds: float) -> None:
        """The run ended after ``seconds``."""

    def stopped(self) -> None:
        """The run is over (successfully or not)."""


async def run_benchmark(opts: BenchOptions, observer: BenchObserver | None = None) -> BenchReport:
    """Run the benchmark ``opts`` describes against its server; see the module docstring."""
    from cronoq.client import Client, Worker

    async def noop(lease: Lease) -> None:
        return None

    obs = observer if observer is not None else BenchObserver()
    client = Client(opts.server, token=opts.token, tls=opts.tls)
    w = Worker(
        opts.server,
        opts.pool,
        noop,
        slots=opts.slots,
        token=opts.token,
        name=f"cronoq-bench:{os.getpid()}",
        tls=opts.tls,
        reconnect=False,
    )
    async with client:
        try:
            run_task = await _start_worker(w, opts.call_timeout)
        except TimeoutError:
            raise WorkerNotRegistered(opts.server, opts.call_timeout) from None
        try:
            return await _Run(opts, obs).measure(client, w.granted_slots)
        finally:
            await w.stop(grace=1.0)
            with contextlib.suppress(Exception):
                await run_task


async def _start_worker(w: Worker, timeout: float | None) -> asyncio.Task[None]:
    """Start ``w.run()`` and wait until it registered; a fatal session error is raised."""
    run_task: asyncio.Task[None] = asyncio.create_task(w.run())
    reg = asyncio.create_task(w.wait_registered())
    try:
        done, _ = await asyncio.wait({run_task, reg}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
    finally:
        if not reg.done():
            reg.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await reg
    if run_task in done:
        run_task.result()  # raises the session error
        raise RuntimeError("the worker stopped before it registered")
    if not done:
        raise TimeoutError
    return run_task


class _Run:
    """The state of one measurement: which tasks were submitted, which finished."""

    def __init__(self, opts: BenchOptions, observer: BenchObserver) -> None:
        self.opts = opts
        self.obs = observer
        self.submitted: set[int] = set()
        self.finished: dict[int, str] = {}  # terminal events, possibly before their submit returned
        self.counted = 0
        self.all_done = asyncio.Event()
        self.t0 = 0.0

    async def measure(self, client: Client, granted: int) -> BenchReport:
        opts = self.opts
        self.t0 = time.perf_counter()
        self.obs.started(opts.count)
        try:
            async with client.watch(pools=[opts.pool]) as events:
                collector = asyncio.create_task(self._collect(events))
                try:
                    submit_s = await self._submit_all(client)
                    await self._wait_all(collector)
                finally:
                    collector.cancel()
                    with contextlib.suppress(asyncio.CancelledError, Exception):
                        await collector
            total_s = time.perf_counter() - self.t0
            self.obs.finished(self.counted, total_s)
        finally:
            self.obs.stopped()
        statuses: dict[str, int] = {}
        for i in self.submitted:
            st = self.finished.get(i, "unknown")
            statuses[st] = statuses.get(st, 0) + 1
        return BenchReport(
            tasks=opts.count,
            pool=opts.pool,
            worker_slots=granted,
            batch=opts.batch,
            payload_bytes=opts.payload_size,
            submit_seconds=submit_s,
            seconds=total_s,
            statuses=statuses,
        )

    async def _collect(self, events: Watch) -> None:
        count = self.opts.count
        async for ev in events:
            self.finished[ev.id] = ev.status
            if ev.id in self.submitted:
                self.counted += 1
            if self.counted >= count and len(self.submitted) == count:
                self.all_done.set()
                return

    async def _submit_all(self, client: Client) -> float:
        """Submit every task in batches; the seconds it took from the start of the run."""
        from cronoq.client import task

        opts = self.opts
        payload = b"x" * opts.payload_size if opts.payload_size else None
        last = 0.0
        left = opts.count
        while left:
            n = min(opts.batch, left)
            subs = await client.submit_batch(
                [task(payload, pool=opts.pool, kind="bench") for _ in range(n)],
                call_timeout=opts.call_timeout,
            )
            for s in subs:
                self.submitted.add(s.id)
                if s.id in self.finished:
                    self.counted += 1
            left -= n
            self.obs.submitted(opts.count - left)
            now = time.perf_counter()
            if now - last > PROGRESS_INTERVAL:
                last = now
                self.obs.completed(self.counted, now - self.t0)
        submit_s = time.perf_counter() - self.t0
        self.obs.submit_finished(submit_s)
        if self.counted >= opts.count:
            self.all_done.set()
        return submit_s

    async def _wait_all(self, collector: asyncio.Task[None]) -> None:
        """Until every submitted task's terminal event was seen (or the run times out)."""
        from cronoq.client import ClientError

        opts = self.opts
        deadline = self.t0 + opts.timeout
        while not self.all_done.is_set():
            if collector.done():
                collector.result()
                raise ClientError("aborted", "the event stream ended before every task finished")
            if time.perf_counter() > deadline:
                raise BenchTimeout(self.counted, opts.count, opts.timeout)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(PROGRESS_INTERVAL):
                    await self.all_done.wait()
            self.obs.completed(self.counted, time.perf_counter() - self.t0)
