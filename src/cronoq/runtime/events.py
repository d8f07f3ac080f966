"""``EventStream``: one subscriber's bounded view of status events (SPEC §4, §16.1).

Each stream has a ring buffer of ``capacity`` events.  The scheduler pushes without ever
waiting; when the buffer is full the oldest event is dropped and counted in ``lagged``.  With
``on_lag="raise"`` the next read raises ``EventsLagged(skipped)`` once, then continues with
what is buffered.
"""

from __future__ import annotations

import asyncio
from collections import deque
from typing import TYPE_CHECKING, Any

from cronoq.engine.model import StatusEvent
from cronoq.errors import EventsLagged

if TYPE_CHECKING:
    from cronoq.runtime.scheduler import Scheduler


class EventStream:
    """Async iterator of :class:`StatusEvent` for one subscriber."""

    __slots__ = ("_buf", "_cap", "_closed", "_ended", "_lagged", "_raise", "_sched", "_unreported", "_waiter")

    def __init__(self, sched: Scheduler, capacity: int, on_lag: str) -> None:
        if on_lag not in ("skip", "raise"):
            raise ValueError(f"on_lag must be 'skip' or 'raise' (got {on_lag!r})")
        self._sched: Scheduler | None = sched
        self._buf: deque[StatusEvent] = deque()
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

    def _push(self, ev: StatusEvent) -> None:
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

    def __aiter__(self) -> EventStream:
        return self

    async def __anext__(self) -> StatusEvent:
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

    async def __aenter__(self) -> EventStream:
        return self

    async def __aexit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<EventStream buffered={len(self._buf)} lagged={self._lagged} closed={self.closed}>"
