"""``cronoq.testing.run``: the real Scheduler on virtual time, with autojump.

Theory of operation
-------------------
:func:`run` builds an ordinary :class:`~cronoq.Scheduler` — for an :class:`~cronoq.App`, the
app's own (its pools, recurring schedules and binding) — on a
:class:`~cronoq.testing.clock.VirtualClock`: the engine, executors, stores and events are the
real ones; only time is virtual. The scheduler's ``now`` and its wakeup timer come from the
clock (the runtime's clock seam); nothing in asyncio or ``time`` is patched.

The environment subscribes to every status transition (``emit_transitions``), which gives
:attr:`Environment.events` and the number of attempts running now.

**Idle** (:meth:`Environment.settle`) means: every running attempt is waiting on the virtual
clock (``ctx.sleep``, or awaiting another task's handle: the clock counts both among its
sleepers, ``VirtualClock.wait_on``), and neither the clock (timers armed,
cancelled, sleeps begun or ended) nor the event log changed for ``quiet_turns`` consecutive
loop turns. **Autojump**: a background task waits for idle, then moves time to the earliest
armed timer — the engine's next wakeup (a retry's backoff, a fixed start, a cron occurrence,
a timeout) or a virtual sleep — runs what is due, and waits for idle again. So a 10-minute
backoff or a month of a nightly schedule takes as long as the work it causes, not the time.

Limits (by design): time never moves while an attempt runs without waiting on the virtual
clock — busy in a thread, or awaiting real I/O (``asyncio.sleep``, a socket): such an attempt
holds time still until it finishes. Code outside attempts that awaits real I/O is not seen:
time may jump meanwhile. A real-time timeout in test code (``asyncio.wait_for``) is real time.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as _dt
import time
from collections.abc import AsyncIterator, Iterable
from typing import Any

from cronoq.engine.model import StatusEvent
from cronoq.engine.time import check_seconds, to_ns
from cronoq.runtime.events import EventStream
from cronoq.runtime.pool import Pool
from cronoq.runtime.scheduler import Scheduler
from cronoq.tasks.app import App
from cronoq.testing.clock import VirtualClock

__all__ = ["Environment", "run"]

#: loop turns without a change before the loop counts as idle
QUIET_TURNS = 5
#: busy turns (an attempt not waiting on the clock) before each check also yields real time
_SPIN_TURNS = 50
#: real seconds attempts may hold time still during ``advance`` before it raises TimeoutError
HOLD_TIMEOUT = 30.0
#: the options of the pools ``run(app)`` builds when given none: a fixed size, no autoscaler (it
#: evaluates every ``interval`` while anything is pending — a scheduled cron occurrence
#: included —, so a month of virtual time would be millions of evaluations)
FIXED_POOL: dict[str, Any] = {"min": 10, "max": 10, "autoscale": False}


class Environment:
    """A running scheduler on virtual time (what ``async with cronoq.testing.run(...)`` gives)."""

    def __init__(
        self,
        scheduler: Scheduler,
        clock: VirtualClock,
        quiet_turns: int = QUIET_TURNS,
        hold_timeout: float | None = HOLD_TIMEOUT,
    ) -> None:
        self.scheduler = scheduler
        self.clock = clock
        self._quiet_turns = quiet_turns
        self._hold_timeout = hold_timeout
        self._stream: EventStream | None = None
        self._events: list[StatusEvent] = []
        self._running: set[int] = set()
        self._advancing = 0
        self._jumper: asyncio.Task[None] | None = None
        self.jumps = 0  #: how many times autojump moved time

    # ---------------------------------------------------------------- state

    @property
    def now(self) -> _dt.datetime:
        """The current virtual instant (aware, UTC)."""
        return self.clock.now

    @property
    def events(self) -> list[StatusEvent]:
        """Every status transition so far, in order (a copy)."""
        self._drain()
        return list(self._events)

    @property
    def running(self) -> int:
        """Attempts running now (dispatched, not yet ended)."""
        self._drain()
        return len(self._running)

    def _drain(self) -> None:
        stream = self._stream
        if stream is None:
            return
        batch = stream.take()
        if not batch:
            return
        running = self._running
        for ev in batch:
            if ev.status == "running":
                running.add(ev.id)
            else:
                running.discard(ev.id)
        self._events.extend(batch)

    # ---------------------------------------------------------------- time

    def _idle_now(self) -> bool:
        return len(self._running) <= self.clock.sleepers

    async def settle(self, hold_timeout: float | None = None) -> None:
        """Return once the loop is idle (see the module docstring) without moving time.

        ``hold_timeout``: real seconds that attempts may hold time still (running without
        waiting on the virtual clock) before ``TimeoutError``; None waits as long as it takes.
        """
        quiet = 0
        busy_turns = 0
        busy_since = 0.0
        last: tuple[int, int] | None = None
        while True:
            self._drain()
            sig = (self.clock.version, len(self._events))
            if self._idle_now() and sig == last:
                quiet += 1
                if quiet >= self._quiet_turns:
                    return
            else:
                quiet = 0
                last = sig
            if self._idle_now():
                busy_turns = 0
                await asyncio.sleep(0)
            else:
                if busy_turns == 0:
                    busy_since = time.monotonic()
                elif hold_timeout is not None and time.monotonic() - busy_since > hold_timeout:
                    raise TimeoutError(
                        f"{len(self._running) - self.clock.sleepers} attempt(s) ran for {hold_timeout:g} s"
                        " of real time without waiting on the virtual clock, so time could not move (use "
                        "ctx.sleep(...) for waits in tasks; an attempt waiting on real I/O holds time still)"
                    )
                busy_turns += 1
                # an attempt busy for real (a thread, real I/O): let real time pass too
                await asyncio.sleep(0 if busy_turns < _SPIN_TURNS else 0.0005)

    async def advance(self, seconds: float) -> None:
        """Move virtual time ``seconds`` ahead, letting everything due on the way run at its
        own instant (settling after each); returns idle, at exactly now + ``seconds``."""
        target = self.clock.monotonic_ns() + to_ns(check_seconds("seconds", seconds))
        hold = self._hold_timeout
        self._advancing += 1
        try:
            await self.settle(hold)
            while (nxt := self.clock.next_deadline()) is not None and nxt <= target:
                self.clock.jump_to(nxt)
                await self.settle(hold)
            self.clock.jump_to(target)
            await self.settle(hold)
        finally:
            self._advancing -= 1

    async def sleep(self, seconds: float) -> None:
        """Let ``seconds`` of virtual time pass for the caller (autojump moves it)."""
        await self.clock.wait(seconds)

    async def _autojump(self) -> None:
        clock = self.clock
        while True:
            await self.settle()
            if self._advancing:
                await asyncio.sleep(0)
                continue
            nxt = clock.next_deadline()
            if nxt is None:
                await clock.armed()
                continue
            clock.jump_to(nxt)
            self.jumps += 1

    # ---------------------------------------------------------------- lifecycle

    async def _start(self, autojump: bool) -> None:
        await self.scheduler.start()
        self._stream = self.scheduler.events()
        if autojump:
            self._jumper = asyncio.get_running_loop().create_task(self._autojump(), name="cronoq-autojump")

    async def _stop(self, grace: float) -> None:
        jumper, self._jumper = self._jumper, None
        if jumper is not None:
            jumper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await jumper
        self._drain()
        await self.scheduler.shutdown(grace)

    def __repr__(self) -> str:
        n_events, n_running = len(self._events), len(self._running)
        return f"<Environment now={self.now.isoformat()} events={n_events} running={n_running}>"


@contextlib.asynccontextmanager
async def run(
    app_or_pools: App | Iterable[Pool] | Pool,
    *,
    autojump: bool = True,
    start: _dt.datetime | float | None = None,
    quiet_turns: int = QUIET_TURNS,
    hold_timeout: float | None = HOLD_TIMEOUT,
    shutdown_grace: float = 0.0,
    real_processes: bool = False,
    **options: Any,
) -> AsyncIterator[Environment]:
    """Run a real Scheduler on virtual time: ``async with cronoq.testing.run(app) as env:``.

    ``app_or_pools`` is an :class:`~cronoq.App` (its scheduler, with ``pools=`` among
    ``options`` if given; pools given by name, and by default the app's pools, are built at a
    fixed size of 10, see :data:`FIXED_POOL`) or pools for a plain Scheduler. ``start`` is the
    virtual wall-clock start (an aware datetime or Unix seconds; default: now). ``autojump``
    moves time to the next timer whenever everything is idle (see the module docstring); without
    it, only
    :meth:`Environment.advance` moves time; ``advance`` raises ``TimeoutError`` when attempts
    hold time still for ``hold_timeout`` real seconds (None: no limit). ``options`` are the
    Scheduler's (``store``, ``resources``, ...); every transition is published
    (``emit_transitions=True``). ``run_in="process"`` work runs in a thread (its arguments and
    result still pickled), so virtual time works; ``real_processes=True`` runs it in child
    processes, as in production (docs/how-to/processes.md#testing).
    """
    if isinstance(quiet_turns, bool) or not isinstance(quiet_turns, int) or quiet_turns < 1:
        raise ValueError(f"quiet_turns must be an int >= 1 (got {quiet_turns!r})")
    check_seconds("shutdown_grace", shutdown_grace)
    if hold_timeout is not None:
        check_seconds("hold_timeout", hold_timeout)
    if "clock" in options:
        raise ValueError("cronoq.testing.run brings its own clock (a VirtualClock); do not pass clock=")
    if options.pop("emit_transitions", True) is not True:
        raise ValueError("cronoq.testing.run publishes every transition (emit_transitions cannot be False)")
    clock = VirtualClock(start)
    options.setdefault("event_capacity", 1 << 20)
    if isinstance(app_or_pools, App):
        app = app_or_pools
        pools = options.pop("pools", None)
        if pools is None:  # the app's pools, at a fixed size (see FIXED_POOL)
            pools = [p.name for p in app.make_pools()]
        if isinstance(pools, (str, Pool)):
            pools = [pools]
        pools = [app.pool(p, **FIXED_POOL) if isinstance(p, str) else p for p in pools]
        sched: Scheduler = app.scheduler(pools, clock=clock, emit_transitions=True, **options)
    else:
        if "pools" in options:
            raise ValueError("give the pools either as the first argument or as pools=, not both")
        pools_list = [app_or_pools] if isinstance(app_or_pools, Pool) else list(app_or_pools)
        sched = Scheduler(pools_list, clock=clock, emit_transitions=True, **options)
    sched.seam.run_processes_in_threads(not real_processes)
    env = Environment(sched, clock, quiet_turns, hold_timeout)
    await env._start(autojump)
    try:
        yield env
    finally:
        await env._stop(shutdown_grace)
