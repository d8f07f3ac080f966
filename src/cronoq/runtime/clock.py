"""``Clock``: where the runtime gets its time and arms its timers.

Theory of operation
-------------------
The engine never reads a clock: the :class:`~cronoq.Scheduler` passes it ``now`` (integer
nanoseconds since ``start()``) on every call and arms one timer for the engine's next wakeup.
A clock is the one place both come from, so a scheduler can run on another notion of time by
being given another clock: ``Scheduler(pools, clock=...)``.

* ``monotonic_ns()`` — the scheduler's time source (differences only);
* ``time_ns()`` — Unix nanoseconds, read once at ``start()`` to anchor wall-clock instants
  (fixed starts, deadlines, cron occurrences);
* ``call_at(when_ns, callback)`` — run ``callback()`` on the scheduler's loop once
  ``monotonic_ns() >= when_ns``; returns something with ``cancel()``;
* ``sleep(seconds)`` — what :meth:`cronoq.TaskContext.sleep` awaits;
* optionally ``wait_on(future)`` — told when a running attempt awaits another task's handle
  (``future`` settles when that await ends): a virtual clock counts such an attempt as waiting,
  like a sleeping one, so time may move for the task it waits for. The real clock has none.

:class:`LoopClock` (the default) is the real thing: ``time.monotonic_ns`` (the clock asyncio's
default loop runs on), ``time.time_ns``, ``loop.call_at`` and ``asyncio.sleep``.
``cronoq.testing`` has a virtual clock that only moves when told to (or when everything is idle).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Protocol, runtime_checkable

from cronoq.engine.time import NS

__all__ = ["LOOP_CLOCK", "Clock", "LoopClock", "TimerHandle"]


class TimerHandle(Protocol):
    """A timer armed by :meth:`Clock.call_at`."""

    def cancel(self) -> None: ...


@runtime_checkable
class Clock(Protocol):
    """Time for a :class:`~cronoq.Scheduler` (see the module docstring)."""

    def monotonic_ns(self) -> int: ...

    def time_ns(self) -> int: ...

    def call_at(self, when_ns: int, callback: Callable[[], object]) -> TimerHandle: ...

    async def sleep(self, seconds: float) -> None: ...


class LoopClock:
    """Real time: ``time.monotonic_ns`` / ``time.time_ns``, timers on the running loop."""

    __slots__ = ()

    monotonic_ns = staticmethod(time.monotonic_ns)
    time_ns = staticmethod(time.time_ns)

    def call_at(self, when_ns: int, callback: Callable[[], object]) -> TimerHandle:
        # asyncio's default loop measures time with time.monotonic(): the same clock
        return asyncio.get_running_loop().call_at(when_ns / NS, callback)

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)

    def __repr__(self) -> str:
        return "LoopClock()"


#: the default clock of every Scheduler
LOOP_CLOCK = LoopClock()
