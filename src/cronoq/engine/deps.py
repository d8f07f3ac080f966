"""Dependency graph helpers (SPEC §8): cycle checks over batches and awaited keys.

Edges point from a parent to its dependents (``TaskState.dependents``).  Only two things can
close a cycle: edges between members of one batch (forward references by key), and an awaited
key that a new task finally provides.  Both are checked before anything is created, so a
rejected submission leaves no trace.
"""

from __future__ import annotations

from collections.abc import Sequence

from cronoq.engine.model import TaskState


def reaches(start: TaskState, targets: set[int], limit: int = 1_000_000) -> bool:
    """Whether any task id in ``targets`` is ``start`` or one of its (transitive) dependents."""
    if start.id in targets:
        return True
    seen = {start.id}
    stack = [start]
    steps = 0
    while stack:
        t = stack.pop()
        for child, _ in t.dependents or ():
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
