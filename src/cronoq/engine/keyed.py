"""Keyed resources (docs/concepts/resources.md#keyed-resources): one semaphore or token bucket
per runtime key, and the policies for the excess.

Theory of operation
-------------------
A resource declared with ``per_key=True`` is asked for as ``"name:key"`` (the part before the
first ``:`` names the resource).  :class:`Keyed` holds the resource's keys in one plain dict,
full name (``"customer:42"``) -> unit, created on first use.  A unit (:class:`KeySem`,
:class:`KeyBucket`) offers the same calls as an unkeyed ``Semaphore`` / ``TokenBucket``, so
dispatch takes, parks and gives back keyed units exactly as it does unkeyed ones: the tasks
waiting for a key are parked under the full name, so a busy key never holds back the others.

Each unit also knows its live tasks (``tasks``: id -> task, in admission order, ``None`` when
there is none: an idle key costs no dict) and their units (``live``), so the policies decide
in O(1) for ``queue`` / ``cancel_newest`` and walk only the key's own tasks for
``cancel_oldest`` / ``keep_latest``.  ``used`` is the last instant a task of the key was
admitted under a policy or ended (a key with tasks is never forgotten, so a queue key
notes only when its last task ends: when it becomes idle).

A key counts against ``max_keys`` while it has tasks or was used within ``idle_ttl``; past
that it is forgotten: lazily when it is looked up again (a bucket starts full again), and by
:meth:`Keyed.sweep`, one pass over the dict, run only when a key may have expired (the
earliest possible expiry is tracked) and either the cap is reached or as many keys were
created as the dict holds (amortized O(1) per key).  A forgotten unit is marked ``gone``: the
options of its tasks note their units (``resources.rebind``), and the admission hot paths
trust an idle noted unit only while it is not.  An unkeyed resource with a policy other
than ``queue`` is a :class:`Keyed` with its one unit under its own name, never forgotten.

A key's bucket refills lazily, when it is taken from or its last task ends.  ``Keyed.fill``
(:func:`fill_time`) is the least idle time after which any key's bucket is full from empty as
the refill computes it (``int(rate * dt) >= burst * NS``, the biggest ``limits`` override
included): a bucket idle that long is set full without the float product, the same result
exactly (a rate that never binds, the common case, then costs no refill arithmetic).
"""

from __future__ import annotations

import heapq
import math
from typing import TYPE_CHECKING, NamedTuple

from cronoq.engine.model import RUNNING, TaskState
from cronoq.engine.time import NS, to_ns
from cronoq.engine.units import SEMAPHORE, Semaphore, TokenBucket
from cronoq.errors import SubmitError

if TYPE_CHECKING:
    from cronoq.engine.resources import ResourceConfig

QUEUE = "queue"
CANCEL_NEWEST = "cancel_newest"
CANCEL_OLDEST = "cancel_oldest"
KEEP_LATEST = "keep_latest"
POLICIES = (QUEUE, CANCEL_NEWEST, CANCEL_OLDEST, KEEP_LATEST)

_WHY = {
    CANCEL_NEWEST: "was at its limit",
    CANCEL_OLDEST: "took a newer task in its place",
    KEEP_LATEST: "kept only its latest task",
}


def victim_message(full: str, policy: str) -> str:
    """The message of a task a policy cancelled: names the resource key and the policy."""
    return f"cancelled: resource key '{full}' {_WHY[policy]} (on_limit={policy!r})"


def fill_time(rate: float, capacity: int) -> int:
    """The least idle time (ns) after which a bucket of ``capacity`` tokens refilling at ``rate``
    is full from empty, as its refill computes it: ``int(rate * dt) >= capacity * NS`` for
    every ``dt`` at least this (float products are monotonic in ``dt``, and ``capacity * NS``
    is an int, so ``int`` cannot fall below it once the product reaches it).

    The least one while it is below 2**53 ns (~104 days; above, floats step by more than 1 ns
    and a sufficient one is returned); :data:`NEVER` past 2**62 ns (no idle time reaches it:
    the refill is then always computed)."""
    cap = capacity * NS
    need = cap / rate
    if not need < 2**62:
        return NEVER
    dt = max(0, math.ceil(need) - 1)
    while int(rate * dt) < cap:
        dt += 1 if dt < 2**53 else dt >> 40  # (past 2**53, a step that moves the float product)
    return dt


#: A fill time no idle time reaches (``fill_time`` of a bucket that takes past 2**62 ns)
NEVER = 1 << 64


