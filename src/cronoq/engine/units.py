"""The units resources are made of (docs/reference/behaviour.md#resources): a semaphore's
permits and a token bucket's tokens, with the calls dispatch makes on them.

* :class:`Semaphore` — ``permits`` units; a running task holds its units until its attempt ends.
* :class:`TokenBucket` — starts full (``burst`` tokens), refills continuously at ``rate`` per
  second up to ``burst``; tokens are taken at dispatch and never returned.  Token arithmetic
  is exact: tokens are kept in "nano-tokens" (tokens × 1e9) so refill over ``dt`` ns is the
  integer ``rate × dt``, and ``ready_at(k)`` tells the core when to wake up (no polling).

The units of keyed resources (``keyed.py``) extend these two.  ``finish`` is the one call a
unit gets when a task's attempt succeeds and the task ends (its units back, and for a keyed
unit the task no longer counted in its key): the complete hot path.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from cronoq.engine.time import NS

if TYPE_CHECKING:
    from cronoq.engine.model import TaskState
    from cronoq.engine.resources import ResourceConfig

SEMAPHORE = "semaphore"
TOKEN_BUCKET = "token_bucket"


class Semaphore:
    __slots__ = ("name", "capacity", "available")

    refills = False

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

    def finish(self, t: TaskState, k: int, now: int) -> None:
        """Task ``t``'s attempt succeeded: ``give_back`` (nothing else to count)."""
        self.available += k

    def ready_at(self, k: int, now: int) -> int | None:
        return None  # only a release frees permits

    def in_use(self, now: int) -> int:
        return self.capacity - self.available

    def budget(self, now: int) -> int:
        return self.available


class TokenBucket:
    __slots__ = ("name", "capacity", "rate", "nano", "last")

    refills = True

    def __init__(self, cfg: ResourceConfig, now: int) -> None:
        self.name = cfg.name
        self.capacity = cfg.burst
        self.rate = cfg.rate  # tokens per second == nano-tokens per ns
        self.nano = cfg.burst * NS  # starts full
        self.last = now

    def _refill(self, now: int) -> None:
        last = self.last
        if now > last:
            self.last = now
            nano = self.nano
            cap = self.capacity * NS
            if nano < cap:  # (a full bucket, the common case, stays full)
                n = nano + int(self.rate * (now - last))
                self.nano = n if n < cap else cap

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

    def finish(self, t: TaskState, k: int, now: int) -> None:
        """Task ``t``'s attempt succeeded: tokens are consumed, never returned."""

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

    def budget(self, now: int) -> int:
        return int(self.tokens(now))
