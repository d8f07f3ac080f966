"""VirtualClock: timers, jumps, sleeps and its Clock protocol (cronoq.testing.clock)."""

from __future__ import annotations

import asyncio
import datetime as dt

import pytest

from cronoq.runtime.clock import LOOP_CLOCK, Clock
from cronoq.testing import VirtualClock

START = dt.datetime(2026, 3, 1, 12, 0, tzinfo=dt.UTC)


def test_time_starts_at_the_anchor_and_only_moves_when_told() -> None:
    c = VirtualClock(START)
    assert isinstance(c, Clock) and isinstance(LOOP_CLOCK, Clock)
    assert c.monotonic_ns() == 0 and c.now == START
    assert c.time_ns() == int(START.timestamp()) * 10**9
    c.advance(1.5)
    assert c.monotonic_ns() == 1_500_000_000
    assert c.now == START + dt.timedelta(seconds=1.5)
    c.jump_to(0)  # never backwards
    assert c.monotonic_ns() == 1_500_000_000
    assert VirtualClock(1_000.25).time_ns() == 1_000_250_000_000
    with pytest.raises(ValueError, match="aware datetime"):
        VirtualClock(dt.datetime(2026, 1, 1))
    with pytest.raises(ValueError, match="aware datetime or Unix seconds"):
        VirtualClock("tomorrow")  # type: ignore[arg-type]


def test_timers_run_in_order_each_at_its_own_instant() -> None:
    c = VirtualClock(START)
    seen: list[tuple[str, int]] = []
    c.call_at(30, lambda: seen.append(("b", c.monotonic_ns())))
    c.call_at(10, lambda: seen.append(("a", c.monotonic_ns())))
    c.call_at(30, lambda: seen.append(("c", c.monotonic_ns())))
    dropped = c.call_at(20, lambda: seen.append(("x", c.monotonic_ns())))
    dropped.cancel()
    assert c.next_deadline() == 10
    assert c.jump_to(25) == 1
    assert seen == [("a", 10)] and c.monotonic_ns() == 25
    assert c.jump_to(100) == 2
    assert seen == [("a", 10), ("b", 30), ("c", 30)]
    assert c.next_deadline() is None


def test_a_failing_timer_callback_is_logged_not_raised(caplog: pytest.LogCaptureFixture) -> None:
    c = VirtualClock(START)
    c.call_at(1, lambda: 1 / 0)
    ran: list[int] = []
    c.call_at(2, lambda: ran.append(1))
    c.jump_to(5)
    assert ran == [1]
    assert "virtual clock timer callback" in caplog.text


async def test_sleep_counts_sleepers_and_wakes_on_the_jump() -> None:
    c = VirtualClock(START)
    t = asyncio.ensure_future(c.sleep(60))
    w = asyncio.ensure_future(c.wait(30))
    await asyncio.sleep(0)
    assert c.sleepers == 1 and not t.done()
    c.jump_to(c.next_deadline())  # type: ignore[arg-type]
    await asyncio.sleep(0)
    assert w.done() and not t.done() and c.monotonic_ns() == 30 * 10**9
    c.advance(30)
    await t
    assert c.sleepers == 0 and c.next_deadline() is None
    with pytest.raises(ValueError):
        await c.sleep(-1)


async def test_armed_returns_once_a_timer_exists() -> None:
    c = VirtualClock(START)
    waiter = asyncio.ensure_future(c.armed())
    await asyncio.sleep(0)
    assert not waiter.done()
    c.call_at(5, lambda: None)
    await asyncio.wait_for(waiter, 5)
    await asyncio.wait_for(c.armed(), 5)  # at once: one is armed
