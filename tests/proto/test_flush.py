"""``FlushQueue.linger`` (cronoq.proto.flush): it returns when the queue holds the wanted number
of items, when the items queued meanwhile exceed the byte budget, when the stream end is queued,
or at the bound, whichever comes first; ``busy`` lingers only right after a flush."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import TypeVar

from cronoq.proto import flush
from cronoq.proto.flush import FlushQueue, busy
from cronoq.proto.protocol import FLUSH_BUSY_S

T = TypeVar("T")
LONG = 60.0  # a bound the tests never reach: an early return is the only way out


def size(item: int) -> int:
    return item


async def within(aw: Awaitable[T], timeout: float = 5.0) -> T:
    """``aw`` awaited in this task (unlike ``wait_for``, no new task: what the test queued with
    ``call_soon`` arrives only once ``aw`` is waiting)."""
    async with asyncio.timeout(timeout):
        return await aw


def later(q: FlushQueue[int], *items: int | None) -> None:
    """Queue ``items`` on the next loop turn, once the caller is lingering."""
    loop = asyncio.get_running_loop()
    for item in items:
        loop.call_soon(q.put_nowait, item)


async def test_linger_ends_when_enough_items_are_queued() -> None:
    q: FlushQueue[int] = FlushQueue()
    later(q, 1, 1, 1)
    await within(q.linger(LONG, 3, 1 << 20, size))
    assert q.qsize() == 3


async def test_fewer_items_wait_for_the_bound() -> None:
    q: FlushQueue[int] = FlushQueue()
    loop = asyncio.get_running_loop()
    later(q, 1, 1)
    t0 = loop.time()
    await q.linger(0.05, 3, 1 << 20, size)
    assert loop.time() - t0 >= 0.045
    assert q.qsize() == 2


async def test_linger_returns_at_once_when_the_queue_holds_enough() -> None:
    q: FlushQueue[int] = FlushQueue()
    for _ in range(3):
        q.put_nowait(1)
    await within(q.linger(LONG, 3, 1 << 20, size))


async def test_linger_ends_past_the_byte_budget() -> None:
    q: FlushQueue[int] = FlushQueue()
    later(q, 60, 40, 1)  # 100 is the budget exactly, the third item is past it
    await within(q.linger(LONG, 64, 100, size))
    assert q.qsize() == 3


async def test_items_within_the_budget_wait_for_the_bound() -> None:
    q: FlushQueue[int] = FlushQueue()
    loop = asyncio.get_running_loop()
    later(q, 60, 40)
    t0 = loop.time()
    await q.linger(0.05, 64, 100, size)
    assert loop.time() - t0 >= 0.045


async def test_the_stream_end_ends_the_linger() -> None:
    q: FlushQueue[int] = FlushQueue()
    later(q, None)
    await within(q.linger(LONG, 64, 1 << 20, size))
    assert q.get_nowait() is None


async def test_no_waiter_is_left_behind() -> None:
    q: FlushQueue[int] = FlushQueue()
    await q.linger(0.001, 64, 1 << 20, size)
    for _ in range(70):
        q.put_nowait(1)  # nothing to wake, nothing raised
    assert q.qsize() == 70


def test_busy_only_right_after_a_flush() -> None:
    assert busy(10.0, 10.0)
    assert busy(10.0 + FLUSH_BUSY_S / 2, 10.0)
    assert not busy(10.0 + FLUSH_BUSY_S, 10.0)
    assert not busy(10.0, float("-inf"))  # never flushed: a lone first item goes at once
    assert flush.FLUSH_BUSY_S == FLUSH_BUSY_S


def _collect(q: FlushQueue[int], budget: int, last: int | None = None) -> list[object]:
    """What ``batched`` writes for ``q`` (items: ints weighing their value, negatives never join;
    a batch is written as a list)."""

    async def run() -> list[object]:
        gen = flush.batched(
            q,
            budget=lambda: budget,
            linger_s=LONG,
            room=lambda: 0,  # never linger
            size_of=lambda i: None if i < 0 else i,
            single=lambda i: i,
            pack=lambda items: list(items),
            last=lambda i: i == last,
        )
        return [m async for m in gen]

    return asyncio.run(within(run()))


def test_batched_packs_what_is_queued_within_the_budget() -> None:
    q: FlushQueue[int] = FlushQueue()
    for item in (1, 2, 3, 10, 4, None):
        q.put_nowait(item)
    # 1+2+3 fit 8; 10 does not join and goes alone; 4 is then alone (a batch of one is single)
    assert _collect(q, 8) == [[1, 2, 3], 10, 4]


def test_batched_sends_what_never_joins_alone_and_stops_after_last() -> None:
    q: FlushQueue[int] = FlushQueue()
    for item in (1, -1, 2, 3, -2, 5, None):
        q.put_nowait(item)
    assert _collect(q, 100, last=-2) == [1, -1, [2, 3], -2]


def test_batched_without_a_budget_writes_one_by_one() -> None:
    q: FlushQueue[int] = FlushQueue()
    for item in (1, 2, 3, None):
        q.put_nowait(item)
    assert _collect(q, 0) == [1, 2, 3]
