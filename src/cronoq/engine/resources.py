"""Shared resources (docs/reference/behaviour.md#resources): semaphores and token buckets, shared by every
pool.

* :class:`Semaphore` — ``permits`` units; a running task holds its units until its attempt ends.
* :class:`TokenBucket` — starts full (``burst`` tokens), refills continuously at ``rate`` per
  second up to ``burst``; tokens are taken at dispatch and never returned.  Token arithmetic
  is exact: tokens are kept in "nano-tokens" (tokens × 1e9) so refill over ``dt`` ns is the
  integer ``rate × dt``, and ``ready_at(k)`` tells the core when to wake up (no polling).

A task is dispatched only when every resource it needs can give its amount *now*; the core
then acquires them all at once (all-or-nothing, single-threaded, so atomic).

:class:`Resources` is the resource state of one core: the resources by name, and the ready
tasks *parked* on each one because it could not serve them, in a heap by (class, id).  A
parked task is out of its lane (its lane token is negated, so any older entry is stale);
when units come back (an attempt ends) or a bucket has refilled (a ``T_REFILL`` wake-up,
armed for the first waiter's amount: no polling), waiters go back to their lanes in heap
order while the resource can serve them.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Iterable
from typing import TYPE_CHECKING

from cronoq.engine.model import READY, TaskState
from cronoq.engine.time import NS

if TYPE_CHECKING:
    from cronoq.engine.timers import Timers

SEMAPHORE = "semaphore"
TOKEN_BUCKET = "token_bucket"


class ResourceConfig:
    """A named resource tasks can require: ``Resource.semaphore`` / ``Resource.token_bucket``."""

    __slots__ = ("name", "kind", "permits", "rate", "burst")

    def __init__(self, name: str, kind: str, permits: int = 0, rate: float = 0.0, burst: int = 0) -> None:
        if not isinstance(name, str) or not name:
            raise ValueError("resource name must be a non-empty string")
        self.name = name
        self.kind = kind
        self.permits = permits
        self.rate = rate
        self.burst = burst

    @classmethod
    def semaphore(cls, name: str, permits: int) -> ResourceConfig:
        if isinstance(permits, bool) or not isinstance(permits, int) or permits < 1:
            raise ValueError(f"permits must be an int >= 1 (got {permits!r})")
        return cls(name, SEMAPHORE, permits=permits)

    @classmethod
    def token_bucket(cls, name: str, rate: float, burst: int) -> ResourceConfig:
        if (
            isinstance(rate, bool)
            or not isinstance(rate, (int, float))
            or not math.isfinite(rate)
            or rate <= 0
        ):
            raise ValueError(f"rate must be finite and > 0 (got {rate!r})")
        if isinstance(burst, bool) or not isinstance(burst, int) or burst < 1:
            raise ValueError(f"burst must be an int >= 1 (got {burst!r})")
        return cls(name, TOKEN_BUCKET, rate=float(rate), burst=burst)

    @property
    def capacity(self) -> int:
        return self.permits if self.kind == SEMAPHORE else self.burst

    def __repr__(self) -> str:
        if self.kind == SEMAPHORE:
            return f"Resource.semaphore({self.name!r}, {self.permits})"
        return f"Resource.token_bucket({self.name!r}, rate={self.rate}, burst={self.burst})"


class Semaphore:
    __slots__ = ("name", "capacity", "available")

    def __init__(self, cfg: ResourceConfig) -> None:
        self.name = cfg.name
        self.capacity = cfg.permits
        self.available = cfg.permits

    def can_take(self, k: int, now: int) -> bool:
        return self.available >= k

    def take(self, k: int, now: int) -> None:
        self.available -= k

    def try_take(self, k: int, now: int) -> bool:
        """``take`` if ``can_take``: one call on the dispatch hot path."""
        a = self.available
        if a >= k:
            self.available = a - k
            return True
        return False

    def give_back(self, k: int) -> None:
        self.available += k

    def ready_at(self, k: int, now: int) -> int | None:
        return None  # only a release frees permits

    def in_use(self, now: int) -> int:
        return self.capacity - self.available


class TokenBucket:
    __slots__ = ("name", "capacity", "rate", "nano", "last")

    def __init__(self, cfg: ResourceConfig, now: int) -> None:
        self.name = cfg.name
        self.capacity = cfg.burst
        self.rate = cfg.rate  # tokens per second == nano-tokens per ns
        self.nano = cfg.burst * NS  # starts full
        self.last = now

    def _refill(self, now: int) -> None:
        if now > self.last:
            cap = self.capacity * NS
            n = self.nano + int(self.rate * (now - self.last))
            self.nano = n if n < cap else cap
            self.last = now

    def can_take(self, k: int, now: int) -> bool:
        self._refill(now)
        return self.nano >= k * NS

    def take(self, k: int, now: int) -> None:
        self._refill(now)
        self.nano -= k * NS

    def try_take(self, k: int, now: int) -> bool:
        """``take`` if ``can_take``: one call on the dispatch hot path."""
        self._refill(now)
        if self.nano >= k * NS:
            self.nano -= k * NS
            return True
        return False

    def give_back(self, k: int) -> None:
        """Tokens are consumed, never returned."""

    def ready_at(self, k: int, now: int) -> int | None:
        """The earliest instant at which ``k`` tokens will be available."""
        self._refill(now)
        missing = k * NS - self.nano
        if missing <= 0:
            return now
        return now + math.ceil(missing / self.rate)

    def tokens(self, now: int) -> float:
        self._refill(now)
        return self.nano / NS

    def in_use(self, now: int) -> int:
        return self.capacity - int(self.tokens(now))


#: The public name: ``Resource.semaphore(name, permits)``, ``Resource.token_bucket(name, rate, burst)``.
Resource = ResourceConfig


class Resources:
    """The resources of one core and the tasks parked on them (see the module docstring)."""

    __slots__ = ("by_name", "timers", "waiters")

    def __init__(self, configs: Iterable[ResourceConfig], now: int, timers: Timers) -> None:
        self.by_name: dict[str, Semaphore | TokenBucket] = {
            r.name: (Semaphore(r) if r.kind == SEMAPHORE else TokenBucket(r, now)) for r in configs
        }
        # ready tasks parked until a resource frees: name -> heap of (class, id, token, task)
        self.waiters: dict[str, list[tuple[int, int, int, TaskState]]] = {}
        self.timers = timers

    def take_all(self, need: dict[str, int], now: int) -> str | None:
        """Take every amount of ``need`` at once; else take none and return the first short one."""
        by_name = self.by_name
        if len(need) == 1:  # the common case: one resource, taken in one call
            ((name, k),) = need.items()
            if by_name[name].try_take(k, now):
                return None
        for name, k in need.items():
            if not by_name[name].can_take(k, now):
                return name
        for name, k in need.items():
            by_name[name].take(k, now)
        return None

    def park(self, name: str, t: TaskState, token: int, now: int) -> None:
        """``t`` (lane token ``token``) waits until ``name`` can serve it."""
        heapq.heappush(self.waiters.setdefault(name, []), (t.opts.priority, t.id, token, t))
        self.arm_refill(name, now)

    def arm_refill(self, name: str, now: int, k: int | None = None) -> None:
        """Wake up when bucket ``name`` holds ``k`` tokens (default: its first waiter's amount)."""
        r = self.by_name[name]
        if not isinstance(r, TokenBucket):
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
        if not waiters:
            return []
        r = self.by_name[name]
        budget = r.available if isinstance(r, Semaphore) else int(r.tokens(now))
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
