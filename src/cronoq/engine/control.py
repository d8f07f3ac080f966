"""Operator controls: pausing and resuming pools and recurring schedules, "run now"
(docs/how-to/operations.md).

Theory of operation
-------------------
A *paused pool* keeps all of its state and accepts submissions (its bounds apply as ever);
only dispatch stops: ``Core.tick`` skips the fill pass of a pool whose ``PoolState.paused``
is set.  Running attempts finish and report normally; timers keep firing, so a fixed start
that comes due while paused waits in the pool's due heap and its miss timer applies the task's
``on_miss`` policy (``skip`` / ``fail`` end it; ``run_late`` keeps it ready for the resume).
The autoscaler still evaluates a paused pool but never scales it up (``PoolState.evaluate_scale``
clamps the desired capacity to the current one): there is nothing to dispatch to new workers.
Resuming clears the flag; the shell ticks at once, so the backlog dispatches immediately.

A *paused recurring schedule* keeps materializing its occurrences as ever (so reservations
and the next wake-up are unchanged), but an occurrence whose start comes due while its
schedule is paused is skipped (status ``skipped``, message :data:`MSG_SCHEDULE_PAUSED`) and
counted in ``RecurringInfo.skipped_paused``.

Both states are durable: every change is a :class:`~cronoq.engine.mutations.PauseChange`
mutation; stores keep the set of paused names and recovery restores it
(:func:`restore_paused`) before anything dispatches.  Pausing what is paused (or resuming what
runs) changes nothing and persists nothing: the calls answer whether the state changed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from cronoq.engine.model import EV_OCCURRENCE_SKIP, TaskState
from cronoq.engine.mutations import PauseChange

if TYPE_CHECKING:
    from cronoq.engine.core import Core

MSG_SCHEDULE_PAUSED: Final = "schedule paused"

__all__ = [
    "MSG_SCHEDULE_PAUSED",
    "restore_paused",
    "set_pool_paused",
    "set_recurring_paused",
    "skip_if_paused",
    "trigger_recurring",
    "unknown_pool",
    "unknown_recurring",
]


def unknown_pool(name: object) -> ValueError:
    return ValueError(f"unknown pool '{name}'")


def unknown_recurring(name: object) -> ValueError:
    return ValueError(f"unknown recurring schedule '{name}'")


def set_pool_paused(core: Core, now: int, name: str, paused: bool) -> bool:
    """Pause (or resume) pool ``name``; True when its state changed.  ValueError: unknown pool."""
    idx = core.pool_index.get(name) if isinstance(name, str) else None
    if idx is None:
        raise unknown_pool(name)
    pool = core.pools[idx]
    if pool.paused == paused:
        return False
    pool.paused = paused
    if core.durable:
        core.persist(PauseChange("pool", name, paused))
    if not paused and pool.scaler is not None and not pool.scale_armed:
        pool.arm_scale(core.timers, now)  # evaluate the backlog it kept while paused
    return True


def set_recurring_paused(core: Core, name: str, paused: bool) -> bool:
    """Pause (or resume) recurring schedule ``name``; True when its state changed.
    ValueError: unknown schedule."""
    sched = core.recurring.by_name
    if not isinstance(name, str) or name not in sched:
        raise unknown_recurring(name)
    names = core.recurring.paused
    if (name in names) == paused:
        return False
    if paused:
        names.add(name)
    else:
        names.discard(name)
    if core.durable:
        core.persist(PauseChange("recurring", name, paused))
    return True


def skip_if_paused(core: Core, t: TaskState, now: int) -> bool:
    """The start of occurrence ``t`` came due: skip and count it if its schedule is paused."""
    name = t.fixed.recurring
    rec = core.recurring
    if name is None or name not in rec.paused:
        return False
    rec.skipped_paused[name] = rec.skipped_paused.get(name, 0) + 1
    core.count("skipped")
    core.terminate(t, now, EV_OCCURRENCE_SKIP, MSG_SCHEDULE_PAUSED)
    return True


def trigger_recurring(core: Core, now: int, name: str) -> tuple[int, bool]:
    """ "Run now": one occurrence of schedule ``name`` submitted at once (no fixed start, no
    key: it never collides with a scheduled occurrence), with the schedule's options (its
    ``cronoq.recurring`` tag included), payload and relative deadline.  It is submitted even
    when the schedule is paused or an occurrence is running (no overlap check).  Returns
    ``(id, duplicate)``; ValueError: unknown schedule; SubmitError as for ``Core.submit``."""
    sched = core.recurring.by_name.get(name) if isinstance(name, str) else None
    if sched is None:
        raise unknown_recurring(name)
    spec = sched.spec
    deadline = None if spec.deadline_rel is None else now + spec.deadline_rel
    return core.submit(now, sched.opts, spec.payload, None, deadline, None, None, spec.blob)


def restore_paused(core: Core, paused: list[tuple[str, str]]) -> None:
    """Recovery: the paused pools and schedules a store read back (unknown names are dropped:
    a pool no longer configured, a schedule removed)."""
    for kind, name in paused:
        if kind == "pool":
            idx = core.pool_index.get(name)
            if idx is not None:
                core.pools[idx].paused = True
        elif kind == "recurring" and name in core.recurring.by_name:
            core.recurring.paused.add(name)
