"""Compatibility facade of the original prototype design (SPEC §16.4).

``ElasticPriorityScheduler`` is a synchronous, thread-safe scheduler of sleep-tasks built on
:class:`~cronoq.runtime.blocking.BlockingScheduler`.  A task "runs" by sleeping its
``duration`` on a worker slot; task ids are strings (they become cronoq keys, so a pending id
submitted again is a no-op) and ``dependencies`` are success edges on ids, awaited when not
submitted yet.  An id that already completed may be submitted again: it is a new submission
and runs again (without a key: the first run's key stays retained; a completed id satisfies
dependencies on it for good).  Unfinished tasks survive ``stop()`` and run after the next
``start()``.
"""

from __future__ import annotations

import asyncio
import threading
import time
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any

from cronoq.engine.reservations import max_overlap, reservation_limit
from cronoq.engine.time import NS
from cronoq.errors import SubmitError
from cronoq.runtime.blocking import BlockingScheduler
from cronoq.runtime.context import TaskContext
from cronoq.runtime.pool import Pool

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
    the thresholds and ``cooldown_seconds`` are accepted and ignored: scaling follows queue
    pressure with the engine's own cooldown (SPEC §10)."""

    min_workers: int = 1
    max_workers: int = 10
    scale_up_threshold: float = 0.70
    scale_down_threshold: float = 0.90
    cooldown_seconds: float = 30.0
    worker_cost_per_second: float = 0.001
    initial_workers: int = 1


POOL = "default"
FIXED_TOLERANCE = 1.0
#: share of ``max_workers`` that overlapping fixed starts may reserve (SPEC §16.4)
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
        if isinstance(max_workers, bool) or not isinstance(max_workers, int) or max_workers < 1:
            raise ValueError("max_workers must be an int >= 1")
        if isinstance(initial_workers, bool) or not isinstance(initial_workers, int) or initial_workers < 0:
            raise ValueError("initial_workers must be an int >= 0")
        if not worker_cost_per_second >= 0:
            raise ValueError("worker_cost_per_second must be >= 0")
        self.config = ScalingConfig(
            min_workers=min(initial_workers, max_workers),
            max_workers=max_workers,
            scale_up_threshold=scale_up_threshold,
            scale_down_threshold=scale_down_threshold,
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
        self._fixed_total = 0
        self._fixed_hits = 0

    # ------------------------------------------------------------------ lifecycle

    def _make_scheduler(self) -> BlockingScheduler:
        cfg = self.config
        pool = Pool(
            POOL,
            self._run,
            min=cfg.min_workers,
            max=cfg.max_workers,
            initial=cfg.initial_workers,
            unknown_dependency="await",
            reservable_fraction=RESERVABLE_FRACTION,
        )
        return BlockingScheduler([pool])

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
                bs._call(self._enqueue_all(bs, pending))

    def stop(self) -> None:
        """Stop running; unfinished tasks stay pending and run after the next ``start()``."""
        with self._lock:
            bs = self._bs
            if bs is None:
                return
            self._worker_seconds += bs.snapshot().pool(POOL).worker_seconds  # type: ignore[union-attr]
            self._bs = None
        bs.shutdown(0.0)

    def __enter__(self) -> ElasticPriorityScheduler:
        self.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    # ------------------------------------------------------------------ tasks

    async def _run(self, ctx: TaskContext, task: Task) -> None:
        with self._state:
            worker = self._free_workers.pop(0) if self._free_workers else -1
        start = time.time()
        try:
            await asyncio.sleep(max(0.0, task.duration))
        except BaseException:
            with self._state:
                if worker >= 0:
                    self._free_workers.append(worker)
                    self._free_workers.sort()
            raise
        end = time.time()
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

        The same arithmetic as the engine's (SPEC §6): a window ``[start - tolerance, start +
        duration + tolerance]``, at most ``max(1, floor(max_workers * 0.5))`` overlapping.
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

    def _worker_seconds_now(self) -> float:
        bs = self._bs
        ws = self._worker_seconds
        if bs is not None:
            p = bs.snapshot().pool(POOL)
            ws += p.worker_seconds if p is not None else 0.0
        return ws

    def get_metrics(self) -> QualityMetrics:
        with self._lock:
            bs = self._bs
            snap = bs.snapshot().pool(POOL) if bs is not None else None
        with self._state:
            completed = list(self._completed)
            span = (
                (self._last_end - self._first_start)
                if self._first_start is not None and self._last_end is not None
                else 0.0
            )
            workers = snap.capacity if snap is not None else self.config.initial_workers
            provisioned = span * max(1, workers)
            quality = min(1.0, self._work_done / provisioned) if provisioned > 0 else 0.0
            waits = [
                max(0.0, c.start_time - self._submitted_at.get(c.task.id, c.start_time)) for c in completed
            ]
            return QualityMetrics(
                schedule_quality=quality,
                priority_adherence=snap.priority_adherence if snap is not None else 1.0,
                fixed_schedule_hits=self._fixed_hits / self._fixed_total if self._fixed_total else 1.0,
                utilization=min(1.0, max(0.0, snap.utilization)) if snap is not None else 0.0,
                avg_wait_time=sum(waits) / len(waits) if waits else 0.0,
                pending_count=len(self._pending),
                worker_count=workers,
            )

    def get_cost(self) -> float:
        with self._lock:
            return max(0.0, self._worker_seconds_now() * self.config.worker_cost_per_second)
