"""The worker stream's writer (``cronoq.server.grpc_workers.outbound``), in process: a lone lease
on an idle stream goes out at once; right after a flush, a version-4 writer lingers for company
(so a trickle is coalesced), at most the bound, less when a full batch or the byte budget is
queued or anything but a lease arrives; the byte budget still splits batches; a version-3 writer
never lingers and never batches.

The bounds are patched per test: a long one (60 s) where only an early end can get the test
through, and "always busy" where the test must not depend on how fast the machine is. Items are
queued with ``loop.call_soon`` from the test, so they arrive while the writer lingers."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TypeVar

import pytest

from cronoq.proto import flush
from cronoq.proto.cronoq.v1 import cronoq_pb2 as pb
from cronoq.proto.flush import FlushQueue
from cronoq.proto.protocol import MAX_BATCH_ITEMS
from cronoq.server import grpc_workers
from cronoq.server.grpc_workers import outbound
from cronoq.server.workers import LeaseMsg, ServerMsg, ShutdownMsg

BUDGET = 1 << 20
#: sets (LEASE_LINGER_S, FLUSH_BUSY_S) for one test
Bounds = Callable[[float, float], None]
T = TypeVar("T")
LONG = 60.0


def lease(i: int, payload: bytes = b"") -> LeaseMsg:
    return LeaseMsg(i, i, 1, payload, "", "", "", {}, None, None, "p", 1, None)


def ids(msg: pb.ServerMessage) -> list[int]:
    if msg.WhichOneof("msg") == "lease":
        return [msg.lease.lease]
    assert msg.WhichOneof("msg") == "batch", msg
    return [m.lease.lease for m in msg.batch.messages]


async def within(aw: Awaitable[T], timeout: float = 5.0) -> T:
    """``aw`` awaited in this task (unlike ``wait_for``, no new task: what the test queued with
    ``call_soon`` arrives only once ``aw`` is waiting)."""
    async with asyncio.timeout(timeout):
        return await aw


def later(q: FlushQueue[ServerMsg], *items: ServerMsg | None) -> None:
    loop = asyncio.get_running_loop()
    for item in items:
        loop.call_soon(q.put_nowait, item)


@pytest.fixture
def bounds(monkeypatch: pytest.MonkeyPatch) -> Bounds:
    def set_(linger: float, busy: float) -> None:
        monkeypatch.setattr(grpc_workers, "LEASE_LINGER_S", linger)
        monkeypatch.setattr(flush, "FLUSH_BUSY_S", busy)

    return set_


async def test_a_lone_lease_on_an_idle_stream_goes_at_once(bounds: Bounds) -> None:
    bounds(LONG, LONG)  # it would wait a minute if it lingered
    q: FlushQueue[ServerMsg] = FlushQueue()
    gen = outbound(q, True, BUDGET)
    q.put_nowait(lease(1))
    first = await within(anext(gen))
    assert first.WhichOneof("msg") == "lease" and first.lease.lease == 1
    await gen.aclose()


async def test_a_trickle_is_coalesced_until_a_batch_is_full(bounds: Bounds) -> None:
    bounds(LONG, LONG)
    q: FlushQueue[ServerMsg] = FlushQueue()
    gen = outbound(q, True, BUDGET)
    q.put_nowait(lease(1))
    assert ids(await within(anext(gen))) == [1]
    # the next lease comes right after a flush: the writer lingers, and the leases that trickle
    # in meanwhile join it; a full batch ends the wait (the 60 s bound would fail the test)
    q.put_nowait(lease(2))
    later(q, *(lease(i) for i in range(3, 3 + MAX_BATCH_ITEMS)))
    assert ids(await within(anext(gen))) == list(range(2, 2 + MAX_BATCH_ITEMS))
    # the one over lingers in its turn (busy), and goes when the stream ends
    later(q, None)
    assert ids(await within(anext(gen))) == [2 + MAX_BATCH_ITEMS]


async def test_a_burst_goes_at_once(bounds: Bounds) -> None:
    bounds(LONG, LONG)  # busy, and a minute's bound: only "no linger" gets through
    q: FlushQueue[ServerMsg] = FlushQueue()
    gen = outbound(q, True, BUDGET)
    q.put_nowait(lease(1))
    await within(anext(gen))
    for i in (2, 3, 4):  # queued together (one engine step): sent together, at once
        q.put_nowait(lease(i))
    assert ids(await within(anext(gen))) == [2, 3, 4]
    await gen.aclose()


async def test_no_linger_when_the_worker_has_no_free_slot(bounds: Bounds) -> None:
    bounds(LONG, LONG)
    q: FlushQueue[ServerMsg] = FlushQueue()
    free = [8]
    gen = outbound(q, True, BUDGET, lambda: free[0])
    q.put_nowait(lease(1))
    await within(anext(gen))
    free[0] = 0  # every slot taken: no lease can follow until the worker reports
    q.put_nowait(lease(2))
    msg = await within(anext(gen))
    assert msg.WhichOneof("msg") == "lease" and msg.lease.lease == 2
    await gen.aclose()


async def test_the_linger_waits_for_the_free_slots_only(bounds: Bounds) -> None:
    bounds(LONG, LONG)
    q: FlushQueue[ServerMsg] = FlushQueue()
    gen = outbound(q, True, BUDGET, lambda: 2)  # two slots left after lease 2: two more at most
    q.put_nowait(lease(1))
    await within(anext(gen))
    q.put_nowait(lease(2))
    later(q, lease(3), lease(4))  # the last free slots filled: no reason to wait on
    assert ids(await within(anext(gen))) == [2, 3, 4]
    await gen.aclose()


async def test_a_lingering_lease_waits_no_longer_than_the_bound(bounds: Bounds) -> None:
    bounds(0.02, LONG)  # always busy, 20 ms bound
    q: FlushQueue[ServerMsg] = FlushQueue()
    gen = outbound(q, True, BUDGET)
    loop = asyncio.get_running_loop()
    q.put_nowait(lease(1))
    assert ids(await within(anext(gen))) == [1]
    q.put_nowait(lease(2))
    later(q, lease(3), lease(4))
    t0 = loop.time()
    assert ids(await within(anext(gen))) == [2, 3, 4]
    assert loop.time() - t0 >= 0.019  # it did wait for company...
    q.put_nowait(lease(5))  # ...and a lone one waits the bound, then goes alone
    msg = await within(anext(gen))
    assert msg.WhichOneof("msg") == "lease" and msg.lease.lease == 5
    await gen.aclose()


async def test_the_byte_budget_ends_the_linger_and_splits_the_batch(bounds: Bounds) -> None:
    bounds(LONG, LONG)
    q: FlushQueue[ServerMsg] = FlushQueue()
    gen = outbound(q, True, 3000)  # three 1000-byte payloads do not fit, two do
    q.put_nowait(lease(1))
    assert ids(await within(anext(gen))) == [1]
    q.put_nowait(lease(2, b"x" * 1000))
    later(q, lease(3, b"x" * 1000), lease(4, b"x" * 1000))
    assert ids(await within(anext(gen))) == [2, 3]
    assert ids(await within(anext(gen))) == [4]
    await gen.aclose()


async def test_a_shutdown_ends_the_linger(bounds: Bounds) -> None:
    bounds(LONG, LONG)
    q: FlushQueue[ServerMsg] = FlushQueue()
    gen = outbound(q, True, BUDGET)
    q.put_nowait(lease(1))
    await within(anext(gen))
    q.put_nowait(lease(2))
    later(q, ShutdownMsg("bye", not_leader=True))
    assert ids(await within(anext(gen))) == [2]
    assert (await within(anext(gen))).shutdown.not_leader
    with pytest.raises(StopAsyncIteration):
        await anext(gen)


async def test_the_stream_end_ends_the_linger(bounds: Bounds) -> None:
    bounds(LONG, LONG)
    q: FlushQueue[ServerMsg] = FlushQueue()
    gen = outbound(q, True, BUDGET)
    q.put_nowait(lease(1))
    await within(anext(gen))
    q.put_nowait(lease(2))
    later(q, None)
    assert ids(await within(anext(gen))) == [2]
    with pytest.raises(StopAsyncIteration):
        await within(anext(gen))


async def test_a_version_3_writer_never_lingers_or_batches(bounds: Bounds) -> None:
    bounds(LONG, LONG)
    q: FlushQueue[ServerMsg] = FlushQueue()
    gen = outbound(q, False, BUDGET)
    for i in range(1, 6):
        q.put_nowait(lease(i))
    got = [await within(anext(gen)) for _ in range(5)]
    assert [m.WhichOneof("msg") for m in got] == ["lease"] * 5
    assert [m.lease.lease for m in got] == [1, 2, 3, 4, 5]
    await gen.aclose()
