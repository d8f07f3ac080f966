"""Admission: what a submission is, and whether it can be admitted (placeholder header)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from cronoq.engine.model import TaskOptions


class BatchItem(NamedTuple):
    """One member of a submission: what ``Core.submit`` takes, as one value.

    ``deadline`` and ``start_at`` are engine instants (ns); ``deps`` are ``(target id or key,
    edge condition)`` pairs; ``blob`` is the payload as the shell's codec encoded it (durable
    stores only).  ``Core.submit_batch`` also accepts plain 6- or 7-tuples in this order.
    """

    opts: TaskOptions
    payload: object
    key: str | None
    deadline: int | None
    start_at: int | None
    deps: Sequence[tuple[int | str, int]] | None
    blob: bytes | None = None
