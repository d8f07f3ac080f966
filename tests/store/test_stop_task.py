"""``base.stop_task``: a store's background task (lease keeper, renewer) is stopped for good even
when it drops a cancellation, so a shutdown never hangs on it.

On Python 3.11 ``asyncio.wait_for`` returns its awaitable's result and drops the cancellation
when the cancel arrives as that awaitable finishes; a keeper pinging the database in a loop
then goes on (a PostgreSQL standby that took over hung at shutdown this way in CI).  The
tests bound each stop with ``asyncio.timeout``: on the old one-cancel ``stop_task`` they fail
instead of hanging.
"""

from __future__ import annotations

import asyncio

import pytest

from cronoq.store.base import stop_task


async def test_a_task_that_drops_a_cancel_is_cancelled_again() -> None:
    dropped = 0

    async def keeper() -> None:
        nonlocal dropped
        while True:
            try:
                await asyncio.sleep(3600)
            except asyncio.CancelledError:
                if dropped:
                    raise
                dropped += 1  # the first cancel is lost, as in the race above

    task = asyncio.create_task(keeper())
    await asyncio.sleep(0)
    stopping = asyncio.create_task(stop_task(task, again=0.01))
    await asyncio.wait([stopping], timeout=5)
    assert stopping.done(), "stop_task did not end: the task dropped the only cancel"
    assert task.cancelled() and dropped == 1


async def test_a_loop_of_wait_for_pings_stops() -> None:
    """The real race (Python 3.11; later versions do not drop the cancel, and pass either way)."""
    loop = asyncio.get_running_loop()
    pings: list[asyncio.Future[int]] = []
    asked = asyncio.Event()

    async def keeper() -> None:
        while True:
            ping = loop.create_future()
            pings.append(ping)
            asked.set()
            await asyncio.wait_for(ping, 10)
            await asyncio.sleep(0)

    async def stop_as_answered() -> None:
        pings[-1].set_result(1)  # the ping's answer and stop_task's cancel in one loop turn
        await stop_task(task, again=0.01)

    task = asyncio.create_task(keeper())
    await asyncio.wait_for(asked.wait(), 5)
    stopping = asyncio.create_task(stop_as_answered())
    await asyncio.wait([stopping], timeout=5)
    assert stopping.done() and task.cancelled(), "stop_task did not end: the keeper went on pinging"


async def test_an_error_the_task_ends_with_is_raised() -> None:
    async def broken() -> None:
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            raise RuntimeError("boom") from None

    task = asyncio.create_task(broken())
    await asyncio.sleep(0)
    with pytest.raises(RuntimeError, match="boom"):
        await stop_task(task, again=0.01)


async def test_nothing_to_stop() -> None:
    await stop_task(None)
    done = asyncio.create_task(asyncio.sleep(0))
    await done
    await stop_task(done)
