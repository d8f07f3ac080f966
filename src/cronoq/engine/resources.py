"""Shared resources (docs/reference/behaviour.md#resources): semaphores and token buckets, shared by every
pool.

:class:`ResourceConfig` declares one (``Resource.semaphore`` / ``Resource.token_bucket``); its
units (permits, tokens) are in ``units.py``; a keyed resource (``per_key=True``), asked for as
``"name:key"``, has one unit per key and a policy for the excess (``keyed.py``).

A task is dispatched only when every resource it needs can give its amount *now*; the core
then acquires them all at once (all-or-nothing, single-threaded, so atomic).

:class:`Resources` is the resource state of one core: the resources by name, and the ready
tasks *parked* on each one because it could not serve them, in a heap by (class, id).  A
parked task is out of its lane (its lane token is negated, so any older entry is stale);
when units come back (an attempt ends) or a bucket has refilled (a ``T_REFILL`` wake-up,
armed for the first waiter's amount: no polling), waiters go back to their lanes in heap
order while the resource can serve them.  Keyed units are parked under their full name
(``"customer:42"``), so a key at its limit never holds back the tasks of another key.

Per task, admission, dispatch and release look nothing up by name: when the core checks a
task's options (``admission.check_resources``, once per options object) it notes for each
name an :data:`Entry`, ``(unit, name, units, tracked resource)`` (``opts.units``; the entries
of tracked resources again as ``opts.tracked``, the one entry of a one-resource task as
``opts.single``: the same tuples, so a key costs its options few objects), so no
``"name:key"`` is parsed again and no dict is probed on the hot path.  A keyed key's unit is
noted once the key exists: :func:`rebind` after a task of the options is counted in it
(before, the entry holds None), and again if the key was forgotten (a dropped unit is marked
``gone``): every live task's entries hold its keys' current units, as a key with live tasks
is never forgotten.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, NoReturn

from cronoq.engine.keyed import (
    CANCEL_OLDEST,
    KEEP_LATEST,
    POLICIES,
    QUEUE,
    Keyed,
    ResourceKey,
    Unit,
    check_limits,
    check_name,
    judge,
    refuse_new_keys,
    victim_message,
)
from cronoq.engine.model import READY, TaskState, check_stored_text
from cronoq.engine.snapshot import ResourceSnapshot
from cronoq.engine.time import NS
from cronoq.engine.units import SEMAPHORE, TOKEN_BUCKET, Semaphore, TokenBucket

if TYPE_CHECKING:
    from cronoq.engine.core import Core
    from cronoq.engine.model import TaskOptions
    from cronoq.engine.timers import Timers


#: A resource a task asks for: (its unit, or None for a key not bound yet; the name asked;
#: units; its tracked resource, or None)
Entry = tuple[Any, str, int, "Keyed | None"]
#: The entry of a tracked resource (keyed, or with a policy)
Tracked = tuple[Any, str, int, Keyed]


class ResourceConfig:
    """A named resource tasks can require: ``Resource.semaphore`` / ``Resource.token_bucket``.

    ``per_key=True`` gives every key its own unit (docs/concepts/resources.md#keyed-resources);
    ``on_limit`` is the policy for the excess (``engine/keyed.py``).
    """

    __slots__ = (
        "burst",
        "idle_ttl",
        "kind",
        "limits",
        "max_keys",
        "name",
        "on_limit",
        "per_key",
        "permits",
        "rate",
    )

    def __init__(
        self,
        name: str,
        kind: str,
        permits: int = 0,
        rate: float = 0.0,
        burst: int = 0,
        *,
        per_key: bool = False,
        on_limit: str = QUEUE,
        limits: dict[str, int] | None = None,
        max_keys: int = 100_000,
        idle_ttl: float = 3600.0,
    ) -> None:
        if not isinstance(name, str) or not name:
            raise ValueError("resource name must be a non-empty string")
        check_stored_text("resource name", name, ValueError)
        if not isinstance(per_key, bool):
            raise ValueError(f"per_key must be a bool (got {per_key!r})")
        check_name(name, per_key)
        if on_limit not in POLICIES:
            raise ValueError(f"on_limit must be one of {', '.join(POLICIES)} (got {on_limit!r})")
        if kind == TOKEN_BUCKET and on_limit in (CANCEL_OLDEST, KEEP_LATEST):
            raise ValueError(f"on_limit={on_limit!r} is for semaphores only (a token bucket has no holders)")
        if limits is not None and not per_key:
            raise ValueError("limits override the capacity of keys: they need per_key=True")
        if isinstance(max_keys, bool) or not isinstance(max_keys, int) or max_keys < 1:
            raise ValueError(f"max_keys must be an int >= 1 (got {max_keys!r})")
        if (
            isinstance(idle_ttl, bool)
            or not isinstance(idle_ttl, (int, float))
            or not math.isfinite(idle_ttl)
            or idle_ttl < 0
        ):
            raise ValueError(f"idle_ttl must be a finite number of seconds >= 0 (got {idle_ttl!r})")
        self.name = name
        self.kind = kind
        self.permits = permits
        self.rate = rate
        self.burst = burst
        self.per_key = per_key
        self.on_limit = on_limit
        self.limits = check_limits(limits)
        self.max_keys = max_keys
        self.idle_ttl = float(idle_ttl)

    @classmethod
    def semaphore(
        cls,
        name: str,
        permits: int,
        *,
        per_key: bool = False,
        on_limit: str = QUEUE,
        limits: dict[str, int] | None = None,
        max_keys: int = 100_000,
        idle_ttl: float = 3600.0,
    ) -> ResourceConfig:
        """A semaphore of ``permits`` units: a task asking ``k`` holds them while its attempt runs.

        ``per_key=True``: one semaphore per key, asked for as ``"name:key"`` (``limits``: the
        permits of given keys; ``max_keys`` live keys at most; a key idle ``idle_ttl`` seconds
        is forgotten).  ``on_limit``: ``"queue"``, ``"cancel_newest"``, ``"cancel_oldest"`` or
        ``"keep_latest"`` (docs/concepts/resources.md#keyed-resources).  ValueError when invalid.
        """
        if isinstance(permits, bool) or not isinstance(permits, int) or permits < 1:
            raise ValueError(f"permits must be an int >= 1 (got {permits!r})")
        return cls(
            name, SEMAPHORE, permits=permits, per_key=per_key, on_limit=on_limit, limits=limits,
            max_keys=max_keys, idle_ttl=idle_ttl,
        )  # fmt: skip

    @classmethod
    def token_bucket(
        cls,
        name: str,
        rate: float,
        burst: int,
        *,
        per_key: bool = False,
        on_limit: str = QUEUE,
        limits: dict[str, int] | None = None,
        max_keys: int = 100_000,
        idle_ttl: float = 3600.0,
    ) -> ResourceConfig:
        """A token bucket: starts full with ``burst`` tokens, refills ``rate`` per second; a task
        asking ``k`` takes ``k`` tokens at dispatch.

        ``per_key=True``: one bucket per key, asked for as ``"name:key"`` (``limits``: the burst
        of given keys; ``max_keys``, ``idle_ttl`` as for a semaphore).  ``on_limit``: ``"queue"``
        or ``"cancel_newest"`` (docs/concepts/resources.md#keyed-resources).  ValueError when invalid.
        """
        if (
            isinstance(rate, bool)
            or not isinstance(rate, (int, float))
            or not math.isfinite(rate)
            or rate <= 0
        ):
            raise ValueError(f"rate must be finite and > 0 (got {rate!r})")
        if isinstance(burst, bool) or not isinstance(burst, int) or burst < 1:
            raise ValueError(f"burst must be an int >= 1 (got {burst!r})")
        return cls(
            name, TOKEN_BUCKET, rate=float(rate), burst=burst, per_key=per_key, on_limit=on_limit,
            limits=limits, max_keys=max_keys, idle_ttl=idle_ttl,
        )  # fmt: skip

    @property
    def capacity(self) -> int:
        return self.permits if self.kind == SEMAPHORE else self.burst

    @property
    def tracked(self) -> bool:
        """Whether the engine tracks the resource's tasks (keyed, or a policy other than queue)."""
        return self.per_key or self.on_limit != QUEUE

    def __repr__(self) -> str:
        extra = "".join(
            f", {k}={getattr(self, k)!r}"
            for k, default in (("per_key", False), ("on_limit", QUEUE), ("limits", None))
            if getattr(self, k) != default
        )
        if self.kind == SEMAPHORE:
            return f"Resource.semaphore({self.name!r}, {self.permits}{extra})"
        return f"Resource.token_bucket({self.name!r}, rate={self.rate}, burst={self.burst}{extra})"


#: The public name: ``Resource.semaphore(name, permits)``, ``Resource.token_bucket(name, rate, burst)``.
Resource = ResourceConfig


class Resources:
    """The resources of one core and the tasks parked on them (see the module docstring).

    ``by_name`` holds the unkeyed units by name; ``keyed`` the resources whose tasks are
    tracked (keyed, or with a policy: ``engine/keyed.py``) by name.  :meth:`unit` resolves a
    name a task asks for, ``"name:key"`` included; dispatch and parking work on such names.
    """

    __slots__ = ("buckets", "by_name", "doomed", "judging", "keyed", "timers", "waiters")

    def __init__(self, configs: Iterable[ResourceConfig], now: int, timers: Timers) -> None:
        self.by_name: dict[str, Semaphore | TokenBucket | Unit] = {}
        self.keyed: dict[str, Keyed] = {}
        self.buckets = False  # some resource is a token bucket (recovery recharges them)
        for r in configs:
            self.buckets = self.buckets or r.kind == TOKEN_BUCKET
            if r.tracked:
                kr = self.keyed[r.name] = Keyed(r, now)
                if not r.per_key:
                    self.by_name[r.name] = kr.keys[r.name]
            else:
                self.by_name[r.name] = Semaphore(r) if r.kind == SEMAPHORE else TokenBucket(r, now)
        # ready tasks parked until a resource frees: name -> heap of (class, id, token, task)
        self.waiters: dict[str, list[tuple[int, int, int, TaskState]]] = {}
        self.timers = timers
        self.doomed: list[tuple[TaskState, str]] = []  # to cancel once the submission is committed
        self.judging = any(kr.policy != QUEUE for kr in self.keyed.values())  # some policy applies

    def unit(self, name: str) -> Semaphore | TokenBucket | Unit:
        """The unit a task's ``name`` (``"name:key"`` for a keyed one) takes from; it exists
        while the task is live."""
        return self.by_name.get(name) or self.keyed_unit(name)

    def keyed_unit(self, name: str) -> Unit:
        """The unit of key ``name`` (``"name:key"``) of a keyed resource."""
        return self.keyed[name[: name.find(":")]].keys[name]

    def take_all(self, opts: TaskOptions, now: int) -> str | None:
        """Take every amount ``opts`` needs at once; else take none and return the first short
        resource.  (Each unit is the one ``opts.units`` notes: the task is live.)"""
        units = opts.units or self.units_of(opts)
        n = len(units)
        if n == 1:  # the common case: one resource, taken in one call
            ((u, name, k, _),) = units
            return None if u.try_take(k, now) else name
        if n == 2:  # (stacked: no list of the others built)
            (u0, n0, k0, _), (u, last, k, _) = units
            if not u0.refills:  # (permits: taken, and given back if the other is short)
                if not u0.try_take(k0, now):
                    return n0
                if not u.try_take(k, now):
                    u0.give_back(k0)
                    return last
                return None
            if not u0.can_take(k0, now):
                return n0
            if not u.try_take(k, now):
                return last
            u0.take(k0, now)
            return None
        *first, (u, last, k, _) = units
        for u0, name, k0, _ in first:
            if not u0.can_take(k0, now):
                return name
        if not u.try_take(k, now):  # (the last one: checked and taken in one call)
            return last
        for u0, _, k0, _ in first:
            u0.take(k0, now)
        return None

    def give_back_all(self, opts: TaskOptions) -> Iterable[str]:
        """A running attempt ends: its units go back (a bucket keeps its tokens); the names
        with parked tasks, to unpark."""
        units = opts.units or self.units_of(opts)
        for u, _, k, _ in units:
            u.give_back(k)
        waiters = self.waiters
        if not waiters:
            return ()
        return [e[1] for e in units if e[1] in waiters]

    def parked(self, units: tuple[Entry, ...]) -> list[str] | tuple[()]:
        """The names of ``units`` (a task's entries) with parked tasks, to unpark once its
        units are back (``Core.complete`` gives them back: ``finish`` on each)."""
        waiters = self.waiters
        if not waiters:
            return ()
        return [e[1] for e in units if e[1] in waiters]

    def units_of(self, opts: TaskOptions) -> tuple[Entry, ...]:
        """``opts.units`` for options a core did not check (a recovered terminal task's)."""
        return tuple((self.unit(name), name, k, None) for name, k in (opts.resources or {}).items())

    def park(self, name: str, t: TaskState, token: int, now: int) -> None:
        """``t`` (lane token ``token``) waits until ``name`` can serve it."""
        heapq.heappush(self.waiters.setdefault(name, []), (t.opts.priority, t.id, token, t))
        self.arm_refill(name, now)

    def arm_refill(self, name: str, now: int, k: int | None = None) -> None:
        """Wake up when bucket ``name`` holds ``k`` tokens (default: its first waiter's amount)."""
        r = self.unit(name)
        if not r.refills:
            return
        if k is None:
            waiters = self.waiters.get(name)
            if not waiters:
                return
            k = (waiters[0][3].opts.resources or {}).get(name, 1)
        at = r.ready_at(k, now)
        if at is not None:
            self.timers.arm_refill(name, at, now)

    def unpark(self, name: str, now: int) -> list[TaskState]:
        """The parked tasks of ``name`` it can serve now, in order, out of the heap."""
        waiters = self.waiters.get(name)
        while waiters and (waiters[0][3].status != READY or waiters[0][3].lane_token != waiters[0][2]):
            heapq.heappop(waiters)
        if not waiters:
            self.waiters.pop(name, None)
            return []
        budget = self.unit(name).budget(now)
        out: list[TaskState] = []
        while waiters and budget > 0:
            _, _, token, t = waiters[0]
            if t.status != READY or t.lane_token != token:
                heapq.heappop(waiters)
                continue
            k = (t.opts.resources or {}).get(name, 1)
            if k > budget:
                break
            heapq.heappop(waiters)
            budget -= k
            out.append(t)
        while waiters and (waiters[0][3].status != READY or waiters[0][3].lane_token != waiters[0][2]):
            heapq.heappop(waiters)
        if not waiters:
            del self.waiters[name]
        else:
            self.arm_refill(name, now)
        return out

    # ---------------------------------------------------------------- tracked resources

    def make_room(self, needs: Iterable[tuple[Tracked, ...] | None], now: int) -> None:
        """SubmitError ``overloaded`` when the new keys ``needs`` ask for pass a ``max_keys``."""
        seen: set[str] = set()
        new: dict[Keyed, int] = {}
        lists = [need for need in needs if need]
        most = sum(len(need) for need in lists)  # at most this many new keys in all
        for need in lists:
            for _, name, _, kr in need:
                if len(kr.keys) + most <= kr.max_keys:
                    continue  # room whatever is new (the common case: no lookup)
                if kr.per_key and name not in seen and kr.unit(name, now) is None:
                    seen.add(name)
                    new[kr] = new.get(kr, 0) + 1
        for kr, n in new.items():
            if not kr.has_room(n, now):
                raise refuse_new_keys(kr.name, kr.max_keys)

    def admitted(self, t: TaskState, now: int, new: bool) -> None:
        """A live task enters (``new``, or recovered): counted in each of its keys; a new one
        is then judged by the policies (:meth:`judge`).

        A ``new`` task that needs a new key past its resource's ``max_keys`` is refused
        (SubmitError ``overloaded``) with nothing changed: the check costs nothing until a key
        is missing and the cap is reached (then :meth:`refuse` undoes the keys counted so far).
        Where a policy applies (its admission moves its key's last use), every key is checked
        first instead (:meth:`make_room`).

        Its options' entries are then bound to its keys' units (:func:`rebind`), unless every
        one already was (the hot path, checked first: no policy anywhere, each tracked entry
        a queue resource's unit still in its keys, with live tasks or not expired, so none is
        created, reset or refused: counted at once; ``Core.admit`` does it inline for one or
        two resources and calls this only when that fails)."""
        opts = t.opts
        tracked = opts.tracked
        judging = new and self.judging
        if judging:
            self.make_room((tracked,), now)
        if tracked is None:
            return
        if not self.judging and len(tracked) > 2:  # (one or two: Core.admit tried this inline)
            for u, _, _, kr in tracked:
                if u is None or not kr.queue or not (u.live or (now < kr.next_expiry and not u.gone)):
                    break
            else:
                for u, _, k, kr in tracked:
                    u.live += k
                    kr.live += k
                return
        made: tuple[str, ...] = ()  # (the keys created for it, should it be refused)
        fresh: list[Entry] = []  # (its entries bound to their keys' units: rebind's outcome)
        stale = False
        for e in tracked:
            was, name, k, kr = e
            if kr.queue:  # (Keyed.enter inlined: the submit hot path)
                u = kr.keys.get(name)
                if u is None:
                    if new:
                        if len(kr.keys) >= kr.max_keys and not kr.has_room(1, now):
                            self.refuse(t, name, made, now)
                        made += (name,)
                    u = kr.create(name, now)
                elif not u.live and now >= kr.next_expiry and u.used + kr.ttl <= now:
                    u.reset(now)  # (idle for idle_ttl: forgotten, as if new)
                u.live += k
                kr.live += k
            else:
                kr.enter(name, t, k, now)
                u = kr.keys[name] if kr.per_key else was
            if u is not was:
                stale = True
                e = (u, name, k, kr)
            fresh.append(e)
        if judging:
            self.doomed += self.judge(t, now)
        if stale:  # (a key's first use, or a forgotten one's: its entries bound at once)
            # (a key with a live task is never swept, so each unit found above is still its key's)
            if tracked is opts.units:
                bind(opts, tuple(fresh))
            else:
                rebind(opts)

    def refuse(self, t: TaskState, refused: str, made: tuple[str, ...], now: int) -> NoReturn:
        """New task ``t`` needs key ``refused``, whose resource has no room for a new key: undo
        what :meth:`admitted` counted of it before (the keys in ``made`` it created are
        dropped) and raise SubmitError ``overloaded``.  (Only ``queue`` resources come here:
        with a policy, :meth:`make_room` refused it before.)"""
        full = self.keyed[refused[: refused.find(":")]]
        for _, name, k, kr in t.opts.tracked or ():
            if name == refused:
                break
            u = kr.keys.get(name)
            if u is None:  # pragma: no cover - (only an idle_ttl of 0 forgets a key at once)
                continue
            u.live -= k
            kr.live -= k
            if name in made and not u.live:
                kr.keys.pop(name).gone = True
                kr.created = max(0, kr.created - 1)
        raise refuse_new_keys(full.name, full.max_keys)

    def ended(self, t: TaskState, now: int) -> list[str]:
        """A task ended (or was cancelled by a policy): it no longer counts in its keys.

        Returns the names of its resources that still have parked tasks, to unpark: a ready
        task that was unparked for a resource's free units and ends before it takes them
        (cancelled, shed, expired) must hand them on, or the tasks behind it would wait for
        a release that never comes."""
        waiters = self.waiters
        for _, name, k, kr in t.opts.tracked or ():
            u = kr.leave(name, t, k, now)
            if u is not None and not u.live and name in waiters:
                del waiters[name]  # (stale entries only: nothing of it is ready)
        if not waiters:
            return []
        return [name for name in t.opts.resources or () if name in waiters]

    def judge(self, t: TaskState, now: int) -> list[tuple[TaskState, str]]:
        """The tasks the policies of new task ``t``'s resources cancel (``t`` may be one)."""
        out: list[tuple[TaskState, str]] = []
        for _, name, k, kr in t.opts.tracked or ():
            if kr.policy == QUEUE:
                continue
            victims = judge(kr.keys[name], name, t, k, now)
            msg = victim_message(name, kr.policy)
            out += [(v, msg) for v in victims]
            if t in victims:
                break
        return out

    # ---------------------------------------------------------------- observability

    def snapshot(self, now: int) -> list[ResourceSnapshot]:
        """The rows of the keyed resources (bounded: one row per resource, not per key)."""
        return [
            ResourceSnapshot(kr.name, kr.kind, kr.cap, kr.run, kr.live - kr.run, True, kr.live_keys(now))
            for kr in self.keyed.values()
            if kr.per_key
        ]

    def busiest(self, name: str, top: int, now: int) -> list[ResourceKey]:
        """The ``top`` keys of resource ``name`` by waiting units (ValueError: ``name`` is not
        a keyed resource, or one with a policy)."""
        if isinstance(top, bool) or not isinstance(top, int) or top < 1:
            raise ValueError(f"top must be an int >= 1 (got {top!r})")
        kr = self.keyed.get(name)
        if kr is None:
            raise ValueError(f"'{name}' is not a keyed resource (per_key=True) of this scheduler")
        return kr.busiest(top, now)


def bind(opts: TaskOptions, units: tuple[Entry, ...]) -> None:
    """Note ``units`` (one :data:`Entry` per resource) on ``opts``: ``opts.units``, the tracked
    ones as ``opts.tracked`` (``units`` itself when all are), the one entry of a one-resource
    task as ``opts.single`` (the hot paths of ``Core.admit``, ``_fill`` and ``complete``).
    (Once per options object and key: a key's first use, so no generator is made.)"""
    opts.units = units or None
    if len(units) == 1:
        e = units[0]
        opts.single = e
        opts.tracked = None if e[3] is None else units
        return
    opts.single = None
    tracked = [e for e in units if e[3] is not None]
    opts.tracked = units if len(tracked) == len(units) else (tuple(tracked) or None)


def rebind(opts: TaskOptions) -> None:
    """Bind (or bind again) the entries of ``opts``'s keyed resources to their keys' units,
    once :meth:`Resources.admitted` has a task of ``opts`` counted in them: the keys then
    exist, and a key's unit is never forgotten while a task of it lives (``sweep`` and
    ``refuse`` drop idle units only, and mark them ``gone``, which the admission hot paths
    check before trusting an idle one), so every live task of ``opts`` finds its keys'
    current units there: dispatch and release use them unchecked."""
    units = opts.units
    if units is None:
        return
    out: list[Entry] = []
    stale = False
    for e in units:
        kr = e[3]
        if kr is not None and kr.per_key:
            u = kr.keys.get(e[1])
            if u is not e[0]:
                stale = True
                e = (u, e[1], e[2], kr)
        out.append(e)
    if stale:
        bind(opts, tuple(out))


def cancel_doomed(core: Core, now: int) -> None:
    """Cancel the tasks the policies doomed during the submission ``core`` just committed."""
    doomed, core.res.doomed = core.res.doomed, []
    for t, message in doomed:
        core.cancel(now, t.id, message)


def recharge(res: Resources, started: Iterable[TaskState], now: int) -> None:
    """Recovery: charge every token bucket, keyed or not, with the tokens the recovered tasks
    took before the restart, so that a restart or a failover does not refill the buckets
    (docs/concepts/resources.md#keyed-resources).

    What the store records of a task's takes is its first start (``started_at``); each
    bucket is replayed from full through those starts, in time order, then refilled up to
    ``now``.  A retry's or a resumed run's later takes are not recorded: the rebuilt bucket
    may hold more tokens than before the restart (never more than a full one), never fewer,
    as each recorded start was a take.  A key idle for its ``idle_ttl`` is left
    forgotten (its bucket would start full again) unless it has live tasks, and no key is made
    past ``max_keys``.
    """
    uses: dict[str, list[tuple[int, int]]] = {}
    for t in started:
        at, need = t.started_at, t.opts.resources
        if at is not None and need:
            for name, k in need.items():
                uses.setdefault(name, []).append((min(at, now), k))
    for name, taken in uses.items():
        base, sep, _ = name.partition(":")
        kr = res.keyed.get(base) if sep else None
        u: Any
        if kr is not None and kr.per_key:
            if kr.kind != TOKEN_BUCKET:
                continue
            u = kr.keys.get(name)  # (a key with live tasks has its unit: it was never forgotten)
            if u is None:
                if max(taken)[0] + kr.ttl <= now or not kr.has_room(1, now):
                    continue
                u = kr.create(name, now)
        else:
            u = res.by_name.get(name)
            if u is None or not u.refills:
                continue
        _replay_takes(u, sorted(taken))
        if kr is not None and not u.live and u.used + kr.ttl < kr.next_expiry:
            kr.next_expiry = u.used + kr.ttl


def _replay_takes(u: TokenBucket, taken: list[tuple[int, int]]) -> None:
    """Fresh (full) bucket ``u`` as if it had been full before the first of ``taken``
    (instant, tokens, in time order) and had given each take: its tokens and last refill are
    those at the last take (a keyed bucket's last use); its next refill counts from there."""
    cap = u.capacity * NS
    rate = u.rate
    nano, last = cap, taken[0][0]
    for at, k in taken:
        if at > last:
            nano = min(cap, nano + int(rate * (at - last)))
            last = at
        nano = max(0, nano - k * NS)
    u.nano, u.last = nano, last
