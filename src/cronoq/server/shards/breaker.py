"""A circuit breaker and a call budget per peer shard (docs/how-to/shards.md#a-peer-that-hangs).

Theory of operation
-------------------
A peer that hangs (a frozen process, a black-holed network) does not refuse calls: each one
waits for its whole deadline.  Without a breaker every call that involved such a peer took that
long, every time, and held one of the caller's request slots meanwhile, until the shard that
forwarded refused its own work with 429.  So each peer shard gets a :class:`Breaker`:

* **closed** (normal): calls go through.  A call that no address of the peer answered in time
  is a failure; any answer, an error answer included, is a success (the peer is alive) and
  resets the count.  ``failures`` consecutive failures open the breaker.
* **open**: calls fail at once (the shard is unreachable) for ``reset_s`` seconds.
* **half-open**: after ``reset_s`` one call, the probe, goes through while the others still
  fail at once; the probe's success closes the breaker, its failure opens it for another
  ``reset_s``.

Besides, at most ``max_calls`` unary calls may be in flight to one peer at once (its own budget,
apart from the listener's request budget): a call beyond it fails at once instead of waiting,
so a slow peer can hold at most that many of the forwarding server's request slots.

Pure and synchronous: the caller passes the monotonic clock's ``now`` (seconds).
"""

from __future__ import annotations

from typing import Literal

__all__ = ["Breaker"]

State = Literal["closed", "open", "half-open"]


class Breaker:
    """The breaker and in-flight budget of one peer shard (see the module docstring)."""

    __slots__ = ("failed", "failures", "in_flight", "max_calls", "opened_at", "probing", "reset_s")

    def __init__(self, failures: int, reset_s: float, max_calls: int) -> None:
        self.failures = failures
        self.reset_s = reset_s
        self.max_calls = max_calls
        self.failed = 0  # consecutive failures
        self.opened_at: float | None = None  # when it opened (None: closed)
        self.probing = False  # the half-open probe is in flight
        self.in_flight = 0

    def state(self, now: float) -> State:
        if self.opened_at is None:
            return "closed"
        return "half-open" if now - self.opened_at >= self.reset_s else "open"

    def admit(self, now: float, *, counted: bool = True) -> bool | str:
        """Let one call through (whether it is the half-open probe: pass it to :meth:`done`) or
        say why it fails at once (a str).  ``counted``: a unary call, which counts against
        ``max_calls`` until :meth:`done` (streams are not counted)."""
        state = self.state(now)
        if state == "open":
            assert self.opened_at is not None
            left = self.reset_s - (now - self.opened_at)
            return f"circuit open after {self.failed} failed calls; next probe in {left:.1f} s"
        if state == "half-open":
            if self.probing:
                return "circuit open; a probe call is in flight"
            self.probing = True
        elif counted and self.in_flight >= self.max_calls:
            return f"{self.max_calls} calls to it in flight (limits.max_peer_calls)"
        if counted:
            self.in_flight += 1
        return state == "half-open"

    def done(self, now: float, answered: bool, probe: bool, *, counted: bool = True) -> None:
        """Record the end of an admitted call: ``answered`` when the peer answered at all;
        ``probe`` as :meth:`admit` returned it."""
        if counted:
            self.in_flight -= 1
        if probe:
            self.probing = False
        if answered:
            self.failed = 0
            self.opened_at = None
            return
        self.failed += 1
        if probe or self.failed >= self.failures:
            self.opened_at = now
