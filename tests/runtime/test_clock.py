"""The Scheduler's clock seam (cronoq.runtime.clock): default, validation, ctx.sleep."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from cronoq import Pool, Scheduler
from cronoq.runtime.clock import LOOP_CLOCK, Clock, LoopClock
from cronoq.testing import VirtualClock


async def test_the_default_clock_is_the_loop_clock_and_ctx_sleep_uses_it() -> None:
    async def nap(ctx: Any, payload: Any) -> str:
        await ctx.sleep(0.001)
        return "rested"

    sched = Scheduler([Pool("p", nap)])
    assert sched.clock is LOOP_CLOCK and isinstance(LOOP_CLOCK, LoopClock) and isinstance(LOOP_CLOCK, Clock)
    async with sched:
        assert await asyncio.wait_for(await sched.submit(None), 10) == "rested"
    assert repr(LOOP_CLOCK) == "LoopClock()"


def test_a_clock_must_have_the_protocol() -> None:
    with pytest.raises(ValueError, match="clock must implement the cronoq Clock protocol"):
        Scheduler([Pool("p", lambda ctx, p: None)], clock=object())


async def test_the_engine_time_and_timer_come_from_the_clock() -> None:
    clock = VirtualClock(1_000_000.0)
    ran: list[float] = []

    async def note(ctx: Any, payload: Any) -> None:
        ran.append(clock.time_ns() / 1e9)

    async with Scheduler([Pool("p", note, min=1, max=1, autoscale=False)], clock=clock) as sched:
        assert sched.clock is clock
        h = await sched.submit(None, start_in=30)
        await asyncio.wait_for(clock.armed(), 10)  # the wakeup timer is armed on the clock
        assert 0 < clock.next_deadline() <= 30 * 10**9  # type: ignore[operator]
        clock.advance(30)
        await asyncio.wait_for(h, 10)
    assert ran == [1_000_030.0]
