"""Admission: what a submission is, and the plan that decides whether it can be admitted.

Theory of operation
-------------------
A submission (one task with a start or dependencies, or a batch) is admitted atomically: all
its members are created or none.  So it is *planned* first, against the core's state but
without changing it, and only a complete :class:`Plan` is *committed* by the core (which
creates the members in order, links the edges, binds awaited keys and releases what is
free).  Planning, in :func:`plan_admission`, goes through:

1. **keys** - a member whose key exists is that task, a duplicate (its other fields are not
   looked at, as for a single submit); a key twice among new members is an error.  Keys are
   reserved, looked up and freed only through :class:`KeyIndex`, the engine's one key index.
2. **edges** - each dependency resolves to another member (kept per parent as member
   indices, conditions only when some edge is not ``on_success``), to a live task, to an
   awaited key (``unknown_dependency = "await"``), or is settled at once against a terminal
   task (met, or *broken*: the member will be skipped).  Forward references between members
   are checked for cycles, and so are cycles closed through an awaited key the batch provides.
3. **reservations** - each fixed-start member needs its window under the pool's reservable
   fraction, counting the windows of earlier members of the same batch.
4. **bounds** - each pool's ``max_pending`` must hold the new members of the batch as a whole
   (a single submission applies the pool's overflow policy instead, which may shed a task).

Any failure raises :class:`~cronoq.errors.SubmitError` before the core has created anything.
Resolving a task's options against the core (:func:`resolve_pool`: its pool, its resources
checked, both cached on the options) and a full pool's overflow policy (:func:`overflow`)
are admission decisions too, shared with the core's single-task fast path.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, NamedTuple, cast

from cronoq.engine.deps import kids_have_cycle, link, plan_member_edges, reaches
from cronoq.engine.keys import ScopedKey, same_tenant, scoped_key
from cronoq.engine.model import (
    BLOCKED,
    EV_SHED,
    FIRST_TERMINAL,
    MSG_SHED,
    NUM_CLASSES,
    ON_SUCCESS,
    TaskOptions,
    TaskState,
    check_stored_text,
    edge_satisfied,
)
from cronoq.engine.mutations import Submitted
from cronoq.engine.parents import bind_awaited as bind_parent
from cronoq.engine.reservations import FixedStart, max_overlap, reservation_limit
from cronoq.engine.resources import Entry, bind
from cronoq.engine.timers import T_AWAIT
from cronoq.errors import InvalidSubmission, SubmitError

if TYPE_CHECKING:
    from cronoq.engine.core import Core
    from cronoq.engine.keyed import Keyed
    from cronoq.engine.pools import PoolState
    from cronoq.engine.resources import Resources

# kinds of the edges of a member to something outside the batch
E_TASK = 0  # an existing live task (the target is its TaskState)
E_AWAIT = 1  # a key nobody submitted yet (the target is the key)

#: An edge to outside the batch: (E_TASK or E_AWAIT, target, condition)
OuterEdge = tuple[int, Any, int]


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


class KeyIndex(dict[ScopedKey, int]):
    r"""Key -> id of the task holding it (live or retained): the one place keys are looked up,
    reserved and freed.  Entries are :func:`~cronoq.engine.keys.scoped_key`\ s: keys are scoped
    by tenant (the plain key for tasks without one).  (``find`` and ``reserve`` are the dict's
    own C methods: the submit hot path pays no extra call for them.)"""

    __slots__ = ()

    find = dict.get  # key -> the id holding it, or None
    reserve = dict.__setitem__  # (key, id): the task now holds the key

    def free(self, key: ScopedKey, tid: int) -> None:
        """Task ``tid`` is forgotten: its key becomes free (unless another task holds it)."""
        if self.get(key) == tid:
            del self[key]


class Plan:
    """A submission planned and admissible: what the core commits (see the module docstring).

    Per member ``i``: ``pools[i]`` its pool, ``dup[i]`` the id of the existing task it is a
    duplicate of (else None), ``indeg[i]`` its member edges, ``other[i]`` its edges to outside
    the batch, ``broken[i]`` whether an edge is already broken, ``windows[i]`` its reservation.
    ``kids[j]`` are the members depending on member ``j`` and ``kconds[j]`` their conditions
    (None: all ``on_success``); ``simple`` when every edge between members is ``on_success``.
    ``provided`` are the ``(member, key)`` pairs of awaited keys the submission provides.
    """

    __slots__ = (
        "any_deps",
        "any_start",
        "batch_keys",
        "broken",
        "dup",
        "dup_keys",
        "forward",
        "indeg",
        "items",
        "kconds",
        "kids",
        "need",
        "need_order",
        "other",
        "pools",
        "provided",
        "simple",
        "tenanted",
        "windows",
    )

    def __init__(self, items: Sequence[BatchItem], n_pools: int) -> None:
        n = len(items)
        self.items = items
        self.pools: list[PoolState] = []
        self.dup: list[int | None] = [None] * n
        self.batch_keys: dict[ScopedKey, int] = {}  # scoped key -> member, of the new members
        self.dup_keys: set[ScopedKey] = set()
        self.tenanted = False  # some member has a tenant: its keys are scoped (engine/keys.py)
        self.need = [0] * n_pools  # new members per pool
        self.need_order: list[int] = []  # pools in order of first appearance
        self.any_deps = False
        self.any_start = False
        self.kids: list[list[int]] = []
        self.kconds: list[list[int] | None] = [None] * n
        self.indeg = [0] * n
        self.other: list[list[OuterEdge] | None] = [None] * n
        self.broken = [False] * n
        self.forward = False  # some member depends on a later one (else the order is topological)
        self.simple = False
        self.windows: list[tuple[int, int] | None] = [None] * n
        self.provided: list[tuple[int, ScopedKey]] = []


def resolve_pool(core: Core, opts: TaskOptions) -> int:
    """The pool index of ``opts``, its resources checked; both cached on it for ``core``."""
    if opts.pool is None:
        idx = core.default_pool
    else:
        found = core.pool_index.get(opts.pool)
        if found is None:
            raise SubmitError("unknown_pool", f"unknown pool '{opts.pool}'")
        idx = found
    if opts.resources is not None:
        check_resources(core.res, opts)
    opts.pool_index = idx
    opts.stats_key = core.durations.key(idx, opts.kind)
    opts.resolver = core
    return idx


def check_resources(res: Resources, opts: TaskOptions) -> None:
    """SubmitError ``unknown_resource`` / ``resource_exceeds_capacity`` / ``invalid``
    (docs/reference/behaviour.md#resources, docs/concepts/resources.md#keyed-resources).

    Also notes on ``opts`` an entry per resource, ``(unit, name, units, tracked resource)``
    (``resources.bind``: ``opts.units``, ``opts.tracked``, ``opts.single``), so admission,
    dispatch and release take each unit at once (a keyed key's once it exists:
    ``resources.rebind``), without parsing its name again.
    """
    if opts.resources is not None and not opts.resources:
        opts.resources = None  # (an empty map asks for nothing: the hot paths test for None)
    units: list[Entry] = []
    for name, amount in (opts.resources or {}).items():
        check_stored_text("resource name", name)  # (also for options built without resource_map)
        capacity, kr = _capacity(res, name)
        if (
            amount.__class__ is not int and (isinstance(amount, bool) or not isinstance(amount, int))
        ) or amount < 1:
            raise InvalidSubmission(f"resource amount must be an int >= 1 (got {amount!r} for '{name}')")
        if amount > capacity:
            raise SubmitError(
                "resource_exceeds_capacity",
                f"requested amount exceeds capacity of resource '{name}' "
                f"(the task needs {amount} units, its capacity is {capacity})",
            )
        d: dict[str, Any] = kr.keys if kr is not None and kr.per_key else res.by_name
        units.append((d.get(name), name, amount, kr))
    bind(opts, tuple(units))


def _capacity(res: Resources, name: str) -> tuple[int, Keyed | None]:
    """The capacity of what ``name`` asks for (a resource, or a key of a keyed one), and the
    tracked resource it belongs to."""
    if name.__class__ is not str and not isinstance(name, str):
        raise InvalidSubmission(f"resource names must be strings (got {name!r})")
    base, sep, key = name.partition(":")
    kr = res.keyed.get(base) if sep else None
    if kr is not None and kr.per_key:  # (the common case first: a key of a keyed resource)
        if not key:
            raise InvalidSubmission(f"resource '{base}' needs a non-empty key: '{base}:<key>' (got '{name}')")
        return kr.capacity_of(name), kr
    kr = res.keyed.get(name)
    if kr is not None and kr.per_key:
        raise InvalidSubmission(
            f"resource '{name}' is keyed (per_key=True): ask for '{name}:<key>' with a non-empty key"
        )
    r = res.by_name.get(name)
    if r is not None:
        return r.capacity, kr
    if sep and (base in res.by_name or base in res.keyed):
        raise InvalidSubmission(
            f"resource '{base}' is not keyed (per_key=False): ask for '{base}', not '{name}'"
        )
    raise SubmitError("unknown_resource", f"unknown resource '{name}'")


def overflow(core: Core, pool: PoolState, priority: int, now: int, waits: bool = True) -> None:
    """``pool`` is at ``max_pending``: apply its overflow policy (shed a task) or raise.

    ``waits``: the submitter waits for space on ``full`` (false for a recurring occurrence,
    which is dropped instead: its refusal must not ask for a ``SpaceAvailable`` nobody awaits).
    """
    policy = pool.cfg.overflow
    if policy == "wait":
        if waits:
            pool.waiting_space = True
        raise SubmitError("full", f"pool '{pool.name}' is full")
    victim: TaskState | None = None
    if policy == "shed_lowest":
        for c in range(NUM_CLASSES - 1, priority, -1):
            if pool.lane_ready[c]:
                victim = pool.lanes[c].newest()
                break
    elif policy == "shed_oldest" and pool.lane_ready[NUM_CLASSES - 1]:
        victim = pool.lanes[NUM_CLASSES - 1].oldest()
    if victim is None:
        raise SubmitError("overloaded", f"pool '{pool.name}' is overloaded")
    core.count("shed")
    core.terminate(victim, now, EV_SHED, MSG_SHED)


def plan_admission(
    core: Core, now: int, items: Sequence[BatchItem], single: bool, waits: bool = True
) -> Plan:
    """Plan ``items`` against ``core``; SubmitError if the submission cannot be admitted
    (``waits``: as for :func:`overflow`)."""
    plan = Plan(items, len(core.pools))
    _plan_members(core, plan)
    if plan.any_deps:
        _plan_edges(core, plan)
        if plan.forward and kids_have_cycle(plan.indeg, plan.kids):
            raise SubmitError("cycle", "dependency cycle in batch")
    if core.awaiting and plan.batch_keys:
        _plan_provided(core, plan)
    if plan.any_start:
        _plan_windows(core, plan)
    _check_bounds(core, plan, now, single, waits)
    if core.res.keyed:  # new keys of keyed resources: all of them fit under max_keys, or none
        core.res.make_room((it.opts.tracked for i, it in enumerate(items) if plan.dup[i] is None), now)
    return plan


def _plan_members(core: Core, plan: Plan) -> None:
    """Keys (duplicates, keys twice in the batch) and the pool of each new member."""
    all_pools = core.pools
    keys = core.keys
    batch_keys, dup_keys, need = plan.batch_keys, plan.dup_keys, plan.need
    for i, item in enumerate(plan.items):
        key = item.key
        tenant = item.opts.tenant
        if tenant is not None:
            plan.tenanted = True
        if key is not None:
            # (the key index does not change while planning: a key is either existing or new)
            sk = scoped_key(tenant, key)
            existing = keys.find(sk)
            if existing is None:
                if sk in batch_keys:
                    raise SubmitError("duplicate_key_in_batch", f"duplicate key '{key}' in batch")
                batch_keys[sk] = i
            else:
                if sk in dup_keys:
                    raise SubmitError("duplicate_key_in_batch", f"duplicate key '{key}' in batch")
                dup_keys.add(sk)
                plan.dup[i] = existing
                # a duplicate is the existing task (docs/reference/behaviour.md#ids-keys-retention): its other
                # fields (pool, resources, edges) are not looked at, as for a single submit
                plan.pools.append(all_pools[core.default_pool])  # (a placeholder, never read)
                continue
        opts = item.opts
        pi = opts.pool_index if opts.resolver is core else core.resolve_pool(opts)
        plan.pools.append(all_pools[pi])
        if not need[pi]:
            plan.need_order.append(pi)
        need[pi] += 1
        if item.deps:
            plan.any_deps = True
        if item.start_at is not None:
            plan.any_start = True


def _plan_edges(core: Core, plan: Plan) -> None:
    """Resolve every edge: to a member, to a live task, to an awaited key; or settle it now."""
    if not plan.dup_keys and not plan.tenanted:  # the common case: ON_SUCCESS member edges
        # (untenanted: every scoped key is the plain key)
        member_keys = cast("dict[str, int]", plan.batch_keys)
        planned = plan_member_edges([item.deps for item in plan.items], member_keys)
        if planned is not None:
            plan.kids, plan.indeg, plan.forward = planned
            plan.simple = True
            return
    plan.kids = [[] for _ in plan.items]
    for i, item in enumerate(plan.items):
        if item.deps and plan.dup[i] is None:
            plan.indeg[i] = _plan_member_deps(core, plan, i, item)


def _plan_member_deps(core: Core, plan: Plan, i: int, item: BatchItem) -> int:
    """The edges of member ``i``; returns how many go to other members."""
    kids, kconds, batch_keys = plan.kids, plan.kconds, plan.batch_keys
    key = item.key
    tenant = item.opts.tenant
    m = 0
    for target, cond in item.deps or ():
        tid: int | None
        target_sk: ScopedKey | None = None
        if isinstance(target, str):
            if target == key:
                raise SubmitError("cycle", f"dependency cycle: task '{key}' depends on itself")
            target_sk = scoped_key(tenant, target)
            j = batch_keys.get(target_sk)
            if j is not None:
                kl = kids[j]
                kl.append(i)
                kc = kconds[j]
                if kc is not None:
                    kc.append(cond)
                elif cond != ON_SUCCESS:  # (fewer long-lived lists while planning)
                    kc = kconds[j] = [ON_SUCCESS] * (len(kl) - 1)
                    kc.append(cond)
                m += 1
                if j > i:
                    plan.forward = True
                continue
            tid = core.keys.find(target_sk)
        else:
            tid = target
        parent = core.tasks.get(tid) if tid is not None else None
        if parent is None:
            parent = core.recurring.held_as(target)  # (an occurrence's previous one, forgotten)
        if parent is not None and not same_tenant(parent.opts.tenant, tenant):
            parent = None  # another tenant's task: as if it did not exist
        ol = plan.other[i]
        if ol is None:
            ol = plan.other[i] = []
        if parent is None:
            if target_sk is not None and plan.pools[i].cfg.unknown_dependency == "await":
                ol.append((E_AWAIT, target_sk, cond))
                continue
            raise SubmitError("unknown_dependency", f"unknown dependency '{target}'")
        if parent.status >= FIRST_TERMINAL:
            if not edge_satisfied(cond, parent.status):
                plan.broken[i] = True
            continue
        ol.append((E_TASK, parent, cond))
    return m


def _plan_provided(core: Core, plan: Plan) -> None:
    """The awaited keys this submission provides, and no cycle closed through one of them."""
    awaiting, batch_keys = core.awaiting, plan.batch_keys
    if len(awaiting) < len(batch_keys):
        provided = [(ix, k) for k in awaiting if (ix := batch_keys.get(k)) is not None]
        provided.sort()
    else:
        provided = [(i, k) for k, i in batch_keys.items() if k in awaiting]
    plan.provided = provided
    parents: list[list[int]] | None = None
    for i, key in provided:
        waiters = awaiting[key]
        if not waiters:
            continue
        if parents is None:
            parents = [[] for _ in plan.items]
            for j, kl in enumerate(plan.kids):
                for c in kl:
                    parents[c].append(j)
        targets = _existing_ancestors(i, parents, plan.other)
        for w, _ in waiters:
            if w.status == BLOCKED and reaches(w, targets):
                shown = key if isinstance(key, str) else key[1]
                raise SubmitError("cycle", f"dependency cycle through awaited key '{shown}'")


def _existing_ancestors(i: int, parents: list[list[int]], other: list[list[OuterEdge] | None]) -> set[int]:
    """Ids of existing tasks member ``i`` depends on, directly or through other members.

    ``parents[m]``: the members ``m`` depends on; ``other[m]``: its edges to outside the batch.
    """
    out: set[int] = set()
    seen = {i}
    stack = [i]
    while stack:
        m = stack.pop()
        for kind, target, _ in other[m] or ():
            if kind == E_TASK:
                out.add(target.id)
        for j in parents[m]:
            if j not in seen:
                seen.add(j)
                stack.append(j)
    return out


def _plan_windows(core: Core, plan: Plan) -> None:
    """The reservation window of each fixed-start member, within its pool's reservable share."""
    added: dict[int, list[tuple[int, int]]] = {}
    for i, item in enumerate(plan.items):
        start_at = item.start_at
        if plan.dup[i] is not None or start_at is None:
            continue
        opts, pool = item.opts, plan.pools[i]
        lo = start_at - opts.tolerance
        hi = start_at + core.durations.expected(opts) + opts.tolerance
        mine = added.setdefault(pool.index, [])
        limit = reservation_limit(pool.cfg.max, pool.cfg.reservable_fraction)
        if max_overlap([*pool.res.values(), *mine], lo, hi) >= limit:
            raise SubmitError("reservation_conflict", "fixed-start reservation conflict")
        mine.append((lo, hi))
        plan.windows[i] = (lo, hi)


def _check_bounds(core: Core, plan: Plan, now: int, single: bool, waits: bool) -> None:
    """Queue bounds: the new members of each pool are admitted as a whole."""
    for idx in plan.need_order:
        k = plan.need[idx]
        pool = core.pools[idx]
        mp = pool.cfg.max_pending
        if mp is None or pool.pending + k <= mp:
            continue
        if single:
            overflow(core, pool, plan.items[0].opts.priority, now, waits)
        elif k > mp:
            raise SubmitError(
                "overloaded", f"batch of {k} tasks exceeds max_pending {mp} of pool '{pool.name}'"
            )
        elif pool.cfg.overflow == "wait":
            pool.waiting_space = True
            raise SubmitError("full", f"pool '{pool.name}' is full")
        else:
            raise SubmitError("overloaded", f"pool '{pool.name}' is overloaded")


# ------------------------------------------------------------------ committing a plan


def create_members(
    core: Core, now: int, plan: Plan, schedule: str | None
) -> tuple[list[TaskState | None], list[tuple[int, bool]]]:
    """Create the new members in order (ids increase with position); None for duplicates."""
    created: list[TaskState | None] = []
    out: list[tuple[int, bool]] = []
    durable = core.durable
    new_task = core.new_task
    dup, pools, indeg, broken, windows = plan.dup, plan.pools, plan.indeg, plan.broken, plan.windows
    for i, item in enumerate(plan.items):
        d = dup[i]
        if d is not None:
            created.append(None)
            out.append((d, True))
            continue
        pool = pools[i]
        t = new_task(now, pool, item.opts, item.payload, item.key, item.deadline)
        # its member edges, linked below; a broken edge never counts as met, so a cascade
        # from another member cannot release it before it is skipped
        t.unmet = indeg[i] + broken[i]
        win = windows[i]
        start_at = item.start_at
        if win is not None and start_at is not None:
            f = FixedStart(start_at, win[0], win[1])
            f.reserved = True
            f.recurring = schedule
            pool.res[t.id] = win
            t.fixed = f
        created.append(t)
        out.append((t.id, False))
        if durable:
            tb = core.config.time_base
            core.persist(Submitted.of(t, pool.name, tb, item.deadline, start_at, item.deps, item.blob))
    return created, out


def link_members(core: Core, plan: Plan, created: list[TaskState | None]) -> None:
    """The planned edges: between members, to live tasks, to awaited keys."""
    made: list[Any] = created  # every member with edges was created (none is a duplicate)
    pick = made.__getitem__
    if plan.simple:  # every member edge ON_SUCCESS: no conditions to keep
        for parent, kl in zip(made, plan.kids):
            if kl:  # (the planning lists are this batch's own: reused in place)
                kl[:] = map(pick, kl)
                parent.dependents = kl
    else:
        kconds = plan.kconds
        for j, kl in enumerate(plan.kids):
            if kl:
                parent = made[j]
                parent.dependents = list(map(pick, kl))
                parent.dep_conds = kconds[j]
    for i, ol in enumerate(plan.other):
        if ol is None:
            continue
        t = made[i]
        for kind, target, cond in ol:
            if kind == E_TASK:
                link(target, t, cond)
            else:
                await_key(core, t, target, cond)


def await_key(core: Core, t: TaskState, key: ScopedKey, cond: int) -> None:
    """An edge of ``t`` to ``key``, which no task holds yet (``unknown_dependency = "await"``).

    The task's await timeout runs from its submission, armed with its first such edge.
    """
    core.awaiting.setdefault(key, []).append((t, cond))
    t.unmet += 1
    t.awaiting += 1
    timeout = core.pools[t.opts.pool_index].cfg.await_timeout
    if timeout is not None and t.awaiting == 1:
        core.timers.push(t.created_at + timeout, T_AWAIT, t, 0)


def bind_awaited(core: Core, key: ScopedKey, provider: TaskState) -> None:
    """``provider`` now holds ``key``: the edges awaiting it bind to it."""
    for w, cond in core.awaiting.pop(key, ()):
        if w.status == BLOCKED:
            w.awaiting -= 1
            w.unmet -= 1
            link(provider, w, cond)
            bind_parent(core, w, key, provider)
