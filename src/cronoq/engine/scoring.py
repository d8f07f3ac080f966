"""Dispatch scores (docs/reference/behaviour.md#score): base priority, aging, deadline urgency.

Theory of operation
-------------------
A ready task's score is its class's base, plus aging (a per-class rate per second waited
since it became ready, capped per class), plus, for a task with a deadline, an urgency that
grows as its slack (latest start - now) shrinks: 0 while the slack is at least the window
(the configured window, or the task's expected duration if longer), linear up to ``max`` at
zero slack, then ``overdue_rate`` per second overdue, capped.  Within a class, lanes keep
tasks in sequence order (and deadline tasks by latest start), so only each lane's heads can
be the best: :meth:`Scorer.pick` scores the FIFO and deadline heads of the non-empty classes
and takes the highest, ties to the lower id.  When no lane involved holds a deadline task and
the first non-empty class's base exceeds every other one's base + age cap (true of every higher
class over every lower one with the defaults), that pick is known without scoring:
:meth:`Scorer.head_wins` lets the dispatch loop go straight down that class's FIFO.  The
configuration is flattened into per-ns tuples once, for the dispatch loop.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from cronoq.engine.config import PriorityConfig, UrgencyConfig
from cronoq.engine.model import TaskState
from cronoq.engine.time import NS, to_ns

if TYPE_CHECKING:
    from cronoq.engine.fairness import FairLane
    from cronoq.engine.lanes import Lane


class Scorer:
    """The score function of one core's configuration (see the module docstring)."""

    __slots__ = ("base", "beats", "cap", "rate", "u_max", "u_overdue_cap", "u_overdue_rate", "u_window")

    def __init__(self, pc: PriorityConfig, uc: UrgencyConfig) -> None:
        self.base = pc.base
        self.rate = tuple(r / NS for r in pc.aging_rate)  # per ns
        self.cap = pc.age_cap
        self.u_max = uc.max
        self.u_window = to_ns(uc.window)
        self.u_overdue_rate = uc.overdue_rate / NS
        self.u_overdue_cap = uc.overdue_cap
        #: per class, the classes any of whose heads without a deadline it outscores whatever
        #: their wait (its base above their base + age cap; with the defaults every higher class
        #: beats every lower one): :meth:`head_wins` picks without scoring
        self.beats = tuple(
            frozenset(d for d in range(len(pc.base)) if pc.base[c] > pc.base[d] + pc.age_cap[d])
            for c in range(len(pc.base))
        )

    def head_wins(self, lanes: Sequence[Lane | FairLane], classes: Sequence[int]) -> bool:
        """Whether :meth:`pick` of ``classes`` (non-empty, in class order) is the FIFO head of the
        first, known without scoring: no deadline task in any of them (urgency is unbounded by
        class) and the first class beats every other one."""
        c = classes[0]
        if lanes[c].dl:
            return False
        beats = self.beats[c]
        for d in classes[1:]:
            if d not in beats or lanes[d].dl:
                break
        else:
            return True
        return False

    def pick(
        self, lanes: Sequence[Lane | FairLane], classes: Iterable[int], now: int
    ) -> tuple[TaskState, bool]:
        """Highest score among the lane heads of ``classes`` (non-empty, in class order); ties
        to the lower id.  Also whether the pick jumped ahead of the first of those classes."""
        best: TaskState | None = None
        best_score = -1.0
        best_class = 0
        first_class = -1
        base, rate, cap = self.base, self.rate, self.cap
        for c in classes:
            if first_class < 0:
                first_class = c
            lane = lanes[c]
            for t in (lane.fifo_head(), lane.dl_head()):
                if t is None:
                    continue
                age = rate[c] * (now - t.ready_at)
                score = base[c] + (age if age < cap[c] else cap[c])
                if t.deadline is not None:
                    score += self.urgency(t, now)
                if score > best_score or (score == best_score and best is not None and t.id < best.id):
                    best, best_score, best_class = t, score, c
        if best is None:  # pragma: no cover - callers check pool.ready
            raise AssertionError("no ready task although pool.ready > 0")
        return best, best_class != first_class

    def urgency(self, t: TaskState, now: int) -> float:
        slack = t.latest_start - now
        expected = (t.deadline or 0) - t.latest_start
        w = self.u_window if self.u_window > expected else expected
        if slack >= w:
            return 0.0
        if slack >= 0:
            return self.u_max * (1.0 - slack / w) if w > 0 else self.u_max
        over = self.u_overdue_rate * -slack
        return self.u_max + (over if over < self.u_overdue_cap else self.u_overdue_cap)

    def score(self, t: TaskState, now: int) -> float:
        """The dispatch score of a ready task."""
        c = t.opts.priority
        age = self.rate[c] * (now - t.ready_at)
        s = self.base[c] + min(age, self.cap[c])
        if t.deadline is not None:
            s += self.urgency(t, now)
        return s
