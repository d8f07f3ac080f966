"""The plumbing of ``BlockingScheduler`` (docs/reference/behaviour.md#blocking-api): its
private loop thread, blocking handles and event streams.

Theory of operation
-------------------
The blocking scheduler owns a private event loop running in a daemon thread.  Every method
submits the matching coroutine of an ordinary :class:`Scheduler` to that loop with
``asyncio.run_coroutine_threadsafe`` and waits for its result (:meth:`BlockingBase._call`), so
the engine is still only ever touched from one thread.  Handles and event streams get blocking
counterparts.  It is safe to call from any number of threads.

:class:`BlockingBase` holds what is written by hand: the loop thread, ``start``/``shutdown``
and the properties.  The API methods and the constructor are not: ``scripts/gen_blocking.py``
writes them into :mod:`cronoq.runtime.blocking` from :class:`Scheduler`'s signatures (a test
fails when that file is stale), so the two cannot drift apart.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import threading
from collections.abc import Callable, Coroutine, Iterator
from typing import Any, Self, TypeVar, cast

from cronoq.engine.model import StatusEvent
from cronoq.errors import NotStartedError
from cronoq.runtime.clock import Clock
from cronoq.runtime.events import EventStream, ProgressEventStream
from cronoq.runtime.handles import TaskHandle
from cronoq.runtime.scheduler import Scheduler
from cronoq.runtime.seam import SchedulerSeam

T = TypeVar("T")


class BlockingHandle:
    """Blocking view of a :class:`TaskHandle`."""

    __slots__ = ("_bs", "_h")

    def __init__(self, bs: BlockingBase, h: TaskHandle) -> None:
        self._bs = bs
        self._h = h

    @property
    def id(self) -> int:
        return self._h.id

    @property
    def duplicate(self) -> bool:
        return self._h.duplicate

    def result(self, timeout: float | None = None) -> Any:
        """Wait for the outcome: the output, or raise TaskFailed (TimeoutError after ``timeout``)."""
        if self._h.done():  # known outcome: no loop needed (also after shutdown, loop gone)
            return self._h._fut.result()

        async def wait() -> Any:
            return await self._h

        return self._bs._call(wait(), timeout)

    def done(self) -> bool:
        return self._h.done()

    def cancel(self) -> bool:
        return bool(self._bs._call(self._bs._sched.cancel(self._h.id)))

    def __repr__(self) -> str:
        return f"<BlockingHandle id={self.id}>"


class BlockingEventStream:
    """Blocking iterator over a subscriber's events.

    Reads go through the scheduler's loop while the stream is live.  Once it ended (the
    scheduler shut down: docs/reference/behaviour.md#scheduler-api) nothing pushes to it any more, so what it
    buffered before is read on the caller's thread, without the loop (which may be gone), and iteration then
    stops.  ``close()`` takes effect for this view at once; the subscription itself is dropped
    on the loop thread.
    """

    __slots__ = ("_bs", "_closed", "_s")

    def __init__(self, bs: BlockingBase, s: EventStream | ProgressEventStream) -> None:
        self._bs = bs
        # (typed as the plain stream: one made with progress=True also yields ProgressEvent)
        self._s = cast(EventStream, s)
        self._closed = False

    @property
    def lagged(self) -> int:
        return self._s.lagged

    @property
    def closed(self) -> bool:
        return self._closed or self._s.closed

    def __iter__(self) -> Iterator[StatusEvent]:
        return self

    def __next__(self) -> StatusEvent:
        return self.next()

    def next(self, timeout: float | None = None) -> StatusEvent:
        """The next event; StopIteration when the stream ends, TimeoutError after ``timeout``.

        After a shutdown: the events buffered before it, then StopIteration.
        """
        if self._closed:
            raise StopIteration
        if not self._s.closed:
            try:
                return self._bs._call(self._s.__anext__(), timeout)
            except StopAsyncIteration:
                raise StopIteration from None
            except NotStartedError:
                if not self._s.closed:  # (not a shutdown that ended this stream)
                    raise
                # the scheduler shut down under this read: go on with what was buffered
        return _read_ended(self._s)

    def close(self) -> None:
        self._closed = True
        loop = self._bs._loop
        if loop is not None and loop.is_running():
            try:
                loop.call_soon_threadsafe(self._s.close)
                return
            except RuntimeError:  # the loop closed meanwhile (a concurrent shutdown)
                pass
        self._s.close()

    def __enter__(self) -> BlockingEventStream:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def _read_ended(stream: EventStream) -> StatusEvent:
    """The next event of an ended (or closed) stream, read on this thread.

    Nothing pushes to it any more, so its ``__anext__`` answers from the buffer without ever
    awaiting: an event, ``EventsLagged`` (``on_lag="raise"``), or the end (StopIteration here).
    """
    coro = stream.__anext__()
    try:
        coro.send(None)
    except StopIteration as done:
        ev: StatusEvent = done.value
        return ev
    except StopAsyncIteration:
        raise StopIteration from None
    coro.close()  # pragma: no cover - an ended stream never waits
    raise RuntimeError("an ended event stream waited for events")  # pragma: no cover


async def _let_waiters_finish(limit: float = 1.0) -> None:
    """Let the loop's other tasks (threads waiting on handles/streams) see their outcome."""
    me = asyncio.current_task()
    others = [t for t in asyncio.all_tasks() if t is not me]
    if others:
        await asyncio.wait(others, timeout=limit)


