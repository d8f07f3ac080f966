"""``VirtualClock``: a :class:`~cronoq.runtime.clock.Clock` whose time moves only when told.

Theory of operation
-------------------
Time is an integer count of nanoseconds (``monotonic_ns()``), starting at 0, plus a fixed Unix
anchor (``time_ns() = anchor + monotonic_ns()``; the anchor is the ``start`` given, or the real
time when the clock was made). Timers armed with :meth:`call_at` wait in a heap;
:meth:`jump_to` moves time forward and runs every timer that is due, earliest first (ties in
the order they were armed), each at its own instant: a callback sees
``monotonic_ns() == its when``.

:meth:`sleep` is what :meth:`cronoq.TaskContext.sleep` awaits: a timer plus a future, counted in
:attr:`sleepers` while it waits, so an environment can tell "every running attempt waits on
the clock" (time may jump) from "an attempt is busy or waits on something real" (it must not).
:meth:`wait` is the same without being counted (for test code, not attempts). :meth:`wait_on`
counts an attempt that awaits another task's handle the same way until the await ends: it
waits on the scheduler, and time must be free to move for the task it waits for (a retry's
backoff, a fixed start, a sleep).
:attr:`version` changes on every arm, cancel, sleep start and end: a cheap "did anything
happen" probe. Nothing here touches asyncio's or the OS's clocks.
"""

from __future__ import annotations

import asyncio
import datetime as _dt
import heapq
import logging
import time
from collections.abc import Callable
from functools import partial

from cronoq.engine.time import NS, check_seconds, to_ns

__all__ = ["VirtualClock"]

_log = logging.getLogger("cronoq.testing")

#: timers one jump may run at a single instant before it is taken for a runaway re-arm
_MAX_FIRES = 1_000_000


def _anchor_ns(start: _dt.datetime | float | None) -> int:
    if start is None:
        return time.time_ns()
    if isinstance(start, _dt.datetime):
        if start.tzinfo is None or start.utcoffset() is None:
            raise ValueError("start must be an aware datetime (e.g. tzinfo=datetime.UTC) or Unix seconds")
        epoch = _dt.datetime(1970, 1, 1, tzinfo=_dt.UTC)
        delta = start - epoch
        return (delta.days * 86_400 + delta.seconds) * NS + delta.microseconds * 1000
    if isinstance(start, bool) or not isinstance(start, (int, float)):
        raise ValueError(f"start must be an aware datetime or Unix seconds (got {start!r})")
    return round(start * NS)


class _Timer:
    __slots__ = ("callback", "cancelled", "clock", "when")

    def __init__(self, clock: VirtualClock, when: int, callback: Callable[[], object]) -> None:
        self.clock = clock
        self.when = when
        self.callback = callback
        self.cancelled = False

    def cancel(self) -> None:
        if not self.cancelled:
            self.cancelled = True
            self.clock.version += 1

    def __repr__(self) -> str:
        return f"<VirtualTimer at={self.when} {'cancelled' if self.cancelled else 'armed'}>"


def _wake(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)


class VirtualClock:
    """Virtual time for a Scheduler (see the module docstring)."""

    def __init__(self, start: _dt.datetime | float | None = None) -> None:
        self._anchor = _anchor_ns(start)
        self._now = 0
        self._heap: list[tuple[int, int, _Timer]] = []
        self._seq = 0
        #: attempts (callers of :meth:`sleep`) waiting on this clock right now
        self.sleepers = 0
        #: bumped by every arm, cancel, sleep start and end
        self.version = 0
        self._armed: asyncio.Future[None] | None = None

    # ---------------------------------------------------------------- the Clock protocol

    def monotonic_ns(self) -> int:
        return self._now

    def time_ns(self) -> int:
        return self._anchor + self._now

    def call_at(self, when_ns: int, callback: Callable[[], object]) -> _Timer:
        timer = _Timer(self, int(when_ns), callback)
        self._seq += 1
        heapq.heappush(self._heap, (timer.when, self._seq, timer))
        self.version += 1
        armed = self._armed
        if armed is not None and not armed.done():
            armed.set_result(None)
        return timer

    async def sleep(self, seconds: float) -> None:
        """Sleep ``seconds`` of virtual time, counted as an attempt waiting on the clock."""
        self.sleepers += 1
        self.version += 1
        try:
            await self.wait(seconds)
        finally:
            self.sleepers -= 1
            self.version += 1

    def wait_on(self, fut: asyncio.Future[object]) -> None:
        """Count the running attempt awaiting ``fut`` (another task's outcome) among the
        :attr:`sleepers` until ``fut`` is done."""
        self.sleepers += 1
        self.version += 1
        fut.add_done_callback(self._woken)

    def _woken(self, fut: asyncio.Future[object]) -> None:
        self.sleepers -= 1
        self.version += 1

    # ---------------------------------------------------------------- control

    async def wait(self, seconds: float) -> None:
        """Sleep ``seconds`` of virtual time (not counted in :attr:`sleepers`)."""
        delay = to_ns(check_seconds("seconds", seconds))
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        timer = self.call_at(self._now + delay, partial(_wake, fut))
        try:
            await fut
        finally:
            timer.cancel()

    @property
    def now(self) -> _dt.datetime:
        """The current virtual instant as an aware UTC datetime."""
        ns = self.time_ns()
        return _dt.datetime(1970, 1, 1, tzinfo=_dt.UTC) + _dt.timedelta(microseconds=ns // 1000)

    def next_deadline(self) -> int | None:
        """When the earliest armed timer is due (``monotonic_ns`` units), or None."""
        heap = self._heap
        while heap and heap[0][2].cancelled:
            heapq.heappop(heap)
        return heap[0][0] if heap else None

    def jump_to(self, when_ns: int) -> int:
        """Move time to ``when_ns`` (never backwards), running the timers due on the way, each
        at its own instant; returns how many ran."""
        target = max(int(when_ns), self._now)
        heap = self._heap
        fired = 0
        while heap and heap[0][0] <= target:
            when, _, timer = heapq.heappop(heap)
            if timer.cancelled:
                continue
            self._now = max(self._now, when)
            timer.cancelled = True  # (ran: a late cancel() is a no-op)
            self.version += 1
            fired += 1
            if fired > _MAX_FIRES:
                raise RuntimeError("virtual clock: a timer keeps re-arming itself at the same instant")
            try:
                timer.callback()
            except Exception:
                _log.exception("virtual clock timer callback %r failed", timer.callback)
        self._now = target
        return fired

    def advance(self, seconds: float) -> int:
        """:meth:`jump_to` ``seconds`` from now (synchronously; see also ``Environment.advance``)."""
        return self.jump_to(self._now + to_ns(check_seconds("seconds", seconds)))

    async def armed(self) -> None:
        """Return once a timer is armed (at once if one is)."""
        if self.next_deadline() is not None:
            return
        fut = self._armed
        if fut is None or fut.done():
            fut = self._armed = asyncio.get_running_loop().create_future()
        await asyncio.shield(fut)

    def __repr__(self) -> str:
        return f"<VirtualClock now={self.now.isoformat()} timers={len(self._heap)} sleepers={self.sleepers}>"
