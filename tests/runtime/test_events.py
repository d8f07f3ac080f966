"""Status events and EventStream (events: docs/reference/behaviour.md#lifecycle; EventStream:
docs/reference/behaviour.md#scheduler-api)."""

from __future__ import annotations

import asyncio
import time

import pytest

from cronoq import (
    EventsLagged,
    EventStream,
    Permanent,
    Retryable,
    RetryPolicy,
    Scheduler,
    StatusEvent,
    TaskFailed,
)

from .conftest import Gate, pool, wait


async def nxt(stream: EventStream) -> StatusEvent:
    return await wait(stream.__anext__())


async def take(stream: EventStream, n: int) -> list[StatusEvent]:
    return [await nxt(stream) for _ in range(n)]


def brief(events: list[StatusEvent]) -> list[tuple]:
    return [(e.id, e.status, e.attempt, e.message) for e in events]


async def test_events_is_sync_and_returns_stream():
    async with Scheduler([pool()]) as s:
        stream = s.events()
        assert isinstance(stream, EventStream)
        assert stream.__aiter__() is stream
        assert stream.lagged == 0
        assert stream.closed is False
        stream.close()


async def test_terminal_events_only_by_default():
    async def run(ctx, p):
        if p == "bad":
            raise Permanent("nope")
        return p

    async with Scheduler([pool("w", executor=run)]) as s:
        stream = s.events()
        before = time.time()
        ok = await s.submit("good", key="g")
        await wait(ok)
        bad = await s.submit("bad")
        with pytest.raises(TaskFailed):
            await wait(bad)
        after = time.time()
        e1, e2 = await take(stream, 2)
    assert isinstance(e1, StatusEvent)
    assert (e1.id, e1.pool, e1.key, e1.status, e1.attempt, e1.message) == (
        ok.id,
        "w",
        "g",
        "succeeded",
        1,
        None,
    )
    assert (e2.id, e2.pool, e2.key, e2.status, e2.attempt, e2.message) == (
        bad.id,
        "w",
        None,
        "failed",
        1,
        "nope",
    )
    for e in (e1, e2):
        assert before - 0.5 <= e.at <= after + 0.5


async def test_all_transitions_with_emit_transitions():
    async def run(ctx, p):
        if ctx.attempt == 1:
            raise Retryable("flaky")
        return "ok"

    async with Scheduler([pool(executor=run)], emit_transitions=True) as s:
        stream = s.events()
        h = await s.submit(1, key="k", retry=RetryPolicy(initial_backoff=0))
        assert await wait(h) == "ok"
        events = await take(stream, 7)
    assert brief(events) == [
        (h.id, "blocked", 0, None),
        (h.id, "ready", 0, None),
        (h.id, "running", 1, None),
        (h.id, "retrying", 1, "flaky"),
        (h.id, "ready", 1, None),
        (h.id, "running", 2, None),
        (h.id, "succeeded", 2, None),
    ]
    assert all(e.key == "k" and e.pool == "default" for e in events)
    ats = [e.at for e in events]
    assert ats == sorted(ats)


async def test_transitions_for_timeout_and_dead_letter():
    async def run(ctx, p):
        if ctx.attempt == 1:
            await asyncio.sleep(30)
        raise ValueError("second failure")

    async with Scheduler([pool(executor=run)], emit_transitions=True) as s:
        stream = s.events()
        h = await s.submit(1, timeout=0.05, retry=RetryPolicy(max_attempts=2, initial_backoff=0))
        with pytest.raises(TaskFailed):
            await wait(h)
        events = await take(stream, 7)
    assert brief(events) == [
        (h.id, "blocked", 0, None),
        (h.id, "ready", 0, None),
        (h.id, "running", 1, None),
        (h.id, "retrying", 1, "attempt timed out"),
        (h.id, "ready", 1, None),
        (h.id, "running", 2, None),
        (h.id, "dead_lettered", 2, "ValueError: second failure"),
    ]


async def test_transitions_for_cancelled_ready_task(gate: Gate):
    async with Scheduler([pool(executor=gate)], emit_transitions=True) as s:
        await s.set_capacity("default", 0)
        stream = s.events()
        h = await s.submit("a")
        assert await s.cancel(h.id)
        events = await take(stream, 3)
    assert brief(events) == [
        (h.id, "blocked", 0, None),
        (h.id, "ready", 0, None),
        (h.id, "cancelled", 0, "cancelled"),
    ]


