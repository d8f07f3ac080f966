"""The leader's bounded cache of recent task outputs (``[outputs]``,
docs/reference/config.md#outputs).

Theory of operation
-------------------
A finished task stays in the engine (its record answers ``Get``/``Wait``, its key stays
reserved) for ``limits.key_retention_s`` and at most ``min(limits.key_retention_max,
outputs.info_entries)`` records (the engine's own retention, set by ``ServerApp``).  Outputs
are the heavy part of a record, so they have their own, smaller bound: :class:`OutputCache`
remembers the succeeded tasks' outputs in completion order and, once there are more than
``cache_entries`` of them or they hold more than ``cache_bytes`` bytes (data plus content
type), drops the oldest outputs from the engine (``EngineCore.forget_output``); the newest
output always stays (it is noted just before the engine records it), even one larger than
``cache_bytes``, until the next one arrives.  Such a task
answers as one whose output is lost: ``status`` succeeded, ``output`` unset,
``output_available`` false (docs/reference/behaviour.md#task-result).  The durable store
keeps its copy for ``store.keep_finished_s``; the next leader's recovery reads those back
under the same bounds.

Outputs are noted as the remote executor returns them (``ServerApp`` wraps each pool's
executor) and, at the start of a leadership term, from what recovery brought back (oldest
first).  A note for an attempt the engine then refused (a stale report) is harmless: the drop
only happens when the task still holds that very output object.  Entries whose task no
longer holds its output (forgotten by the engine's retention, or a stale report) leave the
front of the queue as soon as they reach it (``held``), so they do not keep bytes alive or
count against the bounds for long.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable

from cronoq.server.workers import Blob

__all__ = ["OutputCache", "blob_size"]


def blob_size(blob: Blob) -> int:
    """The bytes an output holds in the cache: its data and content type."""
    return len(blob.data) + len(blob.content_type)


class OutputCache:
    """Recent outputs, oldest first, bounded by count and bytes (see the module docstring)."""

    __slots__ = ("_drop", "_entries", "_held", "bytes", "max_bytes", "max_entries")

    def __init__(
        self,
        max_entries: int,
        max_bytes: int,
        drop: Callable[[int, Blob], object],
        held: Callable[[int, Blob], bool] = lambda tid, blob: True,
    ) -> None:
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        #: ``drop(task_id, blob)``: forget that output (``EngineCore.forget_output``)
        self._drop = drop
        #: ``held(task_id, blob)``: whether the task still holds that output
        self._held = held
        self._entries: deque[tuple[int, Blob, int]] = deque()
        self.bytes = 0

    def __len__(self) -> int:
        return len(self._entries)

    def note(self, task_id: int, blob: Blob) -> None:
        """``task_id`` succeeded with ``blob``; evict the oldest outputs beyond the bounds."""
        n = blob_size(blob)
        self._entries.append((task_id, blob, n))
        self.bytes += n
        entries = self._entries
        # (the newest entry stays: its task gets the output only after this note)
        while len(entries) > 1 and not self._held(entries[0][0], entries[0][1]):
            self.bytes -= entries.popleft()[2]
        while len(entries) > 1 and (len(entries) > self.max_entries or self.bytes > self.max_bytes):
            tid, old, size = entries.popleft()
            self.bytes -= size
            self._drop(tid, old)

    def note_recovered(self, outputs: Iterable[tuple[int, Blob]]) -> None:
        """Outputs recovery brought back, oldest first."""
        for tid, blob in outputs:
            self.note(tid, blob)