class KeySem(Semaphore):
    """The semaphore of one key (see the module docstring)."""

    __slots__ = ("gone", "live", "parent", "tasks", "used")

    def __init__(self, parent: Keyed, capacity: int, now: int) -> None:
        self.name = parent.name
        self.capacity = self.available = capacity
        self.parent = parent
        self.gone = False  # forgotten (out of the keys): an options object may still note it
        self.used = now
        self.tasks: dict[int, TaskState] | None = None
        self.live = 0  # units of the live tasks

    def take(self, k: int, now: int) -> None:
        self.available -= k
        self.parent.run += k

    def try_take(self, k: int, now: int) -> bool:
        if self.available >= k:
            self.available -= k
            self.parent.run += k
            return True
        return False

    def give_back(self, k: int) -> None:
        self.available += k
        self.parent.run -= k

    def finish(self, t: TaskState, k: int, now: int) -> None:
        """``give_back`` and :meth:`Keyed.leave` in one call (task ``t`` succeeded and ends)."""
        self.available += k
        p = self.parent
        p.run -= k
        if not p.queue:
            forget(self, t, k, now)
            return
        live = self.live = self.live - k
        p.live -= k
        self.used = now
        if not live and now + p.ttl < p.next_expiry:
            p.next_expiry = now + p.ttl

    def running(self, full: str) -> int:
        return self.capacity - self.available

    def reset(self, now: int) -> None:
        self.used = now

    def touch(self, now: int) -> None:
        self.used = now

    def room(self, full: str, now: int) -> bool:
        """``cancel_newest``: the key's live tasks (the new one included) fit its permits."""
        return self.live <= self.capacity


class KeyBucket(TokenBucket):
    """The token bucket of one key (refill arithmetic inherited).

    Compact for idle keys: its last use is its last refill (``used`` is ``last``: every use
    refills first).
    """

    __slots__ = ("gone", "live", "parent", "run", "tasks")

    def __init__(self, parent: Keyed, capacity: int, now: int) -> None:
        self.name = parent.name
        self.rate = parent.rate
        self.capacity = capacity
        self.nano = capacity * NS
        self.last = now
        self.parent = parent
        self.gone = False  # (as KeySem's)
        self.tasks: dict[int, TaskState] | None = None
        self.live = 0
        self.run = 0  # units of its running attempts

    @property
    def used(self) -> int:
        return self.last

    def take(self, k: int, now: int) -> None:
        self._refill(now)
        self.nano -= k * NS
        self.run += k
        self.parent.run += k

    def try_take(self, k: int, now: int) -> bool:
        last = self.last
        p = self.parent
        if now > last:  # (_refill inlined: the dispatch hot path)
            self.last = now
            if now - last >= p.fill:
                # fast path: idle at least as long as any key of the resource takes to refill
                # from empty (``Keyed.fill``), so the refill below would reach the cap whatever
                # the bucket held (never below zero: tokens are taken only when there are
                # enough): it is full, with no float product (the same result, exactly)
                nano = self.capacity * NS
            else:
                nano = self.nano
                cap = self.capacity * NS
                if nano < cap:
                    nano += int(self.rate * (now - last))
                    if nano > cap:
                        nano = cap
        else:
            nano = self.nano
        need = k * NS
        if nano >= need:
            self.nano = nano - need
            self.run += k
            p.run += k
            return True
        self.nano = nano
        return False

    def give_back(self, k: int) -> None:
        """Tokens are consumed, never returned; the attempt stops running."""
        self.run -= k
        self.parent.run -= k

    def finish(self, t: TaskState, k: int, now: int) -> None:
        """``give_back`` and :meth:`Keyed.leave` in one call (task ``t`` succeeded and ends)."""
        self.run -= k
        p = self.parent
        p.run -= k
        if not p.queue:
            forget(self, t, k, now)
            return
        live = self.live = self.live - k
        p.live -= k
        if not live:  # (its last use, ``used`` is ``last``, matters only once it is idle)
            last = self.last
            if now > last:  # (_refill inlined)
                self.last = now
                nano = self.nano
                cap = self.capacity * NS
                if now - last >= p.fill:  # (full whatever it held: try_take's fast path)
                    self.nano = cap
                elif nano < cap:
                    nano += int(self.rate * (now - last))
                    self.nano = nano if nano < cap else cap
            if now + p.ttl < p.next_expiry:
                p.next_expiry = now + p.ttl

    def running(self, full: str) -> int:
        return self.run

    def reset(self, now: int) -> None:
        self.nano = self.capacity * NS
        self.last = now

    def touch(self, now: int) -> None:
        self._refill(now)

    def room(self, full: str, now: int) -> bool:
        """``cancel_newest``: tokens now cover every waiting unit of the key (the new one too)."""
        return self.live - self.running(full) <= self.tokens(now)


