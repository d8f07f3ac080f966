"""``TaskContext``: what an executor sees of its running attempt (docs/reference/behaviour.md#types).

Its controls (``heartbeat``, ``progress``) are synchronous and never block: on the loop's
thread they call into the scheduler at once; from a pool thread (a synchronous executor) they
are handed to the loop with ``call_soon_threadsafe``.  Both are no-ops once the attempt ended.
"""

from __future__ import annotations

import asyncio
import datetime as _dt
import threading
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from cronoq.engine.parents import outcomes
from cronoq.engine.progress import check_progress
from cronoq.engine.time import NS
from cronoq.errors import outcome_of
from cronoq.outcome import Outcome
from cronoq.runtime import parking as _parking

if TYPE_CHECKING:
    from cronoq.runtime.task import Task

if TYPE_CHECKING:
    from cronoq.engine.model import TaskState
    from cronoq.runtime.started import Started

_EMPTY: dict[str, str] = {}


class TaskContext:
    """Information and controls for one running attempt.  Cheap: fields are read lazily."""

    __slots__ = (
        "_aborted_by",
        "_cancelled",
        "_cursor",
        "_ended",
        "_group",
        "_in_thread",
        "_run",
        "_task",
        "abort_reason",
        "attempt",
        "lease",
        "on_abort",
        "on_park",
    )

    def __init__(self, run: Started, task: TaskState, lease: int) -> None:
        self._run = run  # the started scheduler running this attempt (runtime/started.py)
        self._task = task
        self.lease = lease
        self.attempt: int = task.attempt
        self._cancelled = False
        self._ended = False
        self._group = task.group  # the worker group this attempt was placed on
        self.abort_reason: str | None = None  # why the engine aborted the attempt, if it did
        self._aborted_by: object = None  # the engine (Core) that aborted it, if one did
        self._in_thread = False  # a plain function running in a pool thread (not interruptible)
        self._cursor = 0  # the next record of the task's journal this run replays (runtime/parking.py)
        #: called when a durable call parks this attempt, before anything else is dispatched
        #: (the server's remote executor frees the worker's slot with it: server/worker_durable.py)
        self.on_park: Callable[[], None] | None = None
        #: called when the engine aborts this attempt (timeout, cancel, lease loss, shutdown),
        #: for a REMOTE executor's attempt (runtime/executors.py), which has no task to cancel
        self.on_abort: Callable[[], None] | None = None

    @property
    def id(self) -> int:
        return self._task.id

    @property
    def kind(self) -> str:
        return self._task.opts.kind

    @property
    def key(self) -> str | None:
        return self._task.key

    @property
    def pool(self) -> str:
        return self._run.pools[self._task.opts.pool_index].name

    @property
    def tags(self) -> dict[str, str]:
        tags = self._task.opts.tags
        return dict(tags) if tags else {}

    @property
    def group(self) -> dict[str, str]:
        """Labels of the worker group running this attempt (``{}``: the unlabelled group)."""
        g = self._group
        return dict(g.labels) if g is not None else dict(_EMPTY)

    @property
    def state(self) -> Any:
        """What the app's ``@app.lifespan`` yielded, for an app's scheduler (None otherwise):
        worker-level resources such as a database pool (docs/how-to/resources-per-worker.md)."""
        return getattr(self._run.sched, "state", None)

    @property
    def timeout(self) -> float | None:
        t = self._task.opts.timeout
        return None if t is None else t / NS

    @property
    def deadline(self) -> float | None:
        """The task's deadline in Unix seconds, or None."""
        d = self._task.deadline
        return None if d is None else (self._run.time_base + d) / NS

    @property
    def parents(self) -> tuple[Outcome, ...]:
        """How each parent ended, one :class:`~cronoq.Outcome` per dependency edge in the
        order the edges were given (``after``, then ``deps``); ``()`` without edges
        (docs/concepts/dependencies.md#outputs-on-edges)."""
        t = self._task
        if t.parents is None:
            return ()
        return tuple(Outcome(*o) for o in outcomes(self._run.core, t))

    def is_cancelled(self) -> bool:
        """True once the attempt was aborted (cancel, timeout, lease loss, shutdown)."""
        return self._cancelled

    async def sleep(self, seconds: float) -> None:
        """Sleep on the scheduler's clock: real time normally, virtual time under
        ``cronoq.testing`` (where a sleeping attempt lets time jump ahead)."""
        await self._run.sched.clock.sleep(seconds)

    def heartbeat(self) -> None:
        """Renew the lease (a no-op without ``lease_ttl`` or after the attempt ended).

        Safe to call from the executor's thread for synchronous executors.
        """
        if self._ended or self._cancelled:
            return
        run = self._run
        if threading.get_ident() == run.loop_thread:
            run.heartbeat(self.lease)
        elif not run.loop.is_closed():
            run.loop.call_soon_threadsafe(run.heartbeat, self.lease)

    def progress(self, done: float, total: float | None = None, message: str | None = None) -> None:
        """Report how far this attempt is: ``done`` of ``total`` (None: unknown), with an
        optional ``message`` (docs/how-to/progress.md).

        ``done`` must be finite and >= 0, ``total`` None or finite and > 0 with
        ``done <= total``, ``message`` at most 1,024 characters: anything else raises
        ValueError.  The latest value is readable at once (``sched.progress(ref)``); events
        are rate-limited to 4 per second per task (newest wins).  A no-op once the attempt
        ended.  Safe to call from the executor's thread for synchronous executors.
        """
        d, t, m = check_progress(done, total, message)
        if self._ended or self._cancelled:
            return
        run = self._run
        if threading.get_ident() == run.loop_thread:
            run.progress(self.lease, d, t, m)
        elif not run.loop.is_closed():
            run.loop.call_soon_threadsafe(run.progress, self.lease, d, t, m)

    # ------------------------------------------------------------------ durable calls
    # (docs/how-to/durable.md; replayed from the task's journal on every run: runtime/parking.py)

    @property
    def resumes(self) -> int:
        """How many times this task ran again after parking (0 on its first run)."""
        return _parking.resumes(self)

    def journal_steps(self) -> list[Any] | None:
        """The task's journal as a remote worker replays it: ``[name, result]`` per step
        record, None per other record; None without a journal (worker protocol version 7)."""
        return _parking.journal_steps(self)

    async def spawn(self, specs: Task | Iterable[Task], *, detached: bool = False) -> list[int]:
        """Submit child tasks atomically (a :class:`cronoq.Task`, or a list as for
        ``submit_batch``) and return their ids; a run that replays returns the same ids and
        submits nothing.  The children are cancelled with this task unless ``detached``."""
        return await _parking.spawn(self, specs, detached)

    async def wait_for(self, ids: Iterable[int]) -> list[Outcome]:
        """The :class:`~cronoq.Outcome` of each task of ``ids``, in order, once all have
        ended; until then the attempt parks (no slot held) and the task runs again after."""
        return await _parking.wait_for(self, ids)

    async def sleep_for(self, seconds: float) -> None:
        """A durable sleep: the attempt parks (``scheduled``) and the task runs again after
        ``seconds`` (>= 0, finite), across restarts with a durable store."""
        await _parking.sleep_for(self, seconds)

    async def sleep_until(self, when: float | _dt.datetime) -> None:
        """A durable sleep until ``when`` (Unix seconds or an aware datetime)."""
        await _parking.sleep_until(self, when)

    async def wait_signal(self, name: str, timeout: float | None = None) -> Any:
        """The payload of signal ``name`` (``sched.signal(name, payload)``); the attempt parks
        until it is sent.  With ``timeout`` (s) raises ``TimeoutError`` when it has not come."""
        return await _parking.wait_signal(self, name, timeout)

    async def step(self, name: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Run ``fn(*args, **kwargs)`` (sync or async) once and record its JSON result under
        ``name``; when the task runs again it returns the recorded result without calling
        ``fn``.  An exception is not recorded (the step runs again on the next run)."""
        return await _parking.step(self, name, fn, *args, **kwargs)

    # ------------------------------------------------------------------ outcomes as values
    # (the report of a REMOTE executor's attempt, runtime/executors.py: the server's remote one)

    def complete(self, output: object) -> bool:
        """Report this remote attempt succeeded with ``output``.  False when it had already
        ended (aborted, parked or reported): the report is stale.  SchedulerError for an
        attempt another kind of executor runs (its return value is its outcome)."""
        return self._run.report(self, output)

    def fail(self, message: str, *, permanent: bool = False, retry_after: float | None = None) -> bool:
        """Report this remote attempt failed: ``permanent`` ends the task ``failed``, else it is
        retried (after ``retry_after`` s when given, else by the pool's retry policy).  False
        when it had already ended."""
        return self._run.report(self, None, (message, permanent, retry_after))

    def abort(self) -> bool:
        """Report this remote attempt ended without an outcome (whoever ran it gave it up): a
        retryable failure, as an executor's own ``CancelledError`` is.  False when it had
        already ended (an abort by the engine included)."""
        o = outcome_of(asyncio.CancelledError())  # (the message an executor's own one gets)
        return self._run.report(self, None, (o.message, False, None))

    def note_worker(self, name: str) -> None:
        """Name the worker this attempt runs on, for its attempt timeline (the server calls
        this when it hands the lease to a remote worker)."""
        if not self._ended:
            self._run.note_worker(self.lease, name)

    def __repr__(self) -> str:
        return f"<TaskContext id={self.id} attempt={self.attempt} lease={self.lease}>"
