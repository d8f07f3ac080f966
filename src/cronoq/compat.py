"""Compatibility facade of the original prototype design (docs/reference/behaviour.md#blocking-api).

``ElasticPriorityScheduler`` is a synchronous, thread-safe scheduler of sleep-tasks built on
:class:`~cronoq.runtime.blocking.BlockingScheduler`.  A task "runs" by sleeping its
``duration`` on a worker slot; task ids are strings (they become cronoq keys, so a pending id
submitted again is a no-op) and ``dependencies`` are success edges on ids, awaited when not
submitted yet.  An id that already completed may be submitted again: it is a new submission
and runs again (without a key: the first run's key stays retained; a completed id satisfies
dependencies on it for good).  ``stop()`` gives running tasks a short grace to finish; the
others stay pending and run after the next ``start()``.

The pool autoscales with queue pressure on a responsive configuration (a 2 s drain target, a
5 s stabilization window, a 2 s cooldown).  ``schedule_quality`` is the total work of the
completed tasks over the pool's worker-seconds provisioned between the first task start and the
last completion (counted over all runs), so scaling up while nothing completes does not lower
it.  After ``stop()`` the metrics and the cost keep the last run's figures.
"""

from __future__ import annotations

import asyncio
import threading
import time
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any

from cronoq.engine.config import AutoscaleConfig
from cronoq.engine.reservations import max_overlap, reservation_limit
from cronoq.engine.snapshot import PoolSnapshot
from cronoq.engine.time import NS
from cronoq.errors import NotStartedError, SubmitError
from cronoq.runtime.blocking import BlockingScheduler
from cronoq.runtime.context import TaskContext
from cronoq.runtime.pool import Pool
from cronoq.runtime.scheduler import Scheduler

__all__ = [
    "ElasticPriorityScheduler",
    "Priority",
    "QualityMetrics",
    "ScalingConfig",
    "ScheduledTask",
    "Task",
]


class Priority(IntEnum):
    CRITICAL = 0
    HIGH = 1
    NORMAL = 2
    LOW = 3


@dataclass
class Task:
    """A unit of work: sleeps ``duration`` seconds.  Times are Unix seconds."""

    id: str
    duration: float
    priority: Priority = Priority.NORMAL
    arrival_time: float = 0.0
    fixed_start: float | None = None
    deadline: float | None = None
    dependencies: list[str] = field(default_factory=list)

    def __hash__(self) -> int:  # as the prototype: usable in sets and as dict keys, by id
        return hash(self.id)


@dataclass
class ScheduledTask:
    """A completed task: which worker ran it and when (actual dispatch/completion times)."""

    task: Task
    worker_id: int
    start_time: float
    end_time: float


@dataclass
class QualityMetrics:
    schedule_quality: float
    priority_adherence: float
    fixed_schedule_hits: float
    utilization: float
    avg_wait_time: float
    pending_count: int
    worker_count: int


@dataclass
class ScalingConfig:
    """The prototype's scaling knobs, in its field order (so positional use keeps working).

    ``min_workers`` is the pool's floor and ``initial_workers`` (ours, last) its starting size;
    the thresholds are accepted and ignored: scaling follows queue pressure
    (docs/reference/behaviour.md#autoscaling).  The scheduler's own config
    (``ElasticPriorityScheduler.config``) shows the values in use: its ``cooldown_seconds`` is the
    autoscaler's cooldown."""

    min_workers: int = 1
    max_workers: int = 10
    scale_up_threshold: float = 0.70
    scale_down_threshold: float = 0.90
    cooldown_seconds: float = 30.0
    worker_cost_per_second: float = 0.001
    initial_workers: int = 1


POOL = "default"
FIXED_TOLERANCE = 1.0
#: seconds ``stop()`` lets running tasks finish before cancelling them
STOP_GRACE = 2.0
#: the autoscaler's configuration: responsive, for short sleep-tasks
DRAIN_TIME = 2.0
STABILIZATION_WINDOW = 5.0
COOLDOWN = 2.0
#: share of ``max_workers`` that overlapping fixed starts may reserve
#: (docs/reference/behaviour.md#blocking-api)
RESERVABLE_FRACTION = 0.5
#: submit errors that make ``submit`` answer False (rejected), not raise
_REJECTED = frozenset({"cycle", "reservation_conflict", "unknown_dependency", "overloaded"})


