"""Fixed starts in the lifecycle (docs/reference/behaviour.md#fixed-starts): a released task
with a start, its start coming due, and a start missed.

Theory of operation
-------------------
A task with a fixed start (``TaskState.fixed``, a :class:`~cronoq.engine.reservations.FixedStart`)
does not join a class lane when its edges are met.  :func:`unblock_fixed` moves it to
``scheduled`` with a ``T_START`` timer when its start is ahead (and a ``T_HOLD`` timer
``MAX_HOLD_NS`` before it, or the hold at once when that is past), else straight to ``ready``
in the pool's due heap, where free slots go first.  Either way a ``T_MISS`` timer fires at
``start + tolerance + 1``.  :func:`start_due` handles the ``T_START`` timer: an occurrence of
a paused schedule is skipped (``control.py``), one whose previous occurrence still runs under
``overlap=skip`` is skipped, any other becomes ready in the due heap.  :func:`missed` applies
``on_miss`` to a task not dispatched by its miss deadline: ``skip`` and ``fail`` end it,
``run_late`` keeps it ready, now in its class lane.

These are the cold edges of the lifecycle; ``Core`` calls them only for tasks that carry a
fixed start, and every status change still goes through ``Core.move`` / ``Core.terminate``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from cronoq.engine.control import skip_if_paused
from cronoq.engine.model import (
    EV_MISS_FAIL,
    EV_MISS_SKIP,
    EV_OCCURRENCE_SKIP,
    EV_START_DUE,
    EV_UNBLOCK,
    EV_UNBLOCK_LATER,
    FAIL,
    FIRST_TERMINAL,
    MSG_MISSED,
    MSG_PREVIOUS_RUNNING,
    READY,
    SKIP,
    TaskState,
)
from cronoq.engine.reservations import MAX_HOLD_NS
from cronoq.engine.timers import T_HOLD, T_MISS, T_START

if TYPE_CHECKING:
    from cronoq.engine.core import Core
    from cronoq.engine.pools import PoolState


def unblock_fixed(core: Core, t: TaskState, pool: PoolState, now: int) -> None:
    """Every edge of blocked fixed-start task ``t`` is met: ``scheduled`` until its start, or
    ``ready`` in the due heap when the start is here; its miss timer armed either way."""
    f = t.fixed
    push = core.timers.push
    if f.start > now:
        core.move(t, EV_UNBLOCK_LATER, now)
        push(f.start, T_START, t, 0)
        hold_at = f.start - MAX_HOLD_NS
        if hold_at <= now:
            pool.hold(t)
        else:
            push(hold_at, T_HOLD, t, 0)
    else:
        core.move(t, EV_UNBLOCK, now)
        pool.arrived()
        pool.to_due(t, now)
    push(f.start + t.opts.tolerance + 1, T_MISS, t, 0)


def start_due(core: Core, t: TaskState, now: int) -> None:
    """The ``T_START`` timer of scheduled task ``t`` fired: skip it, or make it ready (due heap)."""
    f = t.fixed
    if f.recurring is not None and core.recurring.paused and skip_if_paused(core, t, now):
        return
    prev = f.prev
    if prev is not None and prev.status < FIRST_TERMINAL:  # recurring overlap=skip
        core.count("skipped")
        core.terminate(t, now, EV_OCCURRENCE_SKIP, MSG_PREVIOUS_RUNNING)
        return
    f.prev = None  # checked: drop it, so occurrences do not chain in memory forever
    core.move(t, EV_START_DUE, now)
    pool = core.pools[t.opts.pool_index]
    pool.arrived()
    pool.to_due(t, now)


def missed(core: Core, t: TaskState, now: int) -> None:
    """Not started by start + tolerance: apply ``on_miss``."""
    pool = core.pools[t.opts.pool_index]
    f = t.fixed
    if not f.counted:
        f.counted = True
        pool.window.slot(now).fs_total += 1
    policy = t.opts.on_miss
    if policy == SKIP:
        core.count("missed")
        core.terminate(t, now, EV_MISS_SKIP, MSG_MISSED)
    elif policy == FAIL:
        core.count("failed")
        core.terminate(t, now, EV_MISS_FAIL, MSG_MISSED)
    else:  # run_late: stays ready, now in its class lane at its sequence position
        pool.unhold(t)
        if t.status == READY and f.in_due:
            f.in_due = False
            core.enqueue(t, pool)
