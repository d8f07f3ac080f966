"""Progress of running attempts: the latest report per task and its rate-limited publication.

Theory of operation
-------------------
An attempt may report how far it is (``ctx.progress(done, total, message)`` in-process,
``lease.progress(...)`` on a remote worker; docs/how-to/progress.md).  The shell validates the
values once (:func:`check_progress`) and hands them to :meth:`ProgressTracker.report` with the
attempt's lease and ``now``; a report for a lease that is not current is ignored (False), so
progress is never recorded for a task that is not running.

* **Latest value.**  Each report replaces the task's :class:`Progress` at once (reads never
  lag).  A value belongs to one attempt: :meth:`ProgressTracker.latest` answers None once a
  newer attempt was dispatched (progress resets on a new attempt), and keeps the last value of
  a task that ended, as long as the task is retained.
* **Publication.**  While anyone subscribes with ``progress=True`` (:attr:`publish`), a report
  becomes a :class:`ProgressEvent` in a :class:`PublishProgress` action, at most one per task
  per :data:`PROGRESS_INTERVAL` (4 per second): the first report after a quiet interval is
  published at once; reports inside the interval only replace the held value (newest wins)
  and one ``T_PROGRESS`` timer, armed at the end of the interval, publishes the newest of them
  (the trailing update).  The timer is live only while the same attempt runs
  (``timers.py``): a value still held when the attempt ends is dropped, the status event that
  ends the attempt says more.
* **Not durable.**  Progress lives in this tracker only: a restart or failover forgets it
  (the next report of a running attempt sets it again).

Entries are keyed by task id and forgotten when the core prunes the task.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from cronoq.engine.time import NS
from cronoq.engine.timers import T_PROGRESS

if TYPE_CHECKING:
    from cronoq.engine.core import Core
    from cronoq.engine.model import TaskState

#: At most one progress event per task per this many ns (4 per second).
PROGRESS_INTERVAL: Final = NS // 4

#: The longest progress message accepted (characters).
MAX_PROGRESS_MESSAGE: Final = 1024


@dataclass(frozen=True, slots=True)
class Progress:
    """The latest progress an attempt reported (docs/how-to/progress.md).

    ``done`` of ``total`` (None: no known total), an optional ``message``, when it was
    reported (``at``, Unix seconds) and by which ``attempt``.
    """

    done: float
    total: float | None
    message: str | None
    at: float
    attempt: int


@dataclass(frozen=True, slots=True)
class ProgressEvent:
    """A progress update as published to ``events(progress=True)`` subscribers (at most 4 per
    second per task, newest wins; docs/how-to/progress.md#event-streams)."""

    id: int
    pool: str
    key: str | None
    attempt: int
    done: float
    total: float | None
    message: str | None
    at: float


class PublishProgress:
    """Deliver a progress event to the subscribers that asked for them."""

    __slots__ = ("event",)

    def __init__(self, event: ProgressEvent) -> None:
        self.event = event

    def __repr__(self) -> str:
        return f"PublishProgress({self.event!r})"


def check_progress(
    done: object, total: object = None, message: object = None
) -> tuple[float, float | None, str | None]:
    """The validated values of a progress report, or ValueError saying what is wrong.

    ``done`` a finite number ≥ 0; ``total`` None or a finite number > 0, and then
    ``done <= total``; ``message`` None or a string of at most 1,024 characters.
    """
    if isinstance(done, bool) or not isinstance(done, (int, float)):
        raise ValueError(f"progress done must be a number (got {done!r})")
    d = float(done)
    if not math.isfinite(d) or d < 0:
        raise ValueError(f"progress done must be finite and >= 0 (got {done!r})")
    tot: float | None = None
    if total is not None:
        if isinstance(total, bool) or not isinstance(total, (int, float)):
            raise ValueError(f"progress total must be a number or None (got {total!r})")
        tot = float(total)
        if not math.isfinite(tot) or tot <= 0:
            raise ValueError(f"progress total must be finite and > 0 (got {total!r})")
        if d > tot:
            raise ValueError(f"progress done ({done!r}) must not exceed total ({total!r})")
    if message is not None:
        if not isinstance(message, str):
            raise ValueError(f"progress message must be a string or None (got {type(message).__name__})")
        if len(message) > MAX_PROGRESS_MESSAGE:
            raise ValueError(
                f"progress message is too long ({len(message)} characters, at most {MAX_PROGRESS_MESSAGE})"
            )
    return d, tot, message


class _Track:
    """One task's latest progress and the state of its rate limit."""

    __slots__ = ("armed", "dirty", "last_pub", "value")

    def __init__(self, value: Progress) -> None:
        self.value = value
        self.last_pub = -PROGRESS_INTERVAL  # engine ns of the last event published (none yet)
        self.armed = False  # a T_PROGRESS timer is pending for the current attempt
        self.dirty = False  # the value was not published yet


class ProgressTracker:
    """The latest progress of each task and its publication (see the module docstring)."""

    __slots__ = ("by_task", "core", "publish")

    def __init__(self, core: Core) -> None:
        self.core = core
        self.by_task: dict[int, _Track] = {}
        self.publish = False  # set by the shell while anyone subscribes with progress=True

    def report(self, now: int, lease: int, done: float, total: float | None, message: str | None) -> bool:
        """The attempt under ``lease`` reports progress (values checked by :func:`check_progress`).

        False when the lease is not current (the attempt ended or never was): nothing changes.
        """
        core = self.core
        t = core.leases.get(lease)
        if t is None:
            return False
        value = Progress(done, total, message, (core.config.time_base + now) / NS, t.attempt)
        tr = self.by_task.get(t.id)
        if tr is None:
            tr = self.by_task[t.id] = _Track(value)
        elif tr.value.attempt != t.attempt:  # a new attempt: its own rate limit
            tr.value = value
            tr.last_pub = -PROGRESS_INTERVAL
            tr.armed = False
        else:
            tr.value = value
        if not self.publish:
            tr.dirty = False
            return True
        if now - tr.last_pub >= PROGRESS_INTERVAL:
            self._emit(t, tr, now)
        else:
            tr.dirty = True
            if not tr.armed:
                tr.armed = True
                core.timers.push(tr.last_pub + PROGRESS_INTERVAL, T_PROGRESS, t, t.attempt)
        return True

    def flush(self, t: TaskState, now: int) -> None:
        """A ``T_PROGRESS`` timer of the running attempt fired: publish the held value, if any."""
        tr = self.by_task.get(t.id)
        if tr is None:
            return
        tr.armed = False
        if tr.dirty and self.publish and tr.value.attempt == t.attempt:
            self._emit(t, tr, now)

    def _emit(self, t: TaskState, tr: _Track, now: int) -> None:
        v = tr.value
        tr.last_pub = now
        tr.dirty = False
        core = self.core
        ev = ProgressEvent(
            t.id, core.pools[t.opts.pool_index].name, t.key, v.attempt, v.done, v.total, v.message, v.at
        )
        core.actions.append(PublishProgress(ev))

    def latest(self, t: TaskState) -> Progress | None:
        """The progress of ``t``'s latest attempt (None: none reported by it)."""
        tr = self.by_task.get(t.id)
        if tr is None or tr.value.attempt != t.attempt:
            return None
        return tr.value
