"""``SchedulerSeam``: what the shells built on a :class:`Scheduler` may use of it.

Theory of operation
-------------------
The server (``cronoq.server``), the OpenTelemetry bridge (``cronoq.otel``) and the task layer
run *on* a scheduler: they read the engine's task table, submit without making a handle, cancel
by id on the loop, wait for the group commit, size worker groups as remote workers come and go.
None of that is user API (``Scheduler``'s public methods are specified in
docs/reference/behaviour.md#scheduler-api, and ``BlockingScheduler`` mirrors them), yet none of it
may be done by reaching into the scheduler's private attributes either
(docs/architecture/index.md#seam).

So every scheduler has one ``seam`` (``sched.seam``): a small object, created with it, whose
methods and properties are that whole surface, each documented.  It holds nothing but the
scheduler and never outlives a leadership term's scheduler.  Everything here runs on the
scheduler's loop (the thread that started it) unless said otherwise, and what it returns of the
engine (``TaskState`` objects, the task mapping) is read-only for the caller: state changes only
through ``Core``'s methods, called by the scheduler.

Options that a shell used to set as attributes after construction (key retention, "a full pool
answers ``full``") are constructor options of :class:`Scheduler` instead.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable, Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from cronoq.engine.parents import outcomes
from cronoq.engine.pools import Kinds
from cronoq.errors import Fenced

if TYPE_CHECKING:
    from cronoq.engine.model import TaskState
    from cronoq.engine.recurring import RecurringInfo
    from cronoq.engine.snapshot import Snapshot
    from cronoq.outcome import Outcome
    from cronoq.runtime.context import TaskContext
    from cronoq.runtime.handles import TaskHandle
    from cronoq.runtime.pool import Pool
    from cronoq.runtime.scheduler import Scheduler
    from cronoq.runtime.task import Task
    from cronoq.spec.submission import Submission
    from cronoq.store.base import Store

_NO_TASKS: Mapping[int, TaskState] = MappingProxyType({})


class SchedulerSeam:
    """The shell-facing surface of one :class:`Scheduler` (see the module docstring)."""

    __slots__ = ("_s",)

    def __init__(self, sched: Scheduler) -> None:
        self._s = sched

    # ------------------------------------------------------------------ configuration and time

    @property
    def store(self) -> Store | None:
        """The store the scheduler was given (None: in memory only)."""
        return self._s._store

    @property
    def durable(self) -> bool:
        """Whether acknowledgements wait for a store commit (started with a store)."""
        run = self._s._run
        return run is not None and run.committer is not None

    @property
    def time_base(self) -> int:
        """Unix time (ns) of engine time 0: ``time_base + t.deadline`` is a Unix instant."""
        return self._s._time_base

    @property
    def event_capacity(self) -> int:
        """The buffer of each event subscriber (the ``event_capacity`` option)."""
        return self._s._event_capacity

    @property
    def loop(self) -> asyncio.AbstractEventLoop | None:
        """The loop the scheduler runs on (None before its first ``start()``).  Any thread."""
        return self._s._loop

    def on_loop_thread(self) -> bool:
        """Whether the caller runs on the scheduler's loop thread.  Any thread."""
        return threading.get_ident() == self._s._loop_thread

    def run_processes_in_threads(self, flag: bool = True) -> None:
        """Run ``run_in="process"`` attempts in the loop's thread pool instead of child processes
        (what ``cronoq.testing.run`` does unless asked for real processes)."""
        self._s._procs.in_threads = bool(flag)

    def pool_at(self, index: int) -> Pool:
        """The pool with configuration index ``index`` (``TaskState.opts.pool_index``)."""
        return self._s._pools[index]

    # ------------------------------------------------------------------ the engine's state

    @property
    def epoch(self) -> int | None:
        """The store epoch of this leadership term (None when not started)."""
        run = self._s._run
        return None if run is None else run.core.epoch

    @property
    def tasks(self) -> Mapping[int, TaskState]:
        """The engine's live and retained tasks by id (empty when not started); read-only."""
        run = self._s._run
        return _NO_TASKS if run is None else run.core.tasks

    def retained_tasks(self) -> Mapping[int, TaskState]:
        """:attr:`tasks` after forgetting the terminal tasks past key retention."""
        run = self._s._run
        if run is None:
            return _NO_TASKS
        run.core.prune(run.now())
        return run.core.tasks

    def lookup(self, ref: int | str, tenant: str | None = None) -> TaskState | None:
        """A task by id, or by key among ``tenant``'s tasks (None if unknown or not started).

        Unlike ``Scheduler.status``, an id names any tenant's task: the caller checks access.
        """
        run = self._s._run
        return None if run is None else run.core.lookup(run.now(), ref, tenant)

    def forget_output(self, task_id: int, output: object) -> bool:
        """Drop the retained output of succeeded task ``task_id`` if it is still ``output`` (a
        bounded output cache above the engine, the server's ``[outputs]``); False when there was
        nothing to drop or the scheduler is not started."""
        run = self._s._run
        return False if run is None else run.core.forget_output(task_id, output)

    def fill_replays_with(self, fill: Callable[[object, tuple[Outcome, ...], str], object]) -> None:
        """How a replay's payload takes its original's parents' outputs (``fill(payload,
        parents, kind)``; a replay carries no edges): the server's, for its JSON blobs, in
        place of the named tasks' placeholders in process (runtime/operations.py)."""
        self._s._ops._replay_fill = fill

    def parent_ids(self, t: TaskState) -> list[int]:
        """The parent of each dependency edge of ``t``, in edge order (0: a parent
        never known; engine/parents.py)."""
        return [o[0] for o in self.parent_outcomes(t)]

    def parent_outcomes(self, t: TaskState) -> list[tuple[int, str | None, str, Any, str | None]]:
        """``(id, key, status, output, message)`` per dependency edge of ``t``, in edge order,
        live or ended while it is retained (engine/parents.py)."""
        run = self._s._run
        return [] if run is None or t.parents is None else outcomes(run.core, t)

    def pending_total(self) -> int:
        """Tasks waiting to run, over every pool (0 when not started)."""
        run = self._s._run
        return 0 if run is None else sum(p.pending for p in run.core.pools)

    def task_of(self, ctx: TaskContext) -> TaskState:
        """The engine's state of the task ``ctx``'s attempt runs; read-only."""
        return ctx._task

    def snapshot_now(self) -> Snapshot | None:
        """A snapshot taken synchronously (None when not started)."""
        run = self._s._run
        return None if run is None else run.core.snapshot(run.now())

    # ------------------------------------------------------------------ operations

    async def submit(self, sub: Submission) -> tuple[int, bool]:
        """Submit one validated task (the server's :class:`~cronoq.spec.submission.Submission`),
        ``(id, duplicate)``, without making a handle.

        Durable: returns once the submission is committed.  A full pool waits for space, unless
        the scheduler was made with ``wait_for_space=False`` (then ``SubmitError('full')``).
        """
        return await self._s._submit(sub.payload, sub)

    def submit_now(self, sub: Submission) -> tuple[int, bool] | Awaitable[tuple[int, bool]]:
        """:meth:`submit`'s engine step, made now without awaiting: ``(id, duplicate)`` once the
        task is in the engine, *not yet committed* (a durable caller acknowledges it only after
        a :meth:`commit` begun after this call: one barrier for all its submissions), or, when
        the pool is full and the scheduler waits for space, an awaitable that waits and then
        makes the step (``wait_for_space=False``: ``SubmitError('full')`` instead).
        """
        return self._s._submit_now(sub.payload, sub)

    async def add_recurring(
        self, name: str, cron: str, template: Submission, *, tz: str | None = None, overlap: str = "skip"
    ) -> RecurringInfo:
        """``Scheduler.add_recurring`` of a validated template (the server's ``Submission``): its
        start, absolute deadline and edges are ignored, as schedules have none."""
        return await self._s._add_recurring(name, cron, template, tz, overlap)

    async def submit_batch(self, tasks: list[Task]) -> list[tuple[int, bool]]:
        """Submit tasks atomically, as ``Scheduler.submit_batch``, but answer ``(id,
        duplicate)`` per member without making a handle (no future parked per member until its
        task ends).  Durable: returns once the batch is committed."""
        return await self._s._submit_batch(tasks)

    def cancel(self, tid: int) -> bool:
        """Cancel task ``tid`` now (no tenant check); False if unknown, terminal or not started.

        Durable: the cancellation is committed by a later :meth:`commit`.
        """
        run = self._s._run
        return False if run is None else run.cancel(tid)

    async def commit(self) -> None:
        """Wait until every change made so far is committed to the store (no store: nothing).

        Raises :class:`Fenced` when the scheduler has a store but no longer runs (it stepped
        down, fenced or after a failed commit, or shut down): a change it had not committed by
        then never will be, and a caller that awaited something else meanwhile (a Wait for an
        outcome, a submission waiting for space) must not take it as committed."""
        run = self._s._run
        if run is None:
            if self._s._store is not None:
                raise Fenced("the scheduler stopped leading before this commit")
            return
        if run.committer is not None:
            await run.durable()

    def handle(self, tid: int) -> TaskHandle:
        """A handle to task ``tid``, which the caller knows exists."""
        return self._s._handle_for(tid, False)

    def count_stale(self) -> None:
        """Count a report for a lease that is no longer current (``stale_completions``)."""
        run = self._s._run
        if run is not None:
            run.count_stale()

    def set_group_capacity(
        self, pool: str, labels: dict[str, str] | None, n: int, kinds: Kinds = None
    ) -> None:
        """Size a worker group (``kinds``: the task kinds it serves, None: any) at once, as
        ``Scheduler.set_group_capacity`` does (a no-op when not started); validation errors
        propagate."""
        run = self._s._run
        if run is None:
            return
        run.core.set_group_capacity(run.now(), pool, labels, n, kinds)
        run.kick()

    def move_attempt(self, ctx: TaskContext, labels: dict[str, str], kinds: Kinds = None) -> bool:
        """Move ``ctx``'s running attempt to the worker group with ``labels`` and ``kinds`` (a
        remote lease handed back unrun, re-offered to a worker of another group); ``ctx.group``
        follows."""
        return ctx._run.move_attempt(ctx, labels, kinds)

    # ------------------------------------------------------------------ tracing (cronoq.otel)

    @property
    def trace_all(self) -> bool:
        """Whether every attempt runs in a span (``otel.instrument(trace_all=True)``)."""
        return self._s._otel_all

    @trace_all.setter
    def trace_all(self, value: bool) -> None:
        self._s._otel_all = bool(value)

    @property
    def tracer(self) -> Any:
        """The tracer of attempt spans (None: the global tracer provider's)."""
        return self._s._otel_tracer

    @tracer.setter
    def tracer(self, value: Any) -> None:
        self._s._otel_tracer = value


__all__ = ["SchedulerSeam"]
