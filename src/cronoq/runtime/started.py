"""``Started``: a :class:`~cronoq.runtime.scheduler.Scheduler` between ``start()`` and
``shutdown()``: its engine, loop, timer and running attempts, the driver and the attempt runner.

Theory of operation
-------------------
``Scheduler.start()`` makes one ``Started`` and ``shutdown()`` drops it, so everything here
exists exactly while the scheduler runs: no field is None "because not started yet".  The
scheduler's public calls find it through ``Scheduler._started()`` (``NotStartedError`` when
there is none) and use it; a callback that outlives it (a thread's late outcome, a timer, a
scaler) finds ``live`` False and does nothing.

The driver: public calls change the core synchronously and then :meth:`Started.kick` it: one
coalesced ``call_soon`` per loop turn.  :meth:`Started.drive` ticks the core (timers + dispatch
decisions for everything submitted this turn), carries out the resulting actions
(:meth:`Started.apply`) and arms a single ``clock.call_at`` timer for ``core.next_wakeup()``.
There are no per-task timers.

The attempt runner: a ``Dispatch`` starts an attempt by its pool's executor kind
(:class:`~cronoq.runtime.executors.ExecutorKind`), one dispatch in :meth:`Started.start_attempt`:

* ``LOOP``: one ``loop.create_task`` of the small runner coroutine :meth:`Started.attempt` (on
  asyncio's own loop with no task factory, ``asyncio.Task`` directly: all that method does) that
  awaits the executor and reports the outcome itself when it returns (no done callback, no extra
  loop turn).  If it was the last attempt running, it does not kick the driver: it creates a
  *slot task* (:meth:`Started.fill_slot`, in a fresh copy of start()'s context) that does the
  driver's work at its first step and then runs the first attempt that work dispatches to an
  async executor itself, as its own task: one loop turn per attempt for one slot working a
  queue (the driver would make the task a turn later, and the task run a turn after that),
  while whatever the turn after the end submitted is still weighed (a burst of High submitted
  as a Low ends goes first).  With other attempts still running it kicks the driver, whose
  turn they share.  Either way an attempt's task carries that attempt only.  An abort
  (timeout, cancel, lease loss, shutdown) marks ``ctx`` cancelled, drops the lease from
  ``running`` and cancels that task; the runner then reports nothing.  A ``CancelledError`` the
  executor raises on its own (``ctx`` not marked) is a retryable failure, and so is any other
  ``BaseException`` but ``KeyboardInterrupt`` (``SystemExit`` from ``sys.exit()``: the
  attempt's failure, never the loop's end; a ``GeneratorExit`` only when the executor raised
  it, not when this coroutine is being closed, :func:`~cronoq.errors.closing`);
* ``STARTING``, ``PROCESS``: ``start_attempt`` begins the attempt and returns its future,
  watched by :meth:`Started.on_done` like a thread's (an abort cancels it): no task of its own;
* ``REMOTE``: ``begin(ctx, payload)`` hands the attempt on; its outcome comes back as calls on
  ``ctx`` (:meth:`Started.report`), values, never an exception on a future; an abort calls the
  ``ctx.on_abort`` the executor set;
* every attempt (``LOOP`` task, ``THREAD`` call) runs in a fresh copy of the context ``start()``
  ran in: a context variable an attempt sets never reaches another attempt;
* ``THREAD``: the loop's default thread pool; the future has one ``add_done_callback``
  (:meth:`Started.on_done`) that reports the outcome (any ``BaseException`` but
  ``KeyboardInterrupt`` is a failure, as above), or, if the function returned an awaitable,
  awaits that under the same lease in a runner task as ``LOOP``'s.  A thread cannot be
  interrupted: an abort marks ``ctx`` and leaves the future alone (a function not yet picked up
  by a pool thread is then skipped), so its late outcome still reaches ``on_done``;
* an executor that reports after the engine aborted its attempt made a report for a lease that
  is no longer current: it is ignored and counted (``stale_completions``,
  docs/reference/behaviour.md#reliability), unless the scheduler shut down (or restarted) since.

Everything runs on the loop that called ``start()``; the core is never touched from another
thread (``ctx.heartbeat()`` from an executor thread is marshalled onto the loop).
"""

from __future__ import annotations