Unit = KeySem | KeyBucket

#: The most keys one listing returns (``top`` is clamped to it).
MAX_TOP = 1000


class ResourceKey(NamedTuple):
    """One key of a keyed resource, as :meth:`Keyed.busiest` lists it (units, not tasks: a
    task asking 2 units counts 2)."""

    key: str
    running: int
    waiting: int
    limit: int


def _units(t: TaskState, full: str) -> int:
    """The units task ``t`` asks of ``full``."""
    return (t.opts.resources or {}).get(full, 1)


class Keyed:
    """A keyed resource (or an unkeyed one with a policy): its units and counters."""

    __slots__ = (
        "burst",
        "cap",
        "created",
        "fill",
        "keys",
        "kind",
        "limits",
        "live",
        "max_keys",
        "name",
        "next_expiry",
        "per_key",
        "policy",
        "queue",
        "rate",
        "run",
        "ttl",
        "unit_cls",
    )

    def __init__(self, cfg: ResourceConfig, now: int) -> None:
        self.name = cfg.name
        self.per_key = cfg.per_key
        self.policy = cfg.on_limit
        self.queue = cfg.on_limit == QUEUE  # (the hot paths' test)
        self.cap = cfg.capacity
        self.rate = cfg.rate
        self.burst = cfg.burst
        self.limits = dict(cfg.limits or {})
        self.max_keys = cfg.max_keys
        self.ttl = to_ns(cfg.idle_ttl)
        self.kind = cfg.kind
        self.unit_cls: type[Unit] = KeySem if cfg.kind == SEMAPHORE else KeyBucket
        self.keys: dict[str, Unit] = {}
        self.live = 0  # units of live tasks, every key
        self.run = 0  # units held by running attempts, every key
        self.created = 0  # keys created since the last sweep
        self.next_expiry = now + self.ttl  # no idle key can expire before this instant
        # a bucket idle this long (ns) is full whatever it held (KeyBucket.try_take's fast path)
        self.fill = fill_time(self.rate, max([self.cap, *self.limits.values()])) if self.rate else 0
        if not self.per_key:
            self.keys[self.name] = self.unit_cls(self, self.cap, now)

    def capacity_of(self, full: str) -> int:
        """The capacity of key ``full`` (its ``limits`` override, else the resource's)."""
        if not self.limits:
            return self.cap
        return self.limits.get(full[len(self.name) + 1 :], self.cap)

    def unit(self, full: str, now: int) -> Unit | None:
        """The live unit of ``full`` (None: unknown or forgotten); an expired idle one is reset."""
        u = self.keys.get(full)
        if u is not None and not u.live and self.per_key and u.used + self.ttl <= now:
            u.reset(now)
        return u

    def has_room(self, new: int, now: int) -> bool:
        """Whether ``new`` more keys fit under ``max_keys`` (sweeping expired keys if needed)."""
        if len(self.keys) + new <= self.max_keys:
            return True
        if now >= self.next_expiry:
            self.sweep(now)
        return len(self.keys) + new <= self.max_keys

    def ensure(self, full: str, now: int) -> Unit:
        """The unit of ``full``, created if needed (the cap was checked by :meth:`has_room`)."""
        u = self.unit(full, now)
        return self.create(full, now) if u is None else u

    def create(self, full: str, now: int) -> Unit:
        """The new unit of ``full``, which has none (the cap was checked by :meth:`has_room`);
        expired keys are swept first once as many were created as the dict holds."""
        self.created += 1
        if self.created > len(self.keys) and now >= self.next_expiry:
            self.sweep(now)  # (before the new key is in: it is never swept at once)
        cap = self.limits.get(full[len(self.name) + 1 :], self.cap) if self.limits else self.cap
        u = self.keys[full] = self.unit_cls(self, cap, now)  # (capacity_of inline)
        return u

    def enter(self, full: str, t: TaskState, k: int, now: int) -> None:
        """:func:`admit` live task ``t`` (``k`` units) into the unit of ``full`` (:meth:`ensure`):
        the submit hot path, in one call for ``queue``."""
        u = self.keys.get(full)
        if u is None or (not u.live and self.per_key and u.used + self.ttl <= now):
            u = self.ensure(full, now)
        if not self.queue:
            admit(u, t, k, now)
            return
        u.live += k
        self.live += k

    def leave(self, full: str, t: TaskState, k: int, now: int) -> Unit | None:
        """:func:`forget` task ``t`` in the unit of ``full`` (None: no such unit), in one call
        for ``queue``."""
        u = self.keys.get(full)
        if u is None:
            return None
        if self.policy != QUEUE:
            forget(u, t, k, now)
            return u
        u.live -= k
        self.live -= k
        u.touch(now)
        if not u.live and u.used + self.ttl < self.next_expiry:
            self.next_expiry = u.used + self.ttl
        return u

    def sweep(self, now: int) -> None:
        """Forget the keys idle for ``ttl``; note when the next one may expire."""
        ttl = self.ttl
        keys = self.keys
        dead = [f for f, u in keys.items() if not u.live and u.used + ttl <= now]
        for f in dead:
            keys.pop(f).gone = True  # (for the options that note it: Core.admit's hot path)
        soonest = now + ttl
        for u in keys.values():
            if not u.live and u.used + ttl < soonest:
                soonest = u.used + ttl
        self.next_expiry = soonest
        self.created = 0

    def live_keys(self, now: int) -> int:
        """Keys that have tasks or were used within ``idle_ttl``."""
        if self.per_key and now >= self.next_expiry:
            self.sweep(now)
        return len(self.keys)

    def busiest(self, top: int, now: int) -> list[ResourceKey]:
        """The ``top`` keys (at most :data:`MAX_TOP`) by waiting units, then running ones."""
        rows = ((u.live - u.running(f), f, u) for f, u in self.keys.items() if u.live)
        best = heapq.nlargest(min(top, MAX_TOP), rows, key=lambda r: (r[0], r[2].live))
        cut = len(self.name) + 1 if self.per_key else 0
        return [ResourceKey(f[cut:], u.running(f), w, u.capacity) for w, f, u in best]


