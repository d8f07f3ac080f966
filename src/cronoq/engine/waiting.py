"""Why a task that has not finished is not running, in one line for the person on call
(docs/getting-started/dashboard.md#why-a-task-waits), and what each resource holds.

Theory of operation
-------------------
:func:`waiting_reason` reads the core's state and never mutates it (a token bucket's refill
at ``now`` is the lazy form of its state: reading it twice at one instant gives one answer).
A ``blocked`` task waits for its dependencies, a ``scheduled`` one for its fixed start, a
``retrying`` one for its backoff. A ``ready`` task is not running for the first of these
reasons that holds: its pool is paused; a resource it needs cannot give its amount now
(a semaphore's permits all held, a bucket short of tokens); no worker group of its pool has
the labels it needs; none serves its kind (docs/how-to/deploys.md); else every slot that
could take it is busy (waiting for capacity). A running or finished task has no reason
(``""``). Shells may put a reason of their own first (the server: no connected worker
serves the task's kind).

:func:`resource_use` is the resources' line of the snapshot: per resource its capacity, the
units in use (a semaphore's held permits, a bucket's spent tokens) and how many ready tasks
are parked on it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from cronoq.engine.model import BLOCKED, READY, RETRYING, SCHEDULED, TaskState
from cronoq.engine.resources import SEMAPHORE, TOKEN_BUCKET, Semaphore
from cronoq.engine.snapshot import ResourceSnapshot

if TYPE_CHECKING:
    from cronoq.engine.core import Core
    from cronoq.engine.pools import PoolState
    from cronoq.engine.resources import Resources

__all__ = ["resource_use", "waiting_reason", "why_not_running"]


def why_not_running(core: Core, t: TaskState, now: int) -> str:
    """:func:`waiting_reason` for a task of ``core``, a parked one saying what it waits for
    (engine/parking.py: "children 3 of 20 done", "sleeping until ...", "signal 'x'")."""
    parked = core.parking.describe(t) if core.parking.journals else ""
    if parked:
        return parked
    pi = t.opts.pool_index
    return waiting_reason(t, core.pools[pi], core.res, now) if 0 <= pi < len(core.pools) else ""


def waiting_reason(t: TaskState, pool: PoolState, res: Resources, now: int) -> str:
    """Why ``t`` (of ``pool``) is not running at ``now``; "" when it runs or has finished."""
    s = t.status
    if s == BLOCKED:
        n = t.unmet
        return f"blocked: waiting for {n} dependenc{'y' if n == 1 else 'ies'}" if n else "blocked"
    if s == SCHEDULED:
        return "scheduled: waiting for its fixed start"
    if s == RETRYING:
        return "retrying: waiting out its backoff"
    if s != READY:
        return ""
    if pool.paused:
        return f"pool '{pool.name}' is paused"
    for name, k in (t.opts.resources or {}).items():
        r = res.by_name.get(name)
        if r is None:  # a key of a keyed resource ("customer:42"): its own unit
            r = res.keyed_unit(name)
        short = r.available < k if isinstance(r, Semaphore) else r.tokens(now) < k
        if short:
            return f"resource '{name}' at its limit ({r.in_use(now)} of {r.capacity} in use)"
    need = t.opts.labels
    if need and not any(g.capacity and g.accepts(need) for g in pool.groups):
        labels = ", ".join(f"{k}={v}" for k, v in sorted(need.items()))
        return f"no worker group with labels {labels}"
    kind = t.opts.kind
    if pool.kinded and not any(g.capacity and g.accepts(need) and g.serves(kind) for g in pool.groups):
        return f"no worker serves task '{kind}'"
    return f"waiting for capacity ({pool.busy} of {pool.capacity} slots busy)"


def resource_use(res: Resources, now: int) -> list[ResourceSnapshot]:
    """Every resource of ``res`` by name: capacity, units in use, ready tasks parked on it."""
    out = []
    for name in sorted(res.by_name):
        r = res.by_name[name]
        heap = res.waiters.get(name, ())
        parked = {t.id for _, _, token, t in heap if t.status == READY and t.lane_token == token}
        kind = SEMAPHORE if isinstance(r, Semaphore) else TOKEN_BUCKET
        out.append(ResourceSnapshot(name, kind, r.capacity, r.in_use(now), len(parked)))
    return sorted(out + res.snapshot(now), key=lambda r: r.name)  # (+ keyed ones: engine/keyed.py)
