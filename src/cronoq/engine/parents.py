"""Parents: the task behind each dependency edge of a dependent, and pinning their outputs
(docs/concepts/dependencies.md#outputs-on-edges).

Theory of operation
-------------------
Edges live on the parent (``TaskState.dependents``) and are dropped once settled, so a
dependent could not say whom it waited on.  Each dependent therefore also keeps
``TaskState.parents``: a tuple (compact: 48 B for one edge) with one entry per edge, in the
order the edges were given (``after`` then ``deps``), made when it is submitted
(:func:`bind_submitted`) or recovered (:func:`bind_recovered`).  An entry is the parent's
``TaskState``, or a :class:`Ref` for a parent not known yet (an awaited key, bound by
:func:`bind_awaited` when it is submitted) or gone (a record the store no longer had at
recovery).  Once the dependent has ended, each
entry bound to a record becomes that record's id (:func:`unpin`): a retained finished task
still says whom it depended on, in edge order, without holding anyone's output.

Holding the parent's record *pins* its output: retention may forget the parent (lookups stop
finding it) but the dependent still holds the object, and ``Core.pinned`` (parent id ->
dependents holding it) makes ``Core.forget_output`` (the server's ``[outputs]`` caps) leave a
pinned output alone.  A durable store keeps the output in the parent's row, which recovery
binds again.  When the dependent ends - after its last start - :func:`unpin` turns its
entries into ids, and the parents' outputs are free to go.  The end is the earliest sound
release point: until the attempt that began a start is over, a retry, a timeout, a lost
lease or a recovery may start the task again (needing the same outputs), and a running
attempt reads ``ctx.parents`` at any time (docs/concepts/dependencies.md#outputs-on-edges).

:func:`outcomes` reads the entries as plain tuples ``(id, key, status, output, message)``
for the shell, which makes ``cronoq.Outcome`` values of them (the engine imports nothing
above it).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from cronoq.engine.keys import ScopedKey, scoped_key
from cronoq.engine.model import OUTPUT_LOST, STATUS_NAMES, SUCCEEDED, TaskState

if TYPE_CHECKING:
    from cronoq.engine.admission import Plan
    from cronoq.engine.core import Core

__all__ = [
    "Ref",
    "bind_awaited",
    "bind_recovered",
    "bind_submitted",
    "ended_entries",
    "forget_output",
    "outcomes",
    "unpin",
]

#: what a dependent sees of a parent whose record is gone
MSG_GONE = "the parent's record is no longer available"


class Ref:
    """A parent not bound to a record: ``target`` as given, ``sk`` its scoped key (if a key)."""

    __slots__ = ("sk", "target")

    def __init__(self, target: int | str, sk: ScopedKey | None) -> None:
        self.target = target
        self.sk = sk


Entry = TaskState | Ref | int  # (an id: the dependent has ended)


def _pin(core: Core, t: TaskState, entries: list[Entry]) -> None:
    t.parents = tuple(entries)
    pinned = core.pinned
    for p in entries:
        if type(p) is TaskState:
            pinned[p.id] = pinned.get(p.id, 0) + 1


def unpin(core: Core, t: TaskState) -> None:
    """``t`` ended: its parents' outputs are no longer held for it (it keeps their ids)."""
    entries = t.parents
    if not entries:
        return
    pinned = core.pinned
    for p in entries:
        if type(p) is TaskState:
            n = pinned[p.id] - 1
            if n:
                pinned[p.id] = n
            else:
                del pinned[p.id]
    t.parents = tuple(p.id if type(p) is TaskState else p for p in entries)


def forget_output(core: Core, task_id: int, output: object) -> bool:
    """Drop the output of the retained succeeded task ``task_id`` if it is still ``output``
    (a bounded output cache above the engine, e.g. the server's ``[outputs]``): from then on
    it answers as a lost output (``OUTPUT_LOST``).  False when there was nothing to drop, or
    while a dependent holds it (pinned: it stays until the dependents have run)."""
    t = core.tasks.get(task_id)
    if t is None or t.status != SUCCEEDED or t.output is not output or task_id in core.pinned:
        return False
    t.output = OUTPUT_LOST
    return True


def _resolve(core: Core, tenant: str | None, target: int | str) -> Entry:
    if isinstance(target, str):
        sk = scoped_key(tenant, target)
        tid = core.keys.find(sk)
        found = core.tasks.get(tid) if tid is not None else None
        return found if found is not None else Ref(target, sk)
    found = core.tasks.get(target)
    return found if found is not None else Ref(target, None)


def bind_submitted(core: Core, plan: Plan, created: Sequence[TaskState | None]) -> None:
    """The parents of every new member with edges (members by key, else existing tasks)."""
    batch_keys = plan.batch_keys
    for i, t in enumerate(created):
        deps = plan.items[i].deps
        if t is None or not deps:
            continue
        tenant = t.opts.tenant
        entries: list[Entry] = []
        for target, _ in deps:
            if isinstance(target, str):
                j = batch_keys.get(scoped_key(tenant, target))
                if j is not None:
                    member = created[j]
                    if member is not None:
                        entries.append(member)
                        continue
            found = _resolve(core, tenant, target)
            if type(found) is Ref:
                found = core.recurring.held_as(target) or found  # (an occurrence's previous one)
            entries.append(found)
        _pin(core, t, entries)


def bind_recovered(core: Core, t: TaskState, deps: Sequence[tuple[int | str, int]] | None) -> None:
    """The parents of a recovered live task (its parents' records were recovered first)."""
    if deps:
        tenant = t.opts.tenant
        _pin(core, t, [_resolve(core, tenant, target) for target, _ in deps])


def ended_entries(tenant: str | None, deps: Sequence[tuple[int | str, int]]) -> tuple[Entry, ...]:
    """The entries of a task that had ended when its row was read (a store's finished row):
    ids, and keys as :class:`Ref` (resolved when read), so it still says whom it depended on."""
    return tuple(
        Ref(target, scoped_key(tenant, target)) if isinstance(target, str) else target for target, _ in deps
    )


def bind_awaited(core: Core, waiter: TaskState, key: ScopedKey, provider: TaskState) -> None:
    """``provider`` took the awaited ``key``: the waiter's entries for it become its record."""
    entries = waiter.parents
    if not entries:
        return
    out: list[Entry] = []
    for p in entries:
        if type(p) is Ref and p.sk == key:
            p = provider
            core.pinned[provider.id] = core.pinned.get(provider.id, 0) + 1
        out.append(p)
    waiter.parents = tuple(out)


Outcome = tuple[int, str | None, str, Any, str | None]


def outcomes(core: Core, t: TaskState) -> list[Outcome]:
    """``(id, key, status, output, message)`` per edge of ``t``, in order (see the module
    docstring); a parent not ended yet shows its current status, one no longer retained
    ``"unknown"``."""
    out: list[Outcome] = []
    for p in t.parents or ():
        if type(p) is int:
            p = core.tasks.get(p) or Ref(p, None)
        if type(p) is Ref:
            found = _resolve(core, t.opts.tenant, p.target)
            if type(found) is Ref:
                tid = p.target if isinstance(p.target, int) else 0
                key = p.target if isinstance(p.target, str) else None
                out.append((tid, key, "unknown", None, MSG_GONE))
                continue
            p = found
        assert isinstance(p, TaskState)
        output = p.output if p.status == SUCCEEDED and p.output is not OUTPUT_LOST else None
        out.append((p.id, p.key, STATUS_NAMES[p.status], output, p.message))
    return out
