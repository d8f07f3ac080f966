"""``TaskHandle``: a cheap, awaitable view of one task's outcome.

One asyncio future per task (shared by every handle of that task) carries the outcome:
the executor's return value, or :class:`~cronoq.errors.TaskFailed` (:func:`set_outcome`
settles it from the task's terminal state).  Cancelling one awaiter must never cancel that
shared future, so an ``await handle`` of a task still running waits on a future of its own,
which the scheduler settles together with the shared one
(:meth:`~cronoq.runtime.started.Started.wait_for`: one wake-up, where ``asyncio.shield`` would
add a callback hop per outcome); :meth:`TaskHandle.result` goes through ``asyncio.shield``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Generator
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from cronoq.engine.model import OUTPUT_LOST, STATUS_NAMES, SUCCEEDED
from cronoq.errors import TaskFailed

if TYPE_CHECKING:
    from cronoq.engine.model import TaskState
    from cronoq.runtime.scheduler import Scheduler

#: the type of the task's output (``TaskHandle[int]``); a bare ``TaskHandle`` is ``TaskHandle[Any]``
R = TypeVar("R")


class TaskHandle(Generic[R]):
    """Resolves with the task's output once it reaches a terminal status."""

    __slots__ = ("_fut", "_sched", "duplicate", "id")

    def __init__(self, sched: Scheduler, task_id: int, duplicate: bool, fut: asyncio.Future[Any]) -> None:
        self.id = task_id
        self.duplicate = duplicate
        self._fut = fut
        self._sched = sched

    def __await__(self) -> Generator[Any, None, R]:
        fut = self._fut
        if fut.done():
            return fut.result()
        run = self._sched._run
        if run is None:  # pragma: no cover - a pending shared future belongs to a live start
            return (yield from asyncio.shield(fut).__await__())
        return (yield from run.wait_for(self.id, fut).__await__())

    def result(self) -> asyncio.Future[R]:
        """An awaitable with the same outcome as ``await handle``."""
        return asyncio.shield(self._fut)

    def done(self) -> bool:
        """True once the outcome is known."""
        return self._fut.done()

    def cancel(self) -> bool:
        """Request cancellation; takes effect before the next dispatch decision.  It does not
        wait for a durable store's commit: ``await sched.cancel(handle.id)`` does."""
        return self._sched.seam.cancel(self.id)

    def __repr__(self) -> str:
        state = "done" if self._fut.done() else "pending"
        return f"<TaskHandle id={self.id} {state}{' duplicate' if self.duplicate else ''}>"


def set_outcome(fut: asyncio.Future[Any], t: TaskState) -> None:
    """Settle a task's shared future from its terminal state: its output, or ``TaskFailed``."""
    if fut.done():
        return
    if t.status == SUCCEEDED and t.output is not OUTPUT_LOST:
        fut.set_result(t.output)
    elif t.status == SUCCEEDED:  # (as the published implementation: never a silent None)
        msg = f"task {t.id} succeeded, but its output is no longer available"
        fut.set_exception(TaskFailed("succeeded", msg, t.id))
        fut.exception()
    else:
        fut.set_exception(TaskFailed(STATUS_NAMES[t.status], t.message or "", t.id))
        fut.exception()  # handles need not be awaited: never log "exception never retrieved"
