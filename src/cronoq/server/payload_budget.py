"""The byte budget of payloads held in memory (``limits.max_pending_bytes``).

Theory of operation
-------------------
A task's payload stays in the leader's memory from submission until the task ends (the
engine then drops it).  Counting tasks alone does not bound that memory: 150 pending tasks of
4 MiB put a leader at 724 MB, and a few hundred would crash-loop it in a 1 GiB pod.  So the
server counts the bytes of the payloads it holds and refuses a submission that would go past
``limits.max_pending_bytes`` with ``overloaded`` (429 / RESOURCE_EXHAUSTED), like
``max_pending_total``.

The count follows the payload objects themselves: :meth:`PayloadBudget.hold` adds a
payload's size and registers a ``weakref.finalize`` that subtracts it when the last reference
goes (the task ended, was shed or cancelled; a lease sent to a worker no longer refers to it),
so it is exact without hooks in the engine.  Payloads under :data:`MIN_COUNTED` bytes are not
counted (their number is bounded by ``max_pending_total``), keeping the per-task cost of
small tasks at nothing.  After a takeover the recovered live tasks' payloads are held anew
(:meth:`hold_recovered`).
"""

from __future__ import annotations

import weakref
from collections.abc import Iterable
from typing import Final

from cronoq.server.workers import Blob

__all__ = ["MIN_COUNTED", "PayloadBudget"]

#: payloads smaller than this are not counted (bounded by max_pending_total instead)
MIN_COUNTED: Final = 256


class PayloadBudget:
    """Bytes of counted payloads held, against ``limit`` (module docstring)."""

    __slots__ = ("__weakref__", "held", "limit")

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.held = 0

    def fits(self, sizes: Iterable[int]) -> bool:
        """Whether payloads of these sizes may be added."""
        extra = sum(n for n in sizes if n >= MIN_COUNTED)
        return extra == 0 or self.held + extra <= self.limit

    def hold(self, blob: Blob) -> None:
        """Count ``blob`` until it is garbage (once per payload object)."""
        n = len(blob.data)
        if n < MIN_COUNTED:
            return
        self.held += n
        weakref.finalize(blob, _release, weakref.ref(self), n)

    def hold_recovered(self, payloads: Iterable[object]) -> None:
        for p in payloads:
            if isinstance(p, Blob):
                self.hold(p)


def _release(budget_ref: weakref.ref[PayloadBudget], n: int) -> None:
    budget = budget_ref()
    if budget is not None:
        budget.held -= n
