"""Placement: where a ready task starts, or where it waits when nothing can take it now.

Theory of operation
-------------------
``Core._fill`` picks the next ready task of a pool (its lanes, its due heap) and asks
:func:`place` for a worker group: the first group with a free slot that accepts the task's
labels and serves its kind, and every resource the task needs, taken atomically
(``resources.py``).  When there is none, the task is *parked* (:func:`park`): it leaves its
lane (the work behind it runs) under a negative lane token, either on its pool's
``label_waiters`` (no group can take it) or on the resource that is short (which also holds it
in ``PoolState.resource_held``).  A due fixed-start task is never parked: its slot is held for
it, so it stays in the due heap and the bucket that was short arms a refill wake-up.

The reverse moves are :func:`unpark_resource` (units of a resource came back or a bucket
refilled: the parked tasks it can serve now go back to their lanes) and
:func:`unpark_labels` (a labelled or kind-serving slot freed or a group changed).  Both queue
through :meth:`Core.enqueue`; none of this changes a status (a parked task stays ``ready``)
and nothing here does I/O.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from cronoq.engine.core import Core
    from cronoq.engine.model import TaskState
    from cronoq.engine.pools import Group, PoolState

__all__ = ["park", "place", "unpark_labels", "unpark_resource"]


def place(core: Core, t: TaskState, pool: PoolState, now: int, parkable: bool = True) -> Group | None:
    """A group with a free slot for ``t`` (its labels, its kind) and all its resources,
    taken atomically; else park it (``parkable``) and None."""
    opts = t.opts
    need = opts.labels
    kind = opts.kind
    group = None
    for g in pool.groups:
        if g.busy < g.capacity and (need is None or g.accepts(need)) and g.serves(kind):
            group = g
            break
    if group is None:
        if parkable:
            park(core, t, pool, None, now)
        return None
    res = opts.resources
    if res is not None:
        short = core.res.take_all(opts, now)
        if short is not None:
            if parkable:
                park(core, t, pool, short, now)
            else:  # a due fixed-start task: wake up when a bucket refilled
                core.res.arm_refill(short, now, res[short])
            return None
    return group


def park(core: Core, t: TaskState, pool: PoolState, resource: str | None, now: int) -> None:
    """Take a ready task out of its lane until its resource (or a matching group) frees."""
    pool.dequeued(t)
    core.lane_token += 1
    token = -core.lane_token
    t.lane_token = token
    if resource is None:
        pool.label_waiters.append((token, t))
    else:
        core.res.park(resource, pool.hold_for_resource(t), token, now)


def unpark_resource(core: Core, name: str, now: int) -> None:
    """Return parked tasks of ``name`` to their lanes while the resource can serve them."""
    pools = core.pools
    for t in core.res.unpark(name, now):
        core.enqueue(t, pools[t.opts.pool_index].unhold_for_resource(t))


def unpark_labels(core: Core, pool: PoolState) -> None:
    """A labelled or kind-serving slot freed (or a group changed): give parked tasks another chance."""
    for t in pool.unpark_labels():
        core.enqueue(t, pool)