def admit(u: Unit, t: TaskState, k: int, now: int) -> None:
    """Count live task ``t`` (``k`` units) in its key (and keep it, for a policy's choices)."""
    if u.parent.policy != QUEUE:
        tasks = u.tasks
        if tasks is None:
            tasks = u.tasks = {}
        tasks[t.id] = t
    u.live += k
    u.parent.live += k
    u.touch(now)


def forget(u: Unit, t: TaskState, k: int, now: int) -> None:
    """Task ``t`` no longer counts in its key (idempotent under a policy, which may forget a
    task it cancels before the task ends; under ``queue`` a task is forgotten once, as it ends)."""
    if u.parent.policy != QUEUE:
        tasks = u.tasks
        if tasks is None or tasks.pop(t.id, None) is None:
            return
        if not tasks:
            u.tasks = None
    u.live -= k
    u.parent.live -= k
    u.touch(now)
    p = u.parent
    if not u.live and u.used + p.ttl < p.next_expiry:
        p.next_expiry = u.used + p.ttl


def judge(u: Unit, full: str, t: TaskState, k: int, now: int) -> list[TaskState]:
    """Apply the policy of ``u``'s resource to new task ``t`` (already counted): the tasks it
    cancels, ``t`` itself included for ``cancel_newest``; each is uncounted at once."""
    policy = u.parent.policy
    if policy == CANCEL_NEWEST:
        if u.room(full, now):
            return []
        forget(u, t, k, now)
        return [t]
    tasks = u.tasks
    assert tasks is not None
    out: list[TaskState] = []
    if policy == KEEP_LATEST:
        out = [v for v in tasks.values() if v is not t and v.started_at is None and v.status != RUNNING]
    else:  # CANCEL_OLDEST: the oldest waiting task, else the oldest running one
        excess = u.live - u.capacity
        while excess > 0:
            v = next((v for v in tasks.values() if v is not t and v.status != RUNNING), None)
            if v is None:
                v = next((v for v in tasks.values() if v is not t), None)
            if v is None:
                break
            excess -= _units(v, full)
            out.append(v)
            forget(u, v, _units(v, full), now)
        return out
    for v in out:
        forget(u, v, _units(v, full), now)
    return out


def check_name(name: str, per_key: bool) -> None:
    """A keyed resource's name may not contain ``:`` (it separates the key)."""
    if per_key and ":" in name:
        raise ValueError(f"a keyed resource's name may not contain ':' (got {name!r})")


def check_limits(limits: object) -> dict[str, int] | None:
    """``limits``: key -> capacity, each a positive int (ValueError)."""
    if limits is None:
        return None
    if not isinstance(limits, dict):
        raise ValueError(f"limits must be a dict of key -> positive int (got {limits!r})")
    for key, n in limits.items():
        if not isinstance(key, str) or not key:
            raise ValueError(f"limits keys must be non-empty strings (got {key!r})")
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ValueError(f"limits[{key!r}] must be a positive int (got {n!r})")
    return dict(limits)


def refuse_new_keys(name: str, max_keys: int) -> SubmitError:
    return SubmitError(
        "overloaded", f"resource '{name}' has {max_keys} live keys (max_keys): no room for a new key"
    )
