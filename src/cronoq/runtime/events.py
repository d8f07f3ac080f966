"""``EventStream``: one subscriber's bounded view of status events (docs/reference/behaviour.md#lifecycle,
docs/reference/behaviour.md#scheduler-api).

Each stream has a ring buffer of ``capacity`` events.  The scheduler pushes without ever
waiting; when the buffer is full the oldest event is dropped and counted in ``lagged``.  With
``on_lag="raise"`` the next read raises ``EventsLagged(skipped)`` once, then continues with
what is buffered.

Besides one event per ``__anext__``, a reader can take everything buffered at once
(:meth:`EventStream.take`, or :meth:`EventStream.next_batch`, which waits for the first): one
wake-up per batch, however many events arrived (the server's SSE fan-out reads this way).

A subscriber that asks for progress (``sched.events(progress=True)``) gets a
:class:`ProgressEventStream`: the same ring, holding :class:`~cronoq.engine.progress.ProgressEvent`
items beside the status events (docs/how-to/progress.md#event-streams).  Plain
:class:`EventStream` subscribers never see a progress event: the scheduler pushes those only to
the streams that asked.
"""

from __future__ import annotations

import asyncio
from collections import deque
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from cronoq.engine.model import StatusEvent
from cronoq.engine.progress import ProgressEvent
from cronoq.errors import EventsLagged

if TYPE_CHECKING:
    from cronoq.runtime.scheduler import Scheduler


E = TypeVar("E")


class _Ring(Generic[E]):
    """One subscriber's ring buffer of events of type ``E`` (see the module docstring)."""

    __slots__ = ("_buf", "_cap", "_closed", "_ended", "_lagged", "_raise", "_sched", "_unreported", "_waiter")

    def __init__(self, sched: Scheduler, capacity: int, on_lag: str) -> None:
        if on_lag not in ("skip", "raise"):
            raise ValueError(f"on_lag must be 'skip' or 'raise' (got {on_lag!r})")
        self._sched: Scheduler | None = sched
        self._buf: deque[E] = deque()
        self._cap = capacity
        self._raise = on_lag == "raise"
        self._lagged = 0
        self._unreported = 0
        self._waiter: asyncio.Future[None] | None = None
        self._closed = False
        self._ended = False

    @property
    def lagged(self) -> int:
        """Events dropped because this subscriber was too slow."""
        return self._lagged

    @property
    def closed(self) -> bool:
        return self._closed or self._ended

    def _push(self, ev: E) -> None:
        buf = self._buf
        if len(buf) >= self._cap:
            buf.popleft()
            self._lagged += 1
            self._unreported += 1
        buf.append(ev)
        w = self._waiter
        if w is not None and not w.done():
            w.set_result(None)

    def _end(self) -> None:
        """Shutdown: no more events; what is buffered can still be read."""
        self._ended = True
        self._sched = None
        w = self._waiter
        if w is not None and not w.done():
            w.set_result(None)

    def close(self) -> None:
        """Stop the subscription now; the next read raises StopAsyncIteration."""
        if self._closed:
            return
        self._closed = True
        self._buf.clear()
        sched = self._sched
        if sched is not None:
            sched._unsubscribe(self)
        self._end()

    async def aclose(self) -> None:
        self.close()

    def __aiter__(self) -> _Ring[E]:
        return self

    async def __anext__(self) -> E:
        while True:
            if self._closed:
                raise StopAsyncIteration
            if self._unreported and self._raise:
                n = self._unreported
                self._unreported = 0
                raise EventsLagged(n)
            if self._buf:
                return self._buf.popleft()
            if self._ended:
                raise StopAsyncIteration
            self._waiter = asyncio.get_running_loop().create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None

    def take(self) -> deque[E]:
        """Everything buffered now, in order, without waiting (empty when nothing is, or closed).

        Raises ``EventsLagged`` like iteration does (``on_lag="raise"``).
        """
        if self._closed:
            return deque()
        if self._unreported and self._raise:
            n = self._unreported
            self._unreported = 0
            raise EventsLagged(n)
        buf = self._buf
        if not buf:
            return deque()
        self._buf = deque()
        return buf

    async def next_batch(self, timeout: float | None = None) -> deque[E]:
        """Everything buffered, in order, waiting up to ``timeout`` s (None: no limit) for one event.

        One wake-up per call however many events arrived meanwhile (the server's SSE fan-out
        reads this way).  Empty when the wait timed out or the stream is closed or ended (see
        :attr:`closed`).  Raises ``EventsLagged`` like iteration does (``on_lag="raise"``).
        """
        waited = False
        while True:
            batch = self.take()
            if batch or self._closed or self._ended or waited:
                return batch
            loop = asyncio.get_running_loop()
            w = self._waiter = loop.create_future()
            timer = loop.call_later(timeout, _wake, w) if timeout is not None else None
            try:
                await w
            finally:
                self._waiter = None
                if timer is not None:
                    timer.cancel()
            waited = True

    async def __aenter__(self) -> _Ring[E]:
        return self

    async def __aexit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<EventStream buffered={len(self._buf)} lagged={self._lagged} closed={self.closed}>"


class EventStream(_Ring[StatusEvent]):
    """Async iterator of :class:`StatusEvent` for one subscriber."""

    __slots__ = ()

    def __aiter__(self) -> EventStream:
        return self

    async def __aenter__(self) -> EventStream:
        return self


class ProgressEventStream(_Ring[StatusEvent | ProgressEvent]):
    """Async iterator of :class:`StatusEvent` and :class:`~cronoq.engine.progress.ProgressEvent`
    for one subscriber that asked for progress (``sched.events(progress=True)``)."""

    __slots__ = ()

    def __aiter__(self) -> ProgressEventStream:
        return self

    async def __aenter__(self) -> ProgressEventStream:
        return self


def _wake(w: asyncio.Future[None]) -> None:
    if not w.done():
        w.set_result(None)