import asyncio
import contextvars
import inspect
import logging
import threading
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Any

from cronoq import otel as _otel
from cronoq.engine.actions import Abort, Dispatch, Persist, Publish, Resolve, Scale, SpaceAvailable
from cronoq.engine.model import FIRST_TERMINAL
from cronoq.engine.pools import Kinds
from cronoq.engine.progress import PublishProgress
from cronoq.engine.time import to_ns
from cronoq.errors import Fenced, SchedulerError, TaskFailed, closing, outcome_of
from cronoq.runtime.clock import TimerHandle
from cronoq.runtime.context import TaskContext
from cronoq.runtime.executors import ExecutorKind
from cronoq.runtime.handles import TaskHandle, set_outcome
from cronoq.runtime.scalers import Scaler, SlotScaler
from cronoq.runtime.submit_payloads import encode_payload

if TYPE_CHECKING:
    from cronoq.engine.core import Core
    from cronoq.engine.model import TaskOptions, TaskState
    from cronoq.runtime.durable import Committer
    from cronoq.runtime.pool import Executor
    from cronoq.runtime.scheduler import Scheduler

__all__ = ["SHUTDOWN_MESSAGE", "Started"]

SHUTDOWN_MESSAGE = "scheduler shut down"
_log = logging.getLogger("cronoq")

#: what a plain function's thread returns when its attempt was aborted before the thread began
_SKIPPED = object()

_LOOP, _THREAD, _REMOTE = ExecutorKind.LOOP, ExecutorKind.THREAD, ExecutorKind.REMOTE


def _run_in_thread(executor: Executor, ctx: TaskContext, payload: object) -> Any:
    """Run a plain executor in a pool thread, unless its attempt was aborted meanwhile."""
    if ctx._cancelled:
        return _SKIPPED
    return executor(ctx, payload)


def _awaited(aw: Any, ctx: TaskContext, payload: object) -> Any:
    """The executor :meth:`Started.attempt` runs for the awaitable ``aw`` a plain function
    returned: awaiting it is the rest of that attempt."""
    return aw


def _close(aw: Any, _task: object = None) -> None:
    """Close ``aw`` if it is a coroutine (a no-op once it ran to its end)."""
    if inspect.iscoroutine(aw):
        aw.close()


