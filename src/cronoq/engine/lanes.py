"""Ready queues of one pool: per priority class a FIFO lane and a deadline heap
(docs/reference/behaviour.md#ordering).

Theory of operation
-------------------
Each class has three structures; a ready task is in exactly one of them:

* ``fifo`` — a deque in ascending submission sequence.  Tasks without a deadline that become
  ready in sequence order (the common case: fresh submissions) are appended here, O(1).
* ``late`` — a heap by sequence for tasks without a deadline that became ready out of order
  (retries, which keep their original position; recovered or released tasks).  The lane's
  FIFO head is the smaller-sequence head of ``fifo`` and ``late``.
* ``dl`` — a heap by latest start (``deadline - expected duration``) for deadline tasks; its
  head is the most urgent deadline task of the class.

"Sequence" here is submission order, compared by task id: ``(epoch << 48) | seq`` keeps tasks
recovered from an earlier epoch ahead of newer ones (sequence numbers restart per epoch).

Entries carry the ``lane_token`` the task had when pushed; a task that left the ready state
(dispatched, cancelled, shed, missed) is dropped lazily when it reaches a head.  Dispatch
therefore inspects at most 2 heads per class: O(classes + log n).

The FIFO holds the bare task records, no ``(token, task)`` pair: its ids strictly increase, so
a task is in it at most once (a task whose stale entry is still there has an id no greater than
the tail's and goes to ``late``).  A task pushed there gets the token :data:`IN_FIFO`, which no
heap entry carries (the core's tokens start above it), so its FIFO entry is valid exactly while
it is ready with that token.  That saves a tuple and a token int per queued task (~96 B).

The score of a head is ``base + min(aging_rate * wait_s, age_cap) + urgency``
(docs/reference/behaviour.md#score, docs/reference/behaviour.md#urgency).
"""

from __future__ import annotations

import heapq
from collections import deque
from typing import Final

from cronoq.engine.model import READY, TaskState

#: ``lane_token`` of a task whose lane entry is in a FIFO (the core's tokens are all above it)
IN_FIFO: Final = 1


class Lane:
    __slots__ = ("dl", "fifo", "late")

    def __init__(self) -> None:
        self.fifo: deque[TaskState] = deque()
        self.late: list[tuple[int, int, TaskState]] = []
        self.dl: list[tuple[int, int, int, TaskState]] = []

    def push(self, t: TaskState, token: int) -> None:
        if t.deadline is not None:
            t.lane_token = token
            heapq.heappush(self.dl, (t.latest_start, t.id, token, t))
            return
        fifo = self.fifo
        if not fifo or fifo[-1].id < t.id:
            t.lane_token = IN_FIFO
            fifo.append(t)
        else:
            t.lane_token = token
            heapq.heappush(self.late, (t.id, token, t))

    def fifo_head(self) -> TaskState | None:
        """The valid ready task with the lowest sequence among fifo and late (not removed)."""
        fifo = self.fifo
        while fifo:
            t = fifo[0]
            if t.status == READY and t.lane_token == IN_FIFO:
                break
            fifo.popleft()
        late = self.late
        while late:
            _, tok, lt = late[0]
            if lt.status == READY and lt.lane_token == tok:
                break
            heapq.heappop(late)
        if fifo:
            if late and late[0][0] < fifo[0].id:
                return late[0][2]
            return fifo[0]
        if late:
            return late[0][2]
        return None

    def dl_head(self) -> TaskState | None:
        dl = self.dl
        while dl:
            _, _, tok, t = dl[0]
            if t.status == READY and t.lane_token == tok:
                return t
            heapq.heappop(dl)
        return None

    def newest(self) -> TaskState | None:
        """The valid ready task with the highest sequence (for shedding; rare, may scan)."""
        best: TaskState | None = None
        fifo = self.fifo
        while fifo:
            t = fifo[-1]
            if t.status == READY and t.lane_token == IN_FIFO:
                best = t
                break
            fifo.pop()
        for _, tok, t in self.late:
            if t.status == READY and t.lane_token == tok and (best is None or t.id > best.id):
                best = t
        for _, _, tok, t in self.dl:
            if t.status == READY and t.lane_token == tok and (best is None or t.id > best.id):
                best = t
        return best

    def oldest(self) -> TaskState | None:
        """The valid ready task with the lowest sequence, deadline tasks included."""
        best = self.fifo_head()
        for _, _, tok, t in self.dl:
            if t.status == READY and t.lane_token == tok and (best is None or t.id < best.id):
                best = t
        return best

    def __len__(self) -> int:
        return len(self.fifo) + len(self.late) + len(self.dl)
