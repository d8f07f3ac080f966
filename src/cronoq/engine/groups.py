"""Worker-group changes: sizing a group as workers come and go, and moving a running attempt
onto another group's slot (docs/reference/behaviour.md#labels, docs/how-to/deploys.md).

Theory of operation
-------------------
A pool's slots belong to worker groups (``pools.Group``): one per label set and set of served
task kinds (``kinds`` None: any kind, as a plain handler).  A shell sizes a group with
:func:`resize` whenever its workers change (the server: every register, disconnect and
``SetSlots``); a group sized 0 that is not the unlabelled any-kind one is removed.  A ready
task that no group with a free slot accepts (its labels, its kind) is *parked* by the core
(``PoolState.label_waiters``): it holds no slot and leaves its lane, so the work behind it
runs; every group change and every slot freed in a pool with labelled or kind-serving groups
gives the parked tasks another chance.  So a task of a kind no worker serves yet waits, and
runs once a worker serving it arrives (a rolling deploy).

:func:`move_attempt` is the server's re-offer after a ``Nack``: the running attempt takes a
free slot of another group that accepts it and gives its own back.  Nothing here does I/O.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from cronoq.engine.placement import unpark_labels
from cronoq.errors import SubmitError

if TYPE_CHECKING:
    from cronoq.engine.core import Core
    from cronoq.engine.pools import Kinds

__all__ = ["move_attempt", "resize"]


def resize(core: Core, now: int, pool_name: str, labels: dict[str, str] | None, n: int, kinds: Kinds) -> None:
    """Size the group of ``pool_name`` with ``labels`` serving ``kinds`` to ``n`` slots.

    ``n = 0`` removes any group but the unlabelled any-kind one (its running attempts finish
    normally); parked tasks get another chance; an autoscaled pool's evaluation is armed.
    """
    idx = core.pool_index.get(pool_name)
    if idx is None:
        raise SubmitError("unknown_pool", f"unknown pool '{pool_name}'")
    pool = core.pools[idx]
    if not pool.resize_group(labels, n, now, core.config.window, kinds):
        return
    if pool.label_waiters:
        unpark_labels(core, pool)
    if pool.scaler is not None and not pool.scale_armed:
        pool.arm_scale(core.timers, now)


def move_attempt(core: Core, lease: int, labels: dict[str, str], kinds: Kinds) -> bool:
    """Move the running attempt under ``lease`` to the worker group with exactly ``labels``
    and ``kinds``.

    A remote worker handed the lease back unrun (``Nack``) and the only worker with a free
    slot is in another group (docs/reference/grpc.md#worker-protocol): the attempt keeps its
    number and takes that group's slot, giving its own back.  True when the move is done (or
    not needed); False when the lease is not current, no such group exists, it does not accept
    the task's labels or kind, or it has no free slot - nothing changes then.
    """
    t = core.leases.get(lease)
    if t is None:
        return False
    pool = core.pools[t.opts.pool_index]
    moved = pool.move_slot(t, labels, kinds)
    if moved is None:
        return False
    if moved and pool.label_waiters:  # a parked task may fit the slot given back
        unpark_labels(core, pool)
    return True