class Started:
    """A started scheduler's state, driver and attempt runner (see the module docstring)."""

    __slots__ = (
        "accepting",
        "adopt",
        "adopted",
        "awaiting",
        "committer",
        "context",
        "core",
        "ending",
        "fenced",
        "kick_pending",
        "live",
        "loop",
        "loop_thread",
        "mono",
        "otel_probe",
        "pools",
        "pstreams",
        "running",
        "sched",
        "scaling",
        "space",
        "streams",
        "t0",
        "task_class",
        "time_base",
        "timer",
        "timer_at",
        "wait_on",
        "waiters",
    )

    def __init__(
        self, sched: Scheduler, core: Core, t0: int, time_base: int, committer: Committer | None
    ) -> None:
        self.sched = sched
        self.core = core
        self.loop = asyncio.get_running_loop()
        #: asyncio's Task when the loop's create_task is asyncio's own, which with no task factory
        #: is just that call (an attempt's task is made without its wrapper); else None
        self.task_class: type[asyncio.Task[Any]] | None = (
            asyncio.Task if type(self.loop).create_task is asyncio.BaseEventLoop.create_task else None
        )
        self.loop_thread = threading.get_ident()
        #: the context ``start()`` ran in: each attempt runs in a copy of it, so a context
        #: variable one attempt sets is never seen by the next (the driver, kicked from inside
        #: an attempt, would otherwise hand that attempt's context on to the tasks it starts)
        self.context = contextvars.copy_context()
        self.mono = sched.clock.monotonic_ns
        #: the clock's ``wait_on`` (a virtual clock's: runtime/clock.py), else None
        self.wait_on: Callable[[asyncio.Future[Any]], object] | None = getattr(sched.clock, "wait_on", None)
        self.t0 = t0
        self.time_base = time_base
        #: the durable store's group committer (None: no store)
        self.committer = committer
        self.fenced: BaseException | None = None
        self.live = True  # False once shut down: late callbacks do nothing
        self.accepting = False
        self.kick_pending = False
        self.timer: TimerHandle | None = None
        self.timer_at = -1
        self.pools = sched._pools
        self.otel_probe = sched._otel_probe  # (None without OpenTelemetry: one test per attempt)
        self.streams = sched._streams
        self.pstreams = sched._pstreams
        #: lease -> (what an abort cancels: a task or future; None for a remote attempt, ctx)
        self.running: dict[int, tuple[asyncio.Future[Any] | None, TaskContext]] = {}
        self.waiters: dict[int, asyncio.Future[Any]] = {}
        # a task ending resolves only a waiter registered before (handle_for settles a handle
        # of an ended task at once): the engine skips the Resolve of the rest
        core.resolve_for = self.waiters
        #: task id -> the futures of ``await handle`` calls waiting for it (:meth:`wait_for`)
        self.awaiting: dict[int, list[asyncio.Future[Any]]] = {}
        self.space: dict[str, asyncio.Future[None]] = {}
        self.scaling: dict[str, asyncio.Task[None]] = {}
        #: lease -> a future shutdown waits on for a remote attempt's end (made by drain)
        self.ending: dict[int, asyncio.Future[None]] = {}
        #: while a slot task ticks (:meth:`fill_slot`): that task, which runs the first attempt the
        #: tick dispatches to an async executor itself, and that attempt once dispatched
        self.adopt: asyncio.Task[None] | None = None
        self.adopted: tuple[int, TaskContext, Executor, object] | None = None

    # ------------------------------------------------------------------ driver

    def now(self) -> int:
        return self.mono() - self.t0

    def kick(self) -> None:
        if not self.kick_pending:
            self.kick_pending = True
            self.loop.call_soon(self.drive)

    def drive(self) -> None:
        self.kick_pending = False
        if not self.live:
            return
        core = self.core
        core.tick(self.now())
        if core.actions:
            self.apply()
        self.arm()

    def next_in_slot(self) -> None:
        """The last running attempt ended: make the task its slot's next attempt will run in, in
        a fresh copy of start()'s context (instead of kicking the driver, which would make that
        task a turn later): :meth:`attempt` without an attempt, which :meth:`fill_slot` finds."""
        loop = self.loop
        if loop.get_task_factory() is not None:
            # (an eager factory would run the slot inside the ending attempt, and so on down)
            return self.kick()
        coro = self.attempt(0, None, None, None)
        try:
            if (task_class := self.task_class) is not None:
                task_class(coro, loop=loop, context=self.context.copy())
            else:
                loop.create_task(coro, context=self.context.copy())
        except Exception:
            coro.close()
            self.kick()

    def fill_slot(self) -> tuple[int, TaskContext, Executor, object] | None:
        """A slot task's first step (:meth:`attempt` without an attempt yet): the driver's work
        (tick, actions, timer), in the turn after the attempt before it ended, so whatever that
        turn submitted is weighed; returns the first attempt that work dispatched to an async
        executor, which then runs in this task (None: none, or already aborted)."""
        if not self.live:
            return None
        self.adopt = asyncio.current_task(self.loop)
        try:
            core = self.core
            core.tick(self.mono() - self.t0)
            if core.actions:
                self.apply()
            self.arm()
        finally:
            self.adopt = None
        job = self.adopted
        if job is None:
            return None
        self.adopted = None
        return None if job[1]._cancelled else job  # (aborted by an action of the same tick)

    def arm(self) -> None:
        timer = self.timer
        if timer is None and not self.core.timers.heap:
            return  # (no timer armed and none due: next_wakeup() would be None)
        w = self.core.next_wakeup()
        if w is None:
            if timer is not None:
                timer.cancel()
                self.timer = None
                self.timer_at = -1
            return
        if w == self.timer_at and timer is not None:
            return
        if timer is not None:
            timer.cancel()
        self.timer_at = w
        self.timer = self.sched.clock.call_at(self.t0 + w, self.on_timer)

    def on_timer(self) -> None:
        self.timer = None
        self.timer_at = -1
        self.drive()

    def apply(self) -> None:
        """Carry out the core's pending actions (and any they cause), in order."""
        core = self.core
        persist: list[Any] = []
        while core.actions:
            actions = core.actions
            core.actions = []
            for a in actions:
                tp = type(a)
                if tp is Dispatch:
                    self.start_attempt(a.task, a.lease)
                elif tp is Persist:
                    persist.append(a.mutation)
                elif tp is Resolve:
                    tid = a.task.id
                    fut = self.waiters.pop(tid, None)
                    if fut is not None:
                        set_outcome(fut, a.task)
                        if self.awaiting:
                            for w in self.awaiting.pop(tid, ()):
                                set_outcome(w, a.task)
                elif tp is Publish:
                    for s in self.streams:
                        s._push(a.event)
                elif tp is Abort:
                    entry = self.running.pop(a.lease, None)
                    if entry is not None:
                        self.abort(entry[0], entry[1], a.reason)
                elif tp is PublishProgress:
                    for ps in self.pstreams:
                        ps._push(a.event)
                elif tp is SpaceAvailable:
                    sf = self.space.pop(a.pool, None)
                    if sf is not None and not sf.done():
                        sf.set_result(None)
                elif tp is Scale:
                    self.scale(a.pool, a.desired)
        if persist and self.committer is not None:
            self.committer.add(persist)

    def settle(self) -> None:
        """Carry out actions a control call produced and let the driver re-arm."""
        if self.core.actions:
            self.apply()
        self.kick()

    async def durable(self) -> None:
        """Acknowledge only after this step's mutations are committed (group commit)."""
        if self.core.actions:
            self.apply()
        committer = self.committer
        if committer is not None:
            await committer.barrier()

    async def done(self) -> None:
        """A control call's end: carry out its actions; with a store, once committed."""
        self.settle()
        if self.committer is not None:
            await self.durable()

    # ------------------------------------------------------------------ attempts

    def start_attempt(self, t: TaskState, lease: int) -> None:
        """Begin the attempt ``lease`` of ``t`` by its pool's executor kind (module docstring)."""
        pool = self.pools[t.opts.pool_index]
        ctx = TaskContext(self, t, lease)
        executor = pool.executor
        kind = pool.kind
        if self.otel_probe is not None and (
            self.sched._otel_all or ((tags := t.opts.tags) is not None and _otel.TRACEPARENT in tags)
        ):  # the attempt runs in a span continuing the submitter's (cronoq.otel)
            executor = _otel.traced_executor(executor, ctx, pool.is_async, self.sched._otel_tracer)
            kind = _LOOP if pool.is_async else _THREAD
        if kind is _LOOP:
            # The executor is called inside attempt(), which reports the outcome itself when it
            # returns: no done callback, no extra loop turn.  If this task is cancelled before
            # its first step the executor is never called (no coroutine is left unawaited).
            slot = self.adopt
            if slot is not None:  # the slot task ticking runs it (fill_slot)
                self.adopt = None
                self.adopted = (lease, ctx, executor, t.payload)
                self.running[lease] = (slot, ctx)
                return
            coro = self.attempt(lease, ctx, executor, t.payload)
            try:
                loop = self.loop
                if (task_class := self.task_class) is not None and loop.get_task_factory() is None:
                    task = task_class(coro, loop=loop, context=self.context.copy())
                else:
                    task = loop.create_task(coro, context=self.context.copy())
            except Exception as exc:
                coro.close()
                return self.not_started(lease, ctx, exc)
            if not ctx._ended:  # (an eager task factory may already have finished it)
                self.running[lease] = (task, ctx)
            return
        if kind is _THREAD:
            try:
                run = self.context.copy().run  # (a pool thread keeps no context of its own)
                fut = self.loop.run_in_executor(None, run, _run_in_thread, executor, ctx, t.payload)
            except Exception as exc:  # the executor could not even be started
                return self.not_started(lease, ctx, exc)
            ctx._in_thread = True
            self.running[lease] = (fut, ctx)
            fut.add_done_callback(partial(self.on_done, lease, ctx))
            return
        if kind is _REMOTE:
            self.running[lease] = (None, ctx)
            try:
                executor.begin(ctx, t.payload)  # type: ignore[attr-defined]
            except Exception as exc:
                self.running.pop(lease, None)
                return self.not_started(lease, ctx, exc)
            return
        try:  # STARTING, PROCESS
            fut = executor.start_attempt(ctx, t.payload)  # type: ignore[attr-defined]
        except Exception as exc:
            return self.not_started(lease, ctx, exc)
        self.running[lease] = (fut, ctx)
        fut.add_done_callback(partial(self.on_done, lease, ctx, output=True))

    def abort(self, fut: asyncio.Future[Any] | None, ctx: TaskContext, reason: str | None) -> None:
        """The engine aborted ``ctx``'s attempt (its lease is already out of ``running``)."""
        ctx._cancelled = True
        ctx._ended = True
        ctx.abort_reason = reason
        # a later report from it is stale (docs/reference/behaviour.md#reliability)
        ctx._aborted_by = self.core
        if fut is None:  # a remote attempt: its executor tells whoever runs it
            if ctx.on_abort is not None:
                ctx.on_abort()
        elif not ctx._in_thread:
            fut.cancel()
        # else: a thread cannot be interrupted; its outcome, when it comes, is a stale report
        # (on_done), and one not yet started is skipped

    def not_started(self, lease: int, ctx: TaskContext, exc: Exception) -> None:
        """The executor could not even start the attempt: it failed (``outcome_of``), and a
        retry due at once is dispatched on the next turn."""
        ctx._ended = True
        self.fail_attempt(lease, exc)
        self.kick()

    async def attempt(
        self, lease: int, ctx: TaskContext | None, executor: Executor | None, payload: object
    ) -> None:
        """Run one attempt of an async executor and report its outcome
        (docs/reference/behaviour.md#reliability).

        An abort by the engine (timeout, cancel, lease loss) or by shutdown sets
        ``ctx._cancelled`` *before* cancelling this task, and such an attempt reports nothing
        (an executor that swallows the cancellation and returns or raises anyway made a stale
        report: counted after an engine abort); a ``CancelledError`` the executor raises on
        its own (``ctx._cancelled`` still False) is a retryable failure.

        Without ``ctx`` this is a slot task (:meth:`next_in_slot`): :meth:`fill_slot` first.
        """
        if ctx is None or executor is None:
            job = self.fill_slot()
            if job is None:
                return
            lease, ctx, executor, payload = job
        try:
            result = await executor(ctx, payload)
        except asyncio.CancelledError as exc:
            if ctx._cancelled:
                raise  # our abort: the lease is gone, report nothing; end as cancelled
            self.report_error(lease, ctx, exc)
        except KeyboardInterrupt:
            raise  # the operator's Ctrl-C stops the process, as anywhere else
        except BaseException as exc:  # SystemExit too: the attempt's failure, not the scheduler's
            if isinstance(exc, GeneratorExit) and closing(inspect.currentframe()):
                raise  # this coroutine is being closed (its task destroyed): unwind, report nothing
            if ctx._cancelled:
                self.late_report(ctx)
            else:
                self.report_error(lease, ctx, exc)
        else:
            if ctx._cancelled:
                self.late_report(ctx)
            else:
                self.running.pop(lease, None)
                ctx._ended = True
                if self.live:
                    core = self.core
                    core.complete(self.mono() - self.t0, lease, result)
                    if core.running:
                        self.kick()  # the driver's turn is shared with the attempts still running
                    else:
                        self.next_in_slot()  # the last one: its slot's next attempt, a turn sooner

    def report(
        self, ctx: TaskContext, output: object = None, failure: tuple[str, bool, float | None] | None = None
    ) -> bool:
        """An outcome reported as a value on ``ctx`` (``ctx.complete`` / ``ctx.fail``): the output,
        or ``(message, permanent, retry_after seconds)``.  False when the attempt had already
        ended (aborted, parked or reported)."""
        if ctx._ended:
            return False  # (after an abort or a park: whoever reports knows it is stale)
        entry = self.running.get(ctx.lease)
        if entry is not None and entry[0] is not None:
            raise SchedulerError("ctx.complete/fail/abort report a remote executor's attempt only")
        ctx._ended = True
        self.running.pop(ctx.lease, None)
        if self.ending:
            w = self.ending.pop(ctx.lease, None)
            if w is not None and not w.done():
                w.set_result(None)
        if not self.live:
            return False
        if failure is None:
            self.core.complete(self.now(), ctx.lease, output)
        else:
            message, permanent, retry_after = failure
            ra = None if retry_after is None else to_ns(retry_after)
            self.core.fail(self.now(), ctx.lease, message, permanent=permanent, retry_after=ra)
        self.kick()
        return True

    def report_error(self, lease: int, ctx: TaskContext, exc: BaseException) -> None:
        """Report a failed attempt: ``Permanent`` → failed, anything else → retryable."""
        self.running.pop(lease, None)
        ctx._ended = True
        if self.live:
            self.fail_attempt(lease, exc)
            self.kick()

    def fail_attempt(self, lease: int, exc: BaseException) -> None:
        """Report the attempt under ``lease`` failed with ``exc`` (see ``errors.outcome_of``)."""
        o = outcome_of(exc)
        ra = None if o.retry_after is None else to_ns(o.retry_after)
        self.core.fail(self.now(), lease, o.message, permanent=o.permanent, retry_after=ra)

    def on_done(self, lease: int, ctx: TaskContext, fut: asyncio.Future[Any], output: bool = False) -> None:
        """An attempt's future is done (``output``: its result is the output as it is)."""
        entry = self.running.get(lease)
        if entry is None or entry[0] is not fut:
            # aborted by the engine (timeout, cancel, lease loss) or shut down; an outcome that
            # arrives anyway (a thread that ran on, an awaitable that ignored its cancellation)
            # is a stale report
            if not fut.cancelled():
                exc = fut.exception()  # (retrieved: never logged as unhandled)
                result = fut.result() if exc is None else None
                if result is not _SKIPPED:
                    if inspect.iscoroutine(result):
                        result.close()  # a late plain function's coroutine is never run
                    self.late_report(ctx)
            return
        if not self.live:
            return
        try:
            result = fut.result()
        except KeyboardInterrupt:
            raise  # (raised by a plain function: stops the process, as ever)
        except BaseException as exc:  # SystemExit too; cancelled by itself: retryable
            del self.running[lease]
            ctx._ended = True
            self.fail_attempt(lease, exc)
        else:
            if not output and not isinstance(fut, asyncio.Task) and inspect.isawaitable(result):
                # a plain function returned an awaitable: await it within the same attempt, in
                # a runner task as an async executor's (attempt(): the awaitable's outcome,
                # SystemExit included, is reported as that executor's would be)
                coro = self.attempt(lease, ctx, partial(_awaited, result), None)
                try:
                    inner = self.loop.create_task(coro)
                except Exception as exc:
                    coro.close()
                    del self.running[lease]
                    _close(result)
                    return self.not_started(lease, ctx, exc)
                ctx._in_thread = False  # the rest runs on the loop: abort cancels it
                if inspect.iscoroutine(result):  # (never awaited if cancelled before it starts)
                    inner.add_done_callback(partial(_close, result))
                if not ctx._ended:  # (an eager task factory may already have finished it)
                    self.running[lease] = (inner, ctx)
                return
            del self.running[lease]
            ctx._ended = True
            self.core.complete(self.now(), lease, result)
        self.kick()

    def count_stale(self) -> None:
        """A report arrived for a lease that is no longer current (remote workers)."""
        if self.live:
            self.core.counters["stale_completions"] += 1

    def late_report(self, ctx: TaskContext) -> None:
        """An in-process attempt ended after the engine aborted it: a stale report
        (docs/reference/behaviour.md#reliability).

        Not counted when shutdown aborted it or the scheduler shut down (or restarted) since.
        """
        if ctx._aborted_by is self.core:
            self.count_stale()

    def heartbeat(self, lease: int) -> None:
        if self.live:
            self.core.heartbeat(self.now(), lease)

    def progress(self, lease: int, done: float, total: float | None, message: str | None) -> None:
        if not self.live:
            return
        core = self.core
        if core.progress.report(self.now(), lease, done, total, message) and (
            core.actions or core.progress.publish
        ):
            self.kick()  # publish now, or arm the trailing flush

    def note_worker(self, lease: int, name: str) -> None:
        if self.live:
            self.core.attempts.set_worker(lease, name)

    def move_attempt(self, ctx: TaskContext, labels: dict[str, str], kinds: Kinds = None) -> bool:
        """Move ``ctx``'s running attempt to the worker group with ``labels`` and ``kinds`` (a remote
        lease handed back unrun, re-offered: :meth:`Core.move_attempt`); ``ctx.group`` follows."""
        if not self.live or not self.core.move_attempt(ctx.lease, labels, kinds):
            return False
        ctx._group = ctx._task.group
        self.kick()  # the slot given back may take a parked labelled task
        return True

    # ------------------------------------------------------------------ handles, space, control

    def blob(self, payload: object) -> bytes | None:
        """A payload encoded for a durable store at submission (an unencodable one is
        ``invalid``), None without one: the engine then keeps the payload itself."""
        return None if self.committer is None else encode_payload(self.sched._codec, payload)

    def handle_for(self, tid: int, dup: bool) -> TaskHandle:
        fut = self.waiters.get(tid)
        if fut is None:
            fut = self.loop.create_future()
            t = self.core.tasks.get(tid) if self.live else None
            if t is not None and t.status >= FIRST_TERMINAL:
                set_outcome(fut, t)
            else:
                self.waiters[tid] = fut
        return TaskHandle(self.sched, tid, dup, fut)

    def wait_for(self, tid: int, fut: asyncio.Future[Any]) -> asyncio.Future[Any]:
        """A future of one ``await handle`` of task ``tid`` (``fut``, its shared future, still
        pending), settled with ``fut`` (a cancelled awaiter cancels only its own future)."""
        if self.waiters.get(tid) is not fut:  # pragma: no cover - pending shared futures are there
            return asyncio.shield(fut)
        w = self.loop.create_future()
        ws = self.awaiting.get(tid)
        if ws is None:
            self.awaiting[tid] = [w]
        else:
            if len(ws) >= 8:  # (awaiters given up on, a wait_for timeout in a loop: let them go)
                ws[:] = [x for x in ws if not x.done()]
            ws.append(w)
        if self.wait_on is not None and self.in_attempt():
            self.wait_on(w)
        return w

    def in_attempt(self) -> bool:
        """True when the running asyncio task is one of the running attempts' (an async
        executor's task or the slot task running it)."""
        current = asyncio.current_task()
        return current is not None and any(entry[0] is current for entry in self.running.values())

    async def wait_space(self, opts: TaskOptions) -> None:
        name = self.core.pools[opts.pool_index].name
        sf = self.space.get(name)
        if sf is None or sf.done():
            sf = self.loop.create_future()
            self.space[name] = sf
        await asyncio.shield(sf)
        if not self.live or not self.accepting:
            # shut down while this submission waited for space: nothing was accepted
            raise SchedulerError(f"{SHUTDOWN_MESSAGE} while the submission waited for space in pool '{name}'")

    def cancel(self, ref: int | str) -> bool:
        if not self.live:
            return False
        core = self.core
        ok = core.cancel(self.now(), ref)
        if core.actions:
            self.apply()
        if ok:
            self.kick()
        return ok

    def scale(self, pool: str, desired: int) -> None:
        """Carry out an autoscaler decision through the pool's scaler (in request order)."""
        sched = self.sched
        scaler = self.pools[sched._pool_names.index(pool)].scaler
        if type(scaler) is SlotScaler:
            if self.live:
                self.core.set_capacity(self.now(), pool, desired)
                self.kick()
            return
        prev = self.scaling.get(pool)
        self.scaling[pool] = self.loop.create_task(self.run_scaler(prev, scaler, pool, desired))

    async def run_scaler(
        self, prev: asyncio.Task[None] | None, scaler: Scaler, pool: str, desired: int
    ) -> None:
        if prev is not None and not prev.done():
            await asyncio.wait([prev])
        try:
            result = scaler.scale_to(pool, desired)
            if inspect.isawaitable(result):
                result = await result
        except Exception:
            _log.exception("scaler %r failed to scale pool '%s' to %d", scaler, pool, desired)
            return
        if result is None or not self.live:
            return
        if isinstance(result, bool) or not isinstance(result, int) or result < 0:
            _log.error("scaler %r returned an invalid capacity %r for pool '%s'", scaler, result, pool)
            return
        self.core.set_capacity(self.now(), pool, result)
        self.settle()

    # ------------------------------------------------------------------ leadership and shutdown

    def on_fenced(self, err: BaseException) -> None:
        """Stop leading at once: another instance took over the store (``err`` a Fenced: nothing
        more is written), or a commit failed for good (the committer's ``on_error``: the engine
        is ahead of the store; what is pending is still written, and the store released)."""
        if self.fenced is not None or not self.live:
            return
        self.fenced = err
        if isinstance(err, Fenced):
            _log.error("lost leadership of the store: %s", err)
        else:
            _log.error("a store commit failed for good: stepping down: %s", err)
        self.loop.create_task(self.step_down(err))

    def on_lost(self) -> None:
        self.on_fenced(Fenced("leadership lost"))

    async def step_down(self, err: BaseException) -> None:
        try:
            await self.sched.shutdown(0.0)
        finally:
            hook: Callable[[BaseException], Any] | None = self.sched.on_fenced
            if hook is not None:
                res = hook(err)
                if inspect.isawaitable(res):
                    await res

    async def drain(self, grace: float) -> None:
        """Shutdown's first half: wait up to ``grace`` s for running attempts, abort the rest,
        carry out the last actions (they go to the store too)."""
        self.accepting = False
        core = self.core
        core.paused = True
        if self.running:
            # Loop: an attempt's future may be replaced while we wait (a plain function that
            # returned an awaitable continues as a new future under the same lease); a remote
            # attempt's end is waited for on a future made now.
            loop = self.loop
            end = loop.time() + grace
            while True:
                await asyncio.sleep(0)  # let the done callbacks of finished attempts report
                pending = [
                    f if f is not None else self.end_of(lease) for lease, (f, _) in self.running.items()
                ]
                pending = [f for f in pending if not f.done()]
                remaining = end - loop.time()
                if not pending or remaining <= 0:
                    break
                await asyncio.wait(pending, timeout=remaining)
        self.drive()
        for fut, ctx in self.running.values():
            ctx._cancelled = True
            ctx._ended = True
            if fut is not None:
                fut.cancel()
            elif ctx.on_abort is not None:  # (a remote attempt: its worker is told)
                ctx.on_abort()
        self.running.clear()
        await self.sched._procs.close()  # (the cancels above started the hard kills of running children)
        if core.actions:
            self.apply()

    def end_of(self, lease: int) -> asyncio.Future[None]:
        """A future done when remote attempt ``lease`` reports its end (shutdown waits on it)."""
        w = self.ending.get(lease)
        if w is None:
            w = self.ending[lease] = self.loop.create_future()
        return w

    async def close(self) -> None:
        """Shutdown's second half (no longer started): flush and release the store, fail every
        unfinished handle, end the event streams."""
        self.live = False
        committer, self.committer = self.committer, None
        if committer is not None:
            try:
                await committer.stop()  # flushes (a fenced store refuses: that is fine), then stops
            except Exception as e:
                if self.fenced is None:
                    _log.exception("could not flush the store at shutdown")
                elif isinstance(self.fenced, Fenced):
                    _log.info("store not flushed after losing leadership: %s", e)
                else:  # (its flush fails as every barrier after the lost commit does)
                    _log.info("store flushed, but a commit had failed for good: %s", e)
            # (another instance leads: nothing to release; after a lost commit, this one still does)
            ousted = isinstance(self.fenced, Fenced) or committer.fenced is not None
            store = self.sched._store
            assert store is not None  # (a committer is made for a store only)
            try:
                if not ousted:
                    await store.release()
                await store.close()
            except Exception:
                _log.exception("could not release the store at shutdown")
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        self.timer_at = -1
        for tid, fut in self.waiters.items():
            if not fut.done():
                fut.set_exception(TaskFailed("shutdown", SHUTDOWN_MESSAGE, tid))
                fut.exception()  # mark retrieved: nobody may be awaiting this handle
            for w in self.awaiting.get(tid, ()):
                if not w.done():
                    w.set_exception(TaskFailed("shutdown", SHUTDOWN_MESSAGE, tid))
        self.waiters.clear()
        self.awaiting.clear()
        for sf in self.space.values():
            if not sf.done():
                sf.set_result(None)
        self.space.clear()
        for s in list(self.streams):
            s._end()
        self.streams.clear()
        self.pstreams.clear()
