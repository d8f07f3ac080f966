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

:func:`batched` is that writer, shared by both ends (``server/grpc_workers.py`` writes leases
and aborts, ``client/worker.py`` reports): each end says only what differs, the byte budget
(0 before or without batching), how many more items can follow, what an item weighs (None: it
never joins a batch), and how one item or several become a stream message.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import AsyncGenerator, Callable
from typing import Any, Generic, TypeVar

from cronoq.proto.protocol import FLUSH_BUSY_S, MAX_BATCH_ITEMS

__all__ = ["FlushQueue", "batched", "busy"]

T = TypeVar("T")
M = TypeVar("M")

#: What an item that cannot join a batch weighs while the writer lingers: it ends the linger.
_NEVER_FITS = 1 << 62

#: The end of the stream, seen while draining the queue into a batch.
_END: Any = object()


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


def _never(_item: object) -> bool:
    return False


def _always(_item: object) -> bool:
    return True


async def batched(
    queue: FlushQueue[T],
    *,
    budget: Callable[[], int],
    linger_s: float,
    room: Callable[[], int],
    size_of: Callable[[T], int | None],
    single: Callable[[T], M],
    pack: Callable[[list[T]], M],
    last: Callable[[T], bool] = _never,
    lingers: Callable[[T], bool] = _always,
) -> AsyncGenerator[M, None]:
    """The stream messages of ``queue`` until its end (``None``), or until an item ``last``
    says ends the stream has gone out.

    While ``budget()`` (bytes in one batch) is above 0, an item ``size_of`` weighs (not None)
    goes out packed with those queued behind it (``pack``, at most :data:`MAX_BATCH_ITEMS` and
    ``budget()`` bytes). A lone one lingers up to ``linger_s`` for company first, but only in a
    trickle: the previous flush was recent (:func:`busy`) and ``room()`` more items can follow
    (it waits for at most that many) and ``lingers(item)`` allows it (an item whose sender awaits
    an answer does not wait for company). Anything else goes out alone (``single``), as does a
    batch that nothing joined."""
    loop = asyncio.get_running_loop()
    last_flush = -math.inf

    def weight(item: T) -> int:
        n = size_of(item)
        return _NEVER_FITS if n is None else n

    while True:
        msg = await queue.get()
        if msg is None:
            return
        limit = budget()
        if limit > 0 and (size := size_of(msg)) is not None:
            if queue.empty() and busy(loop.time(), last_flush) and (more := room()) > 0 and lingers(msg):
                await queue.linger(linger_s, min(MAX_BATCH_ITEMS - 1, more), limit - size, weight)
            if not queue.empty():
                items, nxt = _drain(msg, size, queue, limit, size_of)
                yield single(msg) if len(items) == 1 else pack(items)
                last_flush = loop.time()
                if nxt is None:
                    continue
                if nxt is _END:
                    return
                msg = nxt
        yield single(msg)
        last_flush = loop.time()
        if last(msg):
            return


def _drain(
    first: T, size: int, queue: FlushQueue[T], budget: int, size_of: Callable[[T], int | None]
) -> tuple[list[T], Any]:
    """``first`` and what is queued behind it that fits one batch; also the item taken from the
    queue that did not join (to be sent next; ``_END`` for the end of the stream), or None."""
    items = [first]
    while len(items) < MAX_BATCH_ITEMS and not queue.empty():
        nxt = queue.get_nowait()
        if nxt is None:
            return items, _END
        n = size_of(nxt)
        if n is None or size + n > budget:
            return items, nxt
        size += n
        items.append(nxt)
    return items, None
