"""Bulk actions: cancel or replay every task matching a filter, page by page
(docs/how-to/operations.md#bulk-actions).

Theory of operation
-------------------
A :class:`TaskFilter` is validated once by the shell (engine instants, status numbers, pool
indexes).  A bulk action takes the ids of every known task when it starts
(:func:`candidates`: a list, so tasks created meanwhile - the replays themselves - are never
visited) and the shell feeds them to :func:`cancel_page` / :func:`replay_page` a page at a
time (:func:`select` the matches of a page, then :func:`cancel_all` / :func:`replay_all`;
e.g. 1,000 ids a page), yielding to its loop between pages: a million matches never hold
the scheduler for long, and each page is one ordinary engine step (its actions drained).
A task that changed between the start and its page is judged as it is when its page runs.

The filter is an AND of its criteria; ``statuses`` default to the statuses the action can
act on (not finished for cancel; finished and not succeeded for replay, plus succeeded with
``force``), and a status the action can never act on is refused by the shell up front.
``matched`` counts the tasks the filter matched, ``acted`` those the action changed (a
replay refused for a missing payload, or one whose pool is full, is matched but not acted on);
with ``limit`` at most that many tasks are matched.

A bulk replay never matches a task that already has a replay (``replayed_by``, rebuilt from
the replays' tags after a restart) unless forced (``TaskFilter.again``, the ``force`` flag):
replaying "every failed task of last night" twice replays each of them once.  The progress of
a call with a ``request_key`` is persisted page by page (:func:`note_key`, a
:class:`~cronoq.engine.mutations.BulkKeyChange`) so the shell answers a retry after a restart
or a failover with what the first call did, or finishes an interrupted one.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from cronoq.engine.keys import same_tenant
from cronoq.engine.model import FIRST_TERMINAL, SUCCEEDED, TaskState
from cronoq.engine.mutations import BulkKeyChange
from cronoq.engine.replay import replay, replayed_by
from cronoq.errors import SubmitError

if TYPE_CHECKING:
    from cronoq.engine.core import Core

__all__ = [
    "CANCELLABLE",
    "BulkResult",
    "PAGE",
    "REPLAYABLE",
    "REPLAYABLE_FORCED",
    "TaskFilter",
    "cancel_all",
    "candidates",
    "matches",
    "note_key",
    "replay_all",
    "select",
]


@dataclass(frozen=True, slots=True)
class BulkResult:
    """What a bulk action did: ``matched`` tasks matched its filter, ``acted`` of them were
    cancelled (or replayed); ``unavailable_shards`` (a sharded server, through the client) names
    the shards that could not be reached, whose tasks are not counted (docs/how-to/shards.md);
    ``resumed``: an interrupted call with the same ``request_key`` was finished, and the counts
    include what it did before the interruption."""

    matched: int
    acted: int
    unavailable_shards: tuple[str, ...] = ()
    #: the first call with this ``request_key`` was interrupted (a restart, a failover, an
    #: error) and this one finished it: ``matched`` / ``acted`` include what was done before
    resumed: bool = False


PAGE = 1000  # tasks looked at per engine step


class TaskFilter:
    """What a bulk action acts on (every given criterion must hold; see the module docstring).

    Times are engine ns; ``pools`` are pool indexes; ``statuses`` status numbers (never
    empty: the shell puts the action's eligible statuses there when none were given);
    ``again`` False leaves out the tasks that already have a replay."""

    __slots__ = (
        "again",
        "created_after",
        "created_before",
        "finished_after",
        "finished_before",
        "kinds",
        "limit",
        "pools",
        "statuses",
        "tags",
        "tenant",
    )

    def __init__(
        self,
        statuses: frozenset[int],
        *,
        pools: frozenset[int] | None = None,
        kinds: frozenset[str] | None = None,
        tags: dict[str, str] | None = None,
        tenant: str | None = None,
        created_after: int | None = None,
        created_before: int | None = None,
        finished_after: int | None = None,
        finished_before: int | None = None,
        limit: int | None = None,
        again: bool = True,
    ) -> None:
        self.again = again
        self.statuses = statuses
        self.pools = pools
        self.kinds = kinds
        self.tags = tags
        self.tenant = tenant
        self.created_after = created_after
        self.created_before = created_before
        self.finished_after = finished_after
        self.finished_before = finished_before
        self.limit = limit


def matches(t: TaskState, f: TaskFilter) -> bool:
    """Whether ``t`` matches every criterion of ``f``."""
    if t.status not in f.statuses:
        return False
    if not f.again and replayed_by(t) is not None:
        return False
    o = t.opts
    if f.pools is not None and o.pool_index not in f.pools:
        return False
    if f.kinds is not None and o.kind not in f.kinds:
        return False
    if f.tenant is not None and not same_tenant(o.tenant, f.tenant):
        return False
    if f.tags:
        tags = o.tags or {}
        for k, v in f.tags.items():
            if tags.get(k) != v:
                return False
    if f.created_after is not None and t.created_at < f.created_after:
        return False
    if f.created_before is not None and t.created_at > f.created_before:
        return False
    if f.finished_after is not None or f.finished_before is not None:
        fin = t.finished_at
        if fin is None:
            return False
        if f.finished_after is not None and fin < f.finished_after:
            return False
        if f.finished_before is not None and fin > f.finished_before:
            return False
    return True


def candidates(core: Core) -> list[int]:
    """The ids a bulk action starting now looks at, oldest first."""
    return list(core.tasks)


def select(core: Core, ids: Sequence[int], f: TaskFilter, room: int | None) -> list[TaskState]:
    """The tasks among ``ids`` matching ``f`` now (at most ``room`` of them)."""
    out = []
    tasks = core.tasks
    for tid in ids:
        t = tasks.get(tid)
        if t is not None and matches(t, f):
            out.append(t)
            if room is not None and len(out) >= room:
                break
    return out


def cancel_all(core: Core, now: int, hits: Sequence[TaskState]) -> int:
    """Cancel ``hits`` (those still not finished); how many were cancelled."""
    acted = 0
    for t in hits:
        if t.status < FIRST_TERMINAL and core.cancel(now, t.id):
            acted += 1
    return acted


def replay_all(
    core: Core,
    now: int,
    hits: Sequence[TaskState],
    payload: Callable[[TaskState], tuple[bool, object, bytes | None]],
    again: bool = True,
) -> int:
    """Replay ``hits`` (those still finished, and with ``again`` False still without a
    replay); how many were replayed.

    ``payload(t)`` gives ``(available, payload, blob)`` for each (the shell's view of the
    payload and its encoding); an unavailable payload or a refused submission (full pool,
    pool removed) leaves that task alone."""
    acted = 0
    for t in hits:
        if t.status < FIRST_TERMINAL or (not again and replayed_by(t) is not None):
            continue
        ok, obj, blob = payload(t)
        if not ok:
            continue
        try:
            replay(core, now, t, obj, blob)
        except SubmitError:
            continue
        acted += 1
    return acted


def note_key(core: Core, now: int, record: BulkKeyChange) -> None:
    """The progress of a bulk call with a request key (``record.at`` is set to ``now`` as
    Unix ns): persisted with the page's own changes when the core persists."""
    if core.durable:
        record.at = core.config.time_base + now
        core.persist(record)


#: statuses a bulk cancel / replay may act on
CANCELLABLE = frozenset(range(FIRST_TERMINAL))
REPLAYABLE = frozenset(range(FIRST_TERMINAL + 1, 12))
REPLAYABLE_FORCED = REPLAYABLE | {SUCCEEDED}