async def test_cancel_of_running_task_event(gate: Gate):
    async with Scheduler([pool(executor=gate)]) as s:
        stream = s.events()
        h = await s.submit("a")
        await wait(gate.started("a").wait())
        assert await s.cancel(h.id)
        (e,) = await take(stream, 1)
    assert (e.id, e.status, e.attempt, e.message) == (h.id, "cancelled", 1, "cancelled")


async def test_only_events_after_subscribing():
    async with Scheduler([pool()], emit_transitions=True) as s:
        first = await s.submit("a")
        await wait(first)
        stream = s.events()
        second = await s.submit("b")
        await wait(second)
        e = await nxt(stream)
    assert (e.id, e.status) == (second.id, "blocked")


async def test_each_subscriber_gets_every_event():
    async with Scheduler([pool()]) as s:
        s1 = s.events()
        h1 = await s.submit(1)
        await wait(h1)
        s2 = s.events()
        h2 = await s.submit(2)
        await wait(h2)
        assert [e.id for e in await take(s1, 2)] == [h1.id, h2.id]
        assert [e.id for e in await take(s2, 1)] == [h2.id]


async def test_lag_skip_drops_oldest_and_counts():
    async with Scheduler([pool()], event_capacity=2) as s:
        stream = s.events()
        hs = [await s.submit(i) for i in range(5)]
        await wait(asyncio.gather(*hs))
        assert stream.lagged == 3
        events = await take(stream, 2)
        assert [e.id for e in events] == [hs[3].id, hs[4].id]
        assert stream.lagged == 3
        h = await s.submit("more")
        await wait(h)
        assert (await nxt(stream)).id == h.id
        assert stream.lagged == 3


async def test_lag_raise_once_then_continues():
    async with Scheduler([pool()], event_capacity=2) as s:
        stream = s.events(on_lag="raise")
        hs = [await s.submit(i) for i in range(5)]
        await wait(asyncio.gather(*hs))
        with pytest.raises(EventsLagged) as ei:
            await nxt(stream)
        assert ei.value.skipped == 3
        assert stream.lagged == 3
        events = await take(stream, 2)
        assert [e.id for e in events] == [hs[3].id, hs[4].id]
        # no new lag: the next read is a plain event
        h = await s.submit("more")
        await wait(h)
        assert (await nxt(stream)).id == h.id
        # new lag is reported again, counting only the new drops
        hs2 = [await s.submit(i) for i in range(3)]
        await wait(asyncio.gather(*hs2))
        with pytest.raises(EventsLagged) as ei:
            await nxt(stream)
        assert ei.value.skipped == 1
        assert stream.lagged == 4
        assert [e.id for e in await take(stream, 2)] == [hs2[1].id, hs2[2].id]


async def test_invalid_on_lag():
    async with Scheduler([pool()]) as s:
        with pytest.raises(ValueError):
            s.events(on_lag="drop")
        with pytest.raises(ValueError):
            s.events("block")


async def test_default_event_capacity_is_1024():
    async with Scheduler([pool(max=50)]) as s:
        await s.set_capacity("default", 50)
        stream = s.events()
        hs = [await s.submit(i) for i in range(1030)]
        await wait(asyncio.gather(*hs))
        assert stream.lagged == 6


async def test_slow_subscriber_never_blocks_scheduler():
    async with Scheduler([pool()], event_capacity=4, emit_transitions=True) as s:
        stream = s.events()  # never read
        await s.set_capacity("default", 8)
        hs = [await s.submit(i) for i in range(100)]
        assert await wait(asyncio.gather(*hs)) == list(range(100))
        assert stream.lagged == 100 * 4 - 4  # blocked, ready, running, succeeded per task
        assert stream.closed is False


async def test_close_ends_iteration():
    async with Scheduler([pool()]) as s:
        stream = s.events()
        h = await s.submit(1)
        await wait(h)
        stream.close()
        assert stream.closed is True
        with pytest.raises(StopAsyncIteration):
            await nxt(stream)
        stream.close()  # idempotent
        # the scheduler is unaffected
        assert await wait(await s.submit(2)) == 2


async def test_aclose_ends_iteration():
    async with Scheduler([pool()]) as s:
        stream = s.events()
        await stream.aclose()
        assert stream.closed
        with pytest.raises(StopAsyncIteration):
            await nxt(stream)


async def test_close_wakes_a_waiting_reader():
    async with Scheduler([pool()]) as s:
        stream = s.events()
        got = []

        async def consume():
            async for e in stream:
                got.append(e)

        reader = asyncio.create_task(consume())
        await asyncio.sleep(0)
        assert not reader.done()
        stream.close()
        await wait(reader)
        assert got == []