class BlockingBase:
    """The loop thread and lifecycle of :class:`~cronoq.runtime.blocking.BlockingScheduler`."""

    def __init__(self, sched: Scheduler) -> None:
        self._sched = sched
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        #: calls other threads are waiting on: failed when the loop stops under them
        self._calls: set[concurrent.futures.Future[Any]] = set()

    # -------------------------------------------------------------- plumbing

    def _call(self, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        loop = self._loop
        if loop is None or not loop.is_running():
            coro.close()
            raise NotStartedError()
        if threading.current_thread() is self._thread:
            coro.close()
            raise RuntimeError("BlockingScheduler methods cannot be called from its own loop thread")
        try:
            fut = asyncio.run_coroutine_threadsafe(coro, loop)
        except RuntimeError:  # the loop closed since the check above (a concurrent shutdown)
            coro.close()
            raise NotStartedError() from None
        calls = self._calls
        calls.add(fut)
        try:
            return fut.result(timeout)
        except concurrent.futures.TimeoutError:
            fut.cancel()
            raise TimeoutError("timed out waiting for the scheduler") from None
        finally:
            calls.discard(fut)

    def run_coroutine(self, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        """Run ``coro`` on the scheduler's loop and return its result (``TimeoutError`` after
        ``timeout`` s): several scheduler calls made in one hop onto the loop, in order.

        Not from the loop's own thread (``RuntimeError``); before ``start()``,
        ``SchedulerError``.
        """
        return self._call(coro, timeout)

    # -------------------------------------------------------------- lifecycle

    @property
    def started(self) -> bool:
        return self._sched.started

    @property
    def pools(self) -> list[str]:
        return self._sched.pools

    @property
    def default_pool(self) -> str:
        return self._sched.default_pool

    @property
    def clock(self) -> Clock:
        return self._sched.clock

    @property
    def seam(self) -> SchedulerSeam:
        """The underlying scheduler's seam (its methods run on the private loop only)."""
        return self._sched.seam

    @property
    def scheduler(self) -> Scheduler:
        """The underlying asyncio scheduler (runs on the private loop)."""
        return self._sched

    def start(self) -> None:
        with self._lock:
            if self._loop is not None and self._sched.started:
                return
            loop = asyncio.new_event_loop()
            ready = threading.Event()

            def run() -> None:
                asyncio.set_event_loop(loop)
                loop.call_soon(ready.set)
                loop.run_forever()

            thread = threading.Thread(target=run, name="cronoq-scheduler", daemon=True)
            thread.start()
            ready.wait()
            self._loop = loop
            self._thread = thread
            self._call(self._sched.start())

    def shutdown(self, grace: float | None = 5.0) -> None:
        """Stop the scheduler (see :meth:`Scheduler.shutdown`) and its loop thread.

        ``grace`` defaults to 5.0 s; ``None`` means the scheduler's ``shutdown_grace`` (what
        ``with`` uses).  Idempotent.
        """
        with self._lock:
            loop = self._loop
            if loop is None:
                return
            try:
                self._call(self._sched.shutdown(grace))
                self._call(_let_waiters_finish())  # else threads in result()/next() may hang
            finally:
                loop.call_soon_threadsafe(loop.stop)
                if self._thread is not None:
                    self._thread.join()
                self._loop = None
                self._thread = None
                # a call that reached the loop too late to finish (another thread's result(),
                # next(), submit() racing this shutdown) would otherwise wait forever
                for fut in list(self._calls):
                    with contextlib.suppress(concurrent.futures.InvalidStateError):
                        fut.set_exception(NotStartedError())
                loop.close()

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.shutdown(None)  # the scheduler's shutdown_grace, like ``async with``

    def __repr__(self) -> str:
        return f"<BlockingScheduler pools={self.pools} started={self.started}>"


async def on_loop(fn: Callable[[], T]) -> T:
    """``fn()`` called on the scheduler's loop (for its methods that are not coroutines)."""
    return fn()
