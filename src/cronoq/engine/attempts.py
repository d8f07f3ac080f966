"""Attempt timelines and dependency links of tasks: what a task's detail view shows.

Theory of operation
-------------------
The hot path keeps only the current attempt on ``TaskState`` (``attempt``,
``attempt_started``, ``status``, ``message``, ``finished_at``).  That is enough to describe the
latest attempt of any task, so nothing is recorded for a task that runs once; this log only
keeps what the task record forgets:

* **Ended attempts that did not end the task** (a retryable failure, a timeout, a lost lease):
  the core calls :meth:`AttemptLog.ended` just before the task moves to ``retrying``, and the
  attempt's number, start, end, worker, outcome and message become an :class:`AttemptRecord`
  (the last :data:`MAX_ATTEMPTS` are kept).  :meth:`AttemptLog.timeline` adds the latest
  attempt from the task record itself (``running`` while it runs).
* **Worker names**: a shell that runs attempts elsewhere names the worker that took a lease
  (:meth:`AttemptLog.set_worker`, the server for its remote workers); in-process attempts have
  no worker name (``""``).
* **Dependency links**: a submission with dependencies records each edge's child id on its
  parent (:meth:`AttemptLog.link_plan`, after the core linked them), at most
  :data:`MAX_LINKS` per task, because the engine's own edge lists are consumed when a parent
  ends.  Edges to keys nobody submitted yet are recorded when a task provides the key in the
  same submission; one bound later (``bind_awaited`` from another submission) is recorded the
  same way, by the providing submission.  The other direction needs no log: a dependent's
  ``TaskState.parents`` (engine/parents.py) keeps one entry per edge for good, so its parent
  ids are read from there (the bound ones, at most :data:`MAX_LINKS`), and a pending
  dependent costs no log entry.
* **Not durable**: like progress, this lives in memory only; after a restart or failover a
  task's timeline starts with its latest attempt as the store knows it, and its children
  are those recorded since (its parents are its recovered edges).

Entries are keyed by task id and forgotten when the core prunes the task.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from cronoq.engine.model import (
    FIRST_TERMINAL,
    MSG_LEASE_LOST,
    MSG_TIMEOUT,
    RETRYING,
    RUNNING,
    STATUS_NAMES,
    SUCCEEDED,
)
from cronoq.engine.parents import Ref
from cronoq.engine.progress import Progress
from cronoq.engine.time import NS

if TYPE_CHECKING:
    from cronoq.engine.admission import Plan
    from cronoq.engine.core import Core
    from cronoq.engine.model import TaskState

#: Attempts kept per task (the latest ones).
MAX_ATTEMPTS: Final = 20

#: Parent and child links kept per task and direction.
MAX_LINKS: Final = 1000

_E_TASK: Final = 0  # (admission.E_TASK: an edge to an existing live task)


@dataclass(frozen=True, slots=True)
class AttemptRecord:
    """One attempt of a task (docs/how-to/progress.md#attempts).

    ``started_at`` / ``ended_at`` are Unix seconds (``ended_at`` None while it runs);
    ``worker`` is the remote worker's name ("" in-process); ``outcome`` is ``running``,
    ``succeeded``, ``failed``, ``timed_out``, ``lease_lost``, ``cancelled`` or the task's
    terminal status; ``message`` the failure message, if any.
    """

    number: int
    started_at: float | None
    ended_at: float | None
    worker: str
    outcome: str
    message: str | None


@dataclass(frozen=True, slots=True)
class TaskExtras:
    """What the engine keeps beside a task record for its detail view (in memory only)."""

    progress: Progress | None
    attempts: list[AttemptRecord]
    parents: list[int]
    children: list[int]
    #: why the task is not running, "" when it runs or has finished (engine/waiting.py)
    waiting: str = ""


def _failure_outcome(message: str | None) -> str:
    if message == MSG_TIMEOUT:
        return "timed_out"
    if message == MSG_LEASE_LOST:
        return "lease_lost"
    return "failed"


class _Log:
    __slots__ = ("children", "ended", "worker", "worker_attempt")

    def __init__(self) -> None:
        self.ended: deque[AttemptRecord] | None = None
        self.worker = ""
        self.worker_attempt = 0
        self.children: list[int] | None = None


class AttemptLog:
    """Per-task attempt records, worker names and dependency links (see the module docstring)."""

    __slots__ = ("by_task", "core")

    def __init__(self, core: Core) -> None:
        self.core = core
        self.by_task: dict[int, _Log] = {}

    def _log(self, tid: int) -> _Log:
        log = self.by_task.get(tid)
        if log is None:
            log = self.by_task[tid] = _Log()
        return log

    def _unix(self, ns: int | None) -> float | None:
        return None if ns is None else (self.core.config.time_base + ns) / NS

    def set_worker(self, lease: int, name: str) -> bool:
        """The attempt under ``lease`` runs on worker ``name``; False when the lease is not current."""
        t = self.core.leases.get(lease)
        if t is None:
            return False
        log = self._log(t.id)
        log.worker = name
        log.worker_attempt = t.attempt
        return True

    def ended(self, t: TaskState, now: int, message: str | None) -> None:
        """The running attempt of ``t`` ended without ending the task (it will be retried)."""
        log = self._log(t.id)
        if log.ended is None:
            log.ended = deque(maxlen=MAX_ATTEMPTS)
        worker = log.worker if log.worker_attempt == t.attempt else ""
        log.ended.append(
            AttemptRecord(
                t.attempt,
                self._unix(t.attempt_started),
                self._unix(now),
                worker,
                _failure_outcome(message),
                message,
            )
        )

    def timeline(self, t: TaskState) -> list[AttemptRecord]:
        """The last :data:`MAX_ATTEMPTS` attempts of ``t``, oldest first (the latest one from
        the task record: ``running`` while it runs)."""
        log = self.by_task.get(t.id)
        out = list(log.ended) if log is not None and log.ended else []
        last = out[-1].number if out else 0
        if t.attempt > last and t.status != RETRYING:
            st = t.status
            ended: float | None = None
            if st == RUNNING:
                outcome = "running"
            elif st == SUCCEEDED:
                outcome = "succeeded"
                ended = self._unix(t.finished_at)
            elif st >= FIRST_TERMINAL:
                name = STATUS_NAMES[st]
                outcome = _failure_outcome(t.message) if name in ("failed", "dead_lettered") else name
                ended = self._unix(t.finished_at)
            else:  # ready or blocked with an earlier attempt: recovered after a restart
                outcome = "unknown"
            worker = log.worker if log is not None and log.worker_attempt == t.attempt else ""
            msg = None if st in (SUCCEEDED, RUNNING) else t.message
            out.append(AttemptRecord(t.attempt, self._unix(t.attempt_started), ended, worker, outcome, msg))
        return out[-MAX_ATTEMPTS:]

    # ---------------------------------------------------------------- dependency links

    def _link(self, parent: int, child: int) -> None:
        p = self._log(parent)
        if p.children is None:
            p.children = [child]
        elif len(p.children) < MAX_LINKS:
            p.children.append(child)

    def link(self, parent: int, child: int) -> None:
        """Record that ``parent`` spawned ``child`` (engine/parking.py), as an edge's link."""
        self._link(parent, child)

    def link_plan(self, plan: Plan, created: list[TaskState | None]) -> None:
        """Record the edges a submission just linked (``Core._submit_items``)."""
        for m in created:
            if m is not None and m.dependents:
                for child in m.dependents:
                    self._link(m.id, child.id)
        for i, ol in enumerate(plan.other):
            member = created[i]
            if ol is None or member is None:
                continue
            for kind, target, _cond in ol:
                if kind == _E_TASK:
                    self._link(target.id, member.id)

    def parents(self, t: TaskState) -> list[int]:
        out: list[int] = []
        for p in t.parents or ():
            if type(p) is int:
                out.append(p)
            elif type(p) is not Ref:  # (a record: a Ref is not bound to a task yet)
                out.append(p.id)
        return out[:MAX_LINKS]

    def children(self, t: TaskState) -> list[int]:
        log = self.by_task.get(t.id)
        return list(log.children) if log is not None and log.children else []
