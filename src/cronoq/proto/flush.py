"""The worker stream's outbound queue, whose reader may linger for more before it writes.

Both ends of a version-4 session pack what is queued into one batch message (see
:mod:`cronoq.proto.protocol`). Under a trickle (one lease or report every millisecond or two)
the queue is empty each time the writer comes round, so every item would still go out alone: one
gRPC message, and its C-level callbacks on both ends, per item. :class:`FlushQueue` lets the
writer wait a little for company: :meth:`FlushQueue.linger` returns after ``bound_s`` (a
``loop.call_later`` timer), or at once when the queue holds ``items`` or more, or their sizes
add up past ``budget`` bytes, or an item arrives that ``size_of`` rates above the budget (for
example a stream end, which must not wait), whichever comes first.

Whether to linger at all is the writer's decision, and only for a lone item in a trickle:
nothing else is queued (a burst goes at once), :func:`busy` says the previous flush ended less
than :data:`~cronoq.proto.protocol.FLUSH_BUSY_S` ago, and more items can follow at all (the
server: the worker has a free slot; the worker: other leases are still running). Otherwise
waiting would only stall a round trip: a worker whose every slot is taken gets no lease until
it reports. A lone item on an idle stream (the previous flush long ago, or none) goes at once.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Generic, TypeVar

from cronoq.proto.protocol import FLUSH_BUSY_S

__all__ = ["FlushQueue", "busy"]

T = TypeVar("T")


def busy(now: float, last_flush: float) -> bool:
    """Whether a writer whose previous flush ended at ``last_flush`` should linger at ``now``."""
    return now - last_flush < FLUSH_BUSY_S


class FlushQueue(asyncio.Queue[T | None], Generic[T]):
    """An :class:`asyncio.Queue` (``None`` is the end of the stream) whose single reader may
    :meth:`linger` for more items."""

    def __init__(self, maxsize: int = 0) -> None:
        super().__init__(maxsize)
        self._waiter: asyncio.Future[None] | None = None
        self._want = 0
        self._room = 0
        self._size_of: Callable[[T], int] | None = None

    def put_nowait(self, item: T | None) -> None:
        super().put_nowait(item)
        waiter = self._waiter
        if waiter is None or waiter.done():
            return
        if item is None or self.qsize() >= self._want:
            waiter.set_result(None)
            return
        size_of = self._size_of
        if size_of is not None:
            self._room -= size_of(item)
            if self._room < 0:
                waiter.set_result(None)

    async def linger(self, bound_s: float, items: int, budget: int, size_of: Callable[[T], int]) -> None:
        """Wait until the queue holds ``items`` items, or the sizes of those queued from now on
        exceed ``budget``, or ``bound_s`` has passed, or a ``None`` is queued."""
        if self.qsize() >= items:
            return
        loop = asyncio.get_running_loop()
        waiter = loop.create_future()
        self._waiter, self._want, self._room, self._size_of = waiter, items, budget, size_of
        timer = loop.call_later(bound_s, _wake, waiter)
        try:
            await waiter
        finally:
            timer.cancel()
            self._waiter = None
            self._size_of = None


def _wake(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)