class ElasticPriorityScheduler:
    """Synchronous, thread-safe facade over the cronoq scheduler."""

    def __init__(
        self,
        initial_workers: int = 1,
        max_workers: int = 10,
        scale_up_threshold: float = 0.70,
        scale_down_threshold: float = 0.90,
        worker_cost_per_second: float = 0.001,
    ) -> None:
        for name, v in (("initial_workers", initial_workers), ("max_workers", max_workers)):
            if isinstance(v, bool) or not isinstance(v, int):
                raise ValueError(f"{name} must be an int")
        if not worker_cost_per_second >= 0:
            raise ValueError("worker_cost_per_second must be >= 0")
        # lenient, as the prototype: at least one worker, and room for the initial ones
        initial_workers = max(1, initial_workers)
        max_workers = max(initial_workers, max_workers)
        self.config = ScalingConfig(
            min_workers=1,
            max_workers=max_workers,
            scale_up_threshold=scale_up_threshold,
            scale_down_threshold=scale_down_threshold,
            cooldown_seconds=COOLDOWN,
            worker_cost_per_second=worker_cost_per_second,
            initial_workers=initial_workers,
        )
        # _lock serializes API calls (they may block on the loop thread); _state guards the
        # registries that executors also touch on the loop thread: never wait on _lock there.
        self._lock = threading.RLock()
        self._state = threading.Lock()
        self._pending: dict[str, Task] = {}  # submitted, not completed (insertion order)
        self._submitted_at: dict[str, float] = {}
        self._completed: list[ScheduledTask] = []
        self._done: set[str] = set()  # completed ids: satisfied dependencies, also after a restart
        self._free_workers = list(range(max_workers))
        self._bs: BlockingScheduler | None = None
        self._first_start: float | None = None
        self._last_end: float | None = None
        self._work_done = 0.0
        self._worker_seconds = 0.0  # accumulated over previous runs
        # worker-seconds (over all runs) when the first task started / the last one completed
        self._ws_first: float | None = None
        self._ws_last: float | None = None
        # while stop() waits: the pool's worker-seconds and capacity before, and since when
        self._stopping: tuple[float, int, float] | None = None
        self._last: PoolSnapshot | None = None  # the last run's pool figures, kept after stop()
        self._fixed_total = 0
        self._fixed_hits = 0

    # ------------------------------------------------------------------ lifecycle

    def _make_scheduler(self) -> BlockingScheduler:
        cfg = self.config

        async def execute(ctx: TaskContext, task: Task) -> None:
            await self._run(bs.scheduler, task)

        pool = Pool(
            POOL,
            execute,
            min=cfg.min_workers,
            max=cfg.max_workers,
            initial=cfg.initial_workers,
            autoscale=AutoscaleConfig(
                drain_time=DRAIN_TIME,
                stabilization_window=STABILIZATION_WINDOW,
                cooldown=cfg.cooldown_seconds,
                cost_per_worker_second=cfg.worker_cost_per_second,
            ),
            unknown_dependency="await",
            reservable_fraction=RESERVABLE_FRACTION,
        )
        bs = BlockingScheduler([pool])
        return bs

    def start(self) -> None:
        with self._lock:
            if self._bs is not None:
                return
            bs = self._bs = self._make_scheduler()
            bs.start()
            pending = list(self._pending.values())
            if pending:
                # handed over in one call on the scheduler's loop, so all are queued before
                # the first dispatch decision (one call each would let the first start alone)
                bs.run_coroutine(self._enqueue_all(bs, pending))

    def stop(self) -> None:
        """Stop running: running tasks get ``STOP_GRACE`` seconds to finish; unfinished tasks
        stay pending and run after the next ``start()``.  The metrics keep this run's figures."""
        with self._lock:
            bs = self._bs
            if bs is None:
                return
            p = _pool(bs.snapshot())
            since = time.monotonic()
            with self._state:
                self._last = p
                self._stopping = (p.worker_seconds, p.capacity, since)
            try:
                bs.shutdown(STOP_GRACE)
            finally:
                # (the engine answers no snapshot while it stops: the capacity does not change
                # then, so the worker-seconds of the grace are capacity x time)
                with self._state:
                    self._worker_seconds += p.worker_seconds + p.capacity * (time.monotonic() - since)
                    self._stopping = None
                    self._bs = None

    def __enter__(self) -> ElasticPriorityScheduler:
        self.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    # ------------------------------------------------------------------ tasks

    async def _worker_seconds_total(self, sched: Scheduler) -> float:
        """Worker-seconds provisioned so far, over all runs (on the scheduler's loop)."""
        try:
            ws = _pool(await sched.snapshot()).worker_seconds
        except NotStartedError:  # stopping: see stop()
            with self._state:
                stopping = self._stopping
            ws = 0.0 if stopping is None else stopping[0] + stopping[1] * (time.monotonic() - stopping[2])
        with self._state:
            return self._worker_seconds + ws

    async def _run(self, sched: Scheduler, task: Task) -> None:
        with self._state:
            worker = self._free_workers.pop(0) if self._free_workers else -1
        start = time.time()
        ws_start = await self._worker_seconds_total(sched)
        with self._state:
            if self._ws_first is None:
                self._ws_first = ws_start
        try:
            await asyncio.sleep(max(0.0, task.duration))
        except BaseException:
            with self._state:
                if worker >= 0:
                    self._free_workers.append(worker)
                    self._free_workers.sort()
            raise
        end = time.time()
        ws_end = await self._worker_seconds_total(sched)
        with self._state:
            if worker >= 0:
                self._free_workers.append(worker)
                self._free_workers.sort()
            if self._pending.pop(task.id, None) is not None:
                self._completed.append(ScheduledTask(task, worker, start, end))
                self._done.add(task.id)
                self._work_done += task.duration
                if self._first_start is None or start < self._first_start:
                    self._first_start = start
                self._last_end = end
                self._ws_last = ws_end
                if task.fixed_start is not None:
                    self._fixed_total += 1
                    if start <= task.fixed_start + FIXED_TOLERANCE:
                        self._fixed_hits += 1

    async def _enqueue_all(self, bs: BlockingScheduler, tasks: list[Task]) -> None:
        """Enqueue pending tasks without yielding to the loop in between (see ``start``)."""
        sched = bs.scheduler
        for task in tasks:
            try:
                await sched.enqueue(task, **self._fields(task))
            except SubmitError as e:
                if e.code not in _REJECTED:
                    raise

    def _submit_now(self, task: Task) -> bool:
        bs = self._bs
        assert bs is not None
        try:
            bs.enqueue(task, **self._fields(task))
        except SubmitError as e:
            if e.code in _REJECTED:
                return False
            raise
        return True

    def _fields(self, task: Task) -> dict[str, Any]:
        fields: dict[str, Any] = {
            "priority": int(task.priority),
            "duration_hint": task.duration,
        }
        with self._state:  # a restarted scheduler no longer knows tasks completed before
            rerun = task.id in self._done
            deps = [d for d in task.dependencies if d not in self._done]
        if not rerun:
            # (a completed id runs again without its key, which the engine keeps retained and
            # would answer as a duplicate: nothing refers to it, its dependents are satisfied)
            fields["key"] = task.id
        if deps:
            fields["after"] = deps
        if task.fixed_start is not None:
            fields["start_at"] = task.fixed_start
            fields["tolerance"] = FIXED_TOLERANCE
        if task.deadline is not None:
            fields["deadline_at"] = task.deadline
        return fields

    def submit(self, task: Task) -> bool:
        """Submit a task; False when rejected (dependency cycle or reservation conflict).

        True as a no-op for an id that is still pending; an id that completed runs again.
        """
        if not isinstance(task, Task):
            raise ValueError("submit takes a compat.Task")
        if task.arrival_time == 0:  # as the prototype: stamped when submitted
            task.arrival_time = time.time()
        with self._lock:
            if task.id in self._pending:
                return True
            if task.id in task.dependencies:
                return False
            if self._bs is None and not (self._offline_ok(task) and self._offline_reservation_ok(task)):
                return False
            with self._state:
                self._pending[task.id] = task
                self._submitted_at[task.id] = time.time()
            if self._bs is not None and not self._submit_now(task):
                with self._state:
                    self._pending.pop(task.id, None)
                    self._submitted_at.pop(task.id, None)
                return False
            return True

    def _offline_ok(self, task: Task) -> bool:
        """Before start: reject cycles among pending tasks (the engine checks the rest on start)."""
        stack = list(task.dependencies)
        seen: set[str] = set()
        while stack:
            dep = stack.pop()
            if dep in self._done:
                continue  # a satisfied edge: no cycle through it
            if dep == task.id:
                return False
            if dep in seen:
                continue
            seen.add(dep)
            pending = self._pending.get(dep)
            if pending is not None:
                stack.extend(pending.dependencies)
        return True

    def _offline_reservation_ok(self, task: Task) -> bool:
        """Before start: reject a fixed start that conflicts with the pending ones' reservations.

        The same arithmetic as the engine's (docs/reference/behaviour.md#fixed-starts): a window
        ``[start - tolerance, start + duration + tolerance]``, at most ``max(1, floor(max_workers * 0.5))``
        overlapping.
        """
        if task.fixed_start is None:
            return True

        def window(t: Task) -> tuple[int, int]:
            assert t.fixed_start is not None
            start = round(t.fixed_start * NS)
            tol = round(FIXED_TOLERANCE * NS)
            return start - tol, start + round(max(0.0, t.duration) * NS) + tol

        lo, hi = window(task)
        others = [window(t) for t in self._pending.values() if t.fixed_start is not None]
        limit = reservation_limit(self.config.max_workers, RESERVABLE_FRACTION)
        return max_overlap(others, lo, hi) < limit

    # ------------------------------------------------------------------ results

    @property
    def completed_count(self) -> int:
        with self._state:
            return len(self._completed)

    @property
    def completed_tasks(self) -> list[ScheduledTask]:
        with self._state:
            return list(self._completed)

    @property
    def pending_tasks(self) -> list[Task]:
        with self._state:
            return list(self._pending.values())

    def _pool_now(self) -> tuple[BlockingScheduler | None, PoolSnapshot | None]:
        """The running scheduler and its pool's figures; None, None when not running (the
        figures None while stopping).  (Not under ``_state``: the loop thread needs it.)"""
        with self._state:
            bs = self._bs
        if bs is None:
            return None, None
        try:
            return bs, _pool(bs.snapshot())
        except NotStartedError:  # stop() is shutting it down
            return bs, None

    def _worker_seconds_now(self, bs: BlockingScheduler | None, p: PoolSnapshot | None) -> float:
        """Worker-seconds over all runs, with ``p`` the figures of ``bs``'s pool (or None)."""
        with self._state:
            ws = self._worker_seconds
            if p is not None and self._bs is bs:  # (else stop() has counted that run since)
                ws += p.worker_seconds
            elif self._bs is not None and self._stopping is not None:
                ws0, capacity, since = self._stopping
                ws += ws0 + capacity * (time.monotonic() - since)
        return ws

    def get_metrics(self) -> QualityMetrics:
        _, live = self._pool_now()
        with self._state:
            p = live if live is not None else self._last  # the last run's figures after stop()
            completed = list(self._completed)
            pending = len(self._pending)
            workers = p.capacity if p is not None else self.config.initial_workers
            if not completed:
                quality = 1.0 if pending == 0 else 0.5  # as the prototype
            else:
                provisioned = 0.0
                if self._ws_first is not None and self._ws_last is not None:
                    provisioned = self._ws_last - self._ws_first
                if not provisioned > 0:  # fall back to the makespan on the current workers
                    span = (
                        self._last_end - self._first_start
                        if self._first_start is not None and self._last_end is not None
                        else 0.0
                    )
                    provisioned = span * max(1, workers)
                quality = min(1.0, self._work_done / provisioned) if provisioned > 0 else 0.0
            waits = [
                max(0.0, c.start_time - self._submitted_at.get(c.task.id, c.start_time)) for c in completed
            ]
            return QualityMetrics(
                schedule_quality=quality,
                priority_adherence=p.priority_adherence if p is not None else 1.0,
                fixed_schedule_hits=self._fixed_hits / self._fixed_total if self._fixed_total else 1.0,
                utilization=min(1.0, max(0.0, p.utilization)) if p is not None else 0.0,
                avg_wait_time=sum(waits) / len(waits) if waits else 0.0,
                pending_count=pending,
                worker_count=workers,
            )

    def get_cost(self) -> float:
        ws = self._worker_seconds_now(*self._pool_now())
        return max(0.0, ws * self.config.worker_cost_per_second)


def _pool(snap: Any) -> PoolSnapshot:
    p = snap.pool(POOL)
    assert p is not None
    return p
