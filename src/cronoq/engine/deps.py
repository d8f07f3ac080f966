"""Dependency graph helpers (docs/reference/behaviour.md#dependencies): cycle checks over batches and awaited
keys, and settling the edges of a parent that ended.

Edges point from a parent to its dependents (``TaskState.dependents``).  Only two things can
close a cycle: edges between members of one batch (forward references by key), and an awaited
key that a new task finally provides.  Both are checked before anything is created, so a
rejected submission leaves no trace.

When a parent ends, ``Core._propagate`` settles its edges: the common case (a parent that
succeeded, every edge ``on_success``) inline on the hot path, any other with
:func:`settle_edges`, which breaks the edges whose condition the parent's status fails and
cascades the resulting skips iteratively (a worklist, never recursion).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from itertools import chain, repeat
from operator import eq, gt, itemgetter
from typing import TYPE_CHECKING, cast

from cronoq.engine.model import (
    BLOCKED,
    EV_EDGE_BROKEN,
    ON_COMPLETE,
    ON_SUCCESS,
    STATUS_NAMES,
    SUCCEEDED,
    TaskState,
)

if TYPE_CHECKING:
    from cronoq.engine.core import Core

_target = itemgetter(0)
_cond = itemgetter(1)


def link(parent: TaskState, child: TaskState, cond: int) -> None:
    """Add the edge ``parent -> child`` with condition ``cond``; it counts as unmet."""
    kids = parent.dependents
    if kids is None:
        parent.dependents = [child]
        if cond != ON_SUCCESS:
            parent.dep_conds = [cond]
    else:
        kids.append(child)
        conds = parent.dep_conds
        if conds is not None:
            conds.append(cond)
        elif cond != ON_SUCCESS:
            conds = parent.dep_conds = [ON_SUCCESS] * len(kids)
            conds[-1] = cond
    child.unmet += 1


def reaches(start: TaskState, targets: set[int], limit: int = 1_000_000) -> bool:
    """Whether any task id in ``targets`` is ``start`` or one of its (transitive) dependents."""
    if start.id in targets:
        return True
    seen = {start.id}
    stack = [start]
    steps = 0
    while stack:
        t = stack.pop()
        for child in t.dependents or ():
            if child.id in targets:
                return True
            if child.id not in seen:
                seen.add(child.id)
                stack.append(child)
        steps += 1
        if steps > limit:  # pragma: no cover - absurdly large graphs: treat as a cycle
            return True
    return False


def kids_have_cycle(indeg: Sequence[int], kids: Sequence[list[int] | None]) -> bool:
    """Whether a batch graph has a cycle, by peeling members whose members-parents are done (Kahn).

    ``indeg[i]``: how many member edges member i has; ``kids[j]``: the members that depend on
    member j (one entry per edge), or None.  Linear, with no per-node iterator.
    """
    deg = list(indeg)
    stack = [i for i, d in enumerate(deg) if not d]
    done = 0
    while stack:
        j = stack.pop()
        done += 1
        kl = kids[j]
        if kl:
            for c in kl:
                d = deg[c] - 1
                deg[c] = d
                if not d:
                    stack.append(c)
    return done < len(deg)


def plan_member_edges(
    deps: Sequence[Sequence[tuple[object, int]] | None], members: Mapping[str, int]
) -> tuple[list[list[int]], list[int], bool] | None:
    """Resolve a batch whose every edge is an ON_SUCCESS edge to another member by key.

    ``deps[i]``: member i's edges ``(target, condition)``; ``members``: key → member index.
    Returns ``(kids, indeg, forward)`` - the members depending on each member (one entry per
    edge, in member order), each member's edge count, and whether some member depends on a
    later one - or None when some edge is of another kind (an id, a key outside the batch,
    another condition, a self-reference): the caller then resolves edge by edge.  The checks
    run in C (``map`` over flat arrays); only grouping by parent is a Python loop.
    """
    lens = [len(d) if d else 0 for d in deps]
    flat = list(chain.from_iterable(d for d in deps if d))
    if any(map(_cond, flat)):  # ON_SUCCESS is 0
        return None
    found = list(map(members.get, map(_target, flat)))
    if None in found:
        return None
    js = cast("list[int]", found)
    owners = list(chain.from_iterable(map(repeat, range(len(deps)), lens)))
    if any(map(eq, js, owners)):
        return None
    kids: list[list[int]] = [[] for _ in lens]
    for j, i in zip(js, owners):
        kids[j].append(i)
    return kids, lens, any(map(gt, js, owners))


def settle_edges(core: Core, parent: TaskState, now: int) -> None:
    """``parent`` ended: satisfy or break each edge to a blocked dependent; a broken edge skips
    the dependent, and that skip settles the dependent's own edges in turn."""
    release = core.release
    work = [parent]
    while work:
        p = work.pop()
        deps = p.dependents
        conds = p.dep_conds
        p.dependents = p.dep_conds = None
        if not deps:
            continue
        succeeded = p.status == SUCCEEDED
        if conds is None:
            conds = [ON_SUCCESS] * len(deps)
        for child, cond in zip(deps, conds):
            if child.status != BLOCKED:
                continue
            # edge_satisfied(cond, p.status), inlined
            if cond == ON_COMPLETE or (cond == ON_SUCCESS) == succeeded:
                u = child.unmet - 1
                child.unmet = u
                if not u:
                    release(child, now)
            else:
                msg = f"dependency {p.id} ended as {STATUS_NAMES[p.status]}"
                core.count("skipped")
                deps_of_child = child.dependents
                child.dependents = None  # cascade iteratively, not recursively
                core.terminate(child, now, EV_EDGE_BROKEN, msg)
                child.dependents = deps_of_child
                work.append(child)