async def test_async_with_stream_closes_on_exit():
    async with Scheduler([pool()]) as s:
        stream = s.events()
        async with stream as st:
            assert st is stream
            h = await s.submit(1)
            await wait(h)
            assert (await nxt(st)).id == h.id
        assert stream.closed
        with pytest.raises(StopAsyncIteration):
            await nxt(stream)


async def test_closing_one_stream_leaves_others():
    async with Scheduler([pool()]) as s:
        a = s.events()
        b = s.events()
        a.close()
        h = await s.submit(1)
        await wait(h)
        assert (await nxt(b)).id == h.id
        assert not b.closed


async def test_streams_end_at_shutdown():
    s = Scheduler([pool()])
    await s.start()
    stream = s.events()
    got: list[StatusEvent] = []
    first = asyncio.Event()

    async def consume():
        async for e in stream:
            got.append(e)
            first.set()

    reader = asyncio.create_task(consume())
    h = await s.submit(1)
    await wait(h)
    await wait(first.wait())
    await s.shutdown()
    await wait(reader)  # iteration ended
    assert stream.closed is True
    assert [e.id for e in got] == [h.id]
    with pytest.raises(StopAsyncIteration):
        await nxt(stream)


async def test_idle_stream_ends_at_shutdown():
    s = Scheduler([pool()])
    await s.start()
    stream = s.events()
    await s.shutdown()
    assert stream.closed
    with pytest.raises(StopAsyncIteration):
        await nxt(stream)


async def test_resubscribing_after_close_sees_new_events():
    async with Scheduler([pool()]) as s:
        s.events().close()
        stream = s.events()
        h = await s.submit(1)
        await wait(h)
        assert (await nxt(stream)).status == "succeeded"


# -- next_batch (one wake-up for everything buffered; the server's SSE fan-out) ------------------


async def test_next_batch_takes_everything_buffered_in_order():
    async with Scheduler([pool()]) as s:
        stream = s.events()
        hs = [await s.submit(i) for i in range(5)]
        await wait(asyncio.gather(*hs))
        batch = await wait(stream.next_batch(5.0))
        assert [e.id for e in batch] == [h.id for h in hs]
        # a later event is the next batch, alone
        h = await s.submit("more")
        await wait(h)
        assert [e.id for e in await wait(stream.next_batch())] == [h.id]


async def test_next_batch_waits_for_an_event():
    async with Scheduler([pool()]) as s:
        stream = s.events()
        reader = asyncio.ensure_future(stream.next_batch())
        await asyncio.sleep(0)
        assert not reader.done()
        h = await s.submit(1)
        await wait(h)
        assert [e.id for e in await wait(reader)] == [h.id]


async def test_next_batch_timeout_is_empty_and_stream_stays_open():
    async with Scheduler([pool()]) as s:
        stream = s.events()
        assert list(await wait(stream.next_batch(0.01))) == []
        assert not stream.closed
        h = await s.submit(1)
        await wait(h)
        assert [e.id for e in await wait(stream.next_batch(0.01))] == [h.id]


async def test_next_batch_lag_skip_and_raise():
    async with Scheduler([pool()], event_capacity=2) as s:
        skip = s.events()
        rais = s.events(on_lag="raise")
        hs = [await s.submit(i) for i in range(5)]
        await wait(asyncio.gather(*hs))
        assert [e.id for e in await wait(skip.next_batch())] == [hs[3].id, hs[4].id]
        assert skip.lagged == 3
        with pytest.raises(EventsLagged) as ei:
            await wait(rais.next_batch())
        assert ei.value.skipped == 3
        assert [e.id for e in await wait(rais.next_batch())] == [hs[3].id, hs[4].id]


async def test_next_batch_after_close_and_at_shutdown():
    s = Scheduler([pool()])
    await s.start()
    closed = s.events()
    ended = s.events()
    waiting = s.events()
    reader = asyncio.ensure_future(waiting.next_batch())
    h = await s.submit(1)
    await wait(h)
    assert [e.id for e in await wait(reader)] == [h.id]
    reader = asyncio.ensure_future(waiting.next_batch())
    await asyncio.sleep(0)
    closed.close()
    assert list(await wait(closed.next_batch())) == []
    await s.shutdown()
    # what was buffered is still read after shutdown, then empty batches on a closed stream
    assert list(await wait(reader)) == [] and waiting.closed
    assert [e.id for e in await wait(ended.next_batch())] == [h.id]
    assert list(await wait(ended.next_batch())) == [] and ended.closed
