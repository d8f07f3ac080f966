"""The engine's timer heap: every deferred piece of work, and whether it is still wanted.

Theory of operation
-------------------
One binary heap of ``(when, n, kind, subject, token)`` holds every timer of a core: ``n`` is a
push counter, so entries never compare past it and equal instants fire in push order (the
engine stays deterministic).  Nothing is ever removed from the middle of the heap: a timer
that is no longer wanted is left in place and dropped when it surfaces, so the liveness of
an entry is decided when it is looked at, by its kind, in :meth:`Timers.live`:

* task timers (retry backoff, attempt timeout, lease expiry, fixed start, hold, miss, await
  timeout, progress flush, a parked task's wake-up) carry the task as subject and a token
  (the attempt, the lease, or 0); they are live while the task is still in the status (and
  attempt or lease) they were armed for;
* a recurring wake-up (``T_RECUR``) carries a schedule generation as token: live while that
  generation is registered here (:meth:`arm_recur` registers, :meth:`take_recur` consumes);
  a schedule re-armed or replaced gets a new generation, which retires the old entry;
* an autoscaler evaluation (``T_SCALE``, pool index as token) and a token-bucket refill
  (``T_REFILL``, the resource name as subject) are always live; one wake-up per bucket is
  kept armed (:meth:`arm_refill`), the earliest still ahead.

The heap list itself is public (``heap``) because the core's ``tick`` drains due entries in
a tight loop; everything that pushes goes through this class.
"""

from __future__ import annotations

import heapq
from typing import TYPE_CHECKING, Any

from cronoq.engine.model import BLOCKED, READY, RETRYING, RUNNING, SCHEDULED, TaskState

if TYPE_CHECKING:
    from cronoq.engine.recurring import Schedule

# timer kinds
T_RETRY = 0  # backoff over: retrying -> ready (token = the attempt)
T_TIMEOUT = 1  # attempt timeout (token = the lease)
T_LEASE = 2  # lease expiry (token = the lease); re-armed when a heartbeat moved it
T_START = 3  # fixed start reached: scheduled -> ready
T_HOLD = 4  # start - max_hold: hold a slot
T_MISS = 5  # start + tolerance: apply on_miss if not started
T_AWAIT = 6  # await_timeout of an edge to an unknown key
T_RECUR = 7  # a recurring occurrence comes due: materialize the next one (token = generation)
T_SCALE = 8  # autoscaler evaluation of pool ``token``
T_REFILL = 9  # a token bucket (name as subject) has refilled enough for its first waiter
T_PROGRESS = 10  # publish the progress held back by the rate limit (token = the attempt)
T_WAKE = 11  # a parked task's sleep or signal timeout is over (token = the lease it parked from)

#: A heap entry: (when, push counter, kind, subject, token)
Timer = tuple[int, int, int, Any, int]


def task_timer_live(kind: int, t: TaskState, token: int) -> bool:
    """Whether a task timer still applies: the task is where the timer was armed for."""
    st = t.status
    if kind == T_RETRY:
        return st == RETRYING and t.attempt == token
    if kind in (T_TIMEOUT, T_LEASE):
        return st == RUNNING and t.lease == token
    if kind in (T_START, T_HOLD):
        return st == SCHEDULED
    if kind == T_MISS:
        return st == SCHEDULED or (st == READY and t.fixed.in_due)
    if kind == T_PROGRESS:
        return st == RUNNING and t.attempt == token
    if kind == T_WAKE:
        return st in (BLOCKED, SCHEDULED) and t.lease == token
    return st == BLOCKED and t.awaiting > 0  # T_AWAIT


class Timers:
    """The timer heap of one core, with the registries its non-task kinds are checked against."""

    __slots__ = ("heap", "n", "recur", "recur_gen", "refill_at")

    def __init__(self) -> None:
        self.heap: list[Timer] = []
        self.n = 0
        self.recur: dict[int, Schedule] = {}  # generation -> its schedule, while its wake-up is armed
        self.recur_gen = 0
        self.refill_at: dict[str, int] = {}  # the armed wake-up of each token bucket

    def __len__(self) -> int:
        return len(self.heap)

    def push(self, when: int, kind: int, subject: Any, token: int) -> None:
        self.n += 1
        heapq.heappush(self.heap, (when, self.n, kind, subject, token))

    def live(self, kind: int, subject: Any, token: int) -> bool:
        """Whether an entry still has work to do (see the module docstring)."""
        if kind == T_RECUR:
            return token in self.recur
        if kind in (T_SCALE, T_REFILL):
            return True
        return task_timer_live(kind, subject, token)

    def next_due(self) -> int | None:
        """The instant of the earliest live entry (dead heads are dropped); None: none left."""
        heap = self.heap
        while heap:
            when, _, kind, subject, token = heap[0]
            if self.live(kind, subject, token):
                return when
            heapq.heappop(heap)
        return None

    # ---------------------------------------------------------------- recurring wake-ups

    def arm_recur(self, when: int, sched: Schedule) -> None:
        """Wake ``sched`` up at ``when`` under a new generation (retiring any older wake-up)."""
        self.recur_gen += 1
        sched.gen = self.recur_gen
        self.recur[sched.gen] = sched
        self.push(when, T_RECUR, None, sched.gen)

    def take_recur(self, token: int) -> Schedule | None:
        """The schedule a fired ``T_RECUR`` entry was armed for (None: retired meanwhile)."""
        return self.recur.pop(token, None)

    # ---------------------------------------------------------------- token-bucket refills

    def arm_refill(self, name: str, at: int, now: int) -> None:
        """Wake up at ``at`` for bucket ``name``, unless an earlier wake-up still ahead is armed."""
        armed = self.refill_at.get(name)
        if armed is None or at < armed or armed < now:
            self.refill_at[name] = at
            self.push(at, T_REFILL, name, 0)

    def refill_fired(self, name: str, when: int) -> None:
        """A ``T_REFILL`` entry for ``name`` armed for ``when`` surfaced."""
        if self.refill_at.get(name) == when:
            del self.refill_at[name]
