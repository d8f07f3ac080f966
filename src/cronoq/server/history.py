"""The server's own short history of its pools: per-second snapshots of the last 30 minutes
(``GET /v1/history``, docs/reference/http.md#history), so the dashboard's charts show the last
half hour from the moment a page is opened, not only what that page saw.

Theory of operation
-------------------
:class:`HistoryRing` is a plain bounded ring (a ``deque`` with ``maxlen``) of
:class:`HistoryPoint`\\ s, one per whole second: :meth:`HistoryRing.record` takes a Unix time
and an engine :class:`~cronoq.engine.snapshot.Snapshot` and keeps a few figures per pool
(:data:`FIELDS`); a second sample within the same whole second replaces the previous one, a
sample older than the newest one is ignored (a clock that stepped back never reorders the
ring).  :meth:`HistoryRing.since` answers the points at or after a time.  The ring knows
nothing about clocks, tasks or the event loop, so it is tested with plain numbers.

:func:`run_sampler` is the loop that fills it: while the server leads, it takes
``await sched.snapshot()`` and records it at ``sched.clock.time_ns()``, then sleeps on the
same clock until the next whole second (``clock.sleep``; under a virtual clock the loop
advances with virtual time).  A standby records nothing (its ring keeps what it had: a gap
in the charts is honest).  One sample costs one engine snapshot (O(pools)), once a second.

Memory is bounded: ``capacity`` points (default 1,800) × pools × :data:`FIELDS`.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from cronoq.engine.snapshot import Snapshot

if TYPE_CHECKING:
    from cronoq.server.app import ServerApp

__all__ = ["FIELDS", "HISTORY_S", "HistoryPoint", "HistoryRing", "PoolSample", "run_sampler"]

log = logging.getLogger("cronoq.server.history")

#: seconds of history kept (one point per second)
HISTORY_S: Final = 1800
#: the figures kept per pool and point (``pending_by_class`` is a list of four counts)
FIELDS: Final = (
    "busy",
    "capacity",
    "desired",
    "held",
    "pending",
    "pending_by_class",
    "dispatched",
    "succeeded",
    "failed",
    "paused",
)


@dataclass(frozen=True, slots=True)
class PoolSample:
    """One pool's figures at one point (``dispatched``/``succeeded``/``failed``: the
    snapshot's 60-second window counts)."""

    busy: int
    capacity: int
    desired: int
    held: int
    pending: int
    pending_by_class: tuple[int, ...]
    dispatched: int
    succeeded: int
    failed: int
    paused: bool

    def as_json(self) -> dict[str, Any]:
        return {
            "busy": self.busy,
            "capacity": self.capacity,
            "desired": self.desired,
            "held": self.held,
            "pending": self.pending,
            "pending_by_class": list(self.pending_by_class),
            "dispatched": self.dispatched,
            "succeeded": self.succeeded,
            "failed": self.failed,
            "paused": self.paused,
        }


@dataclass(frozen=True, slots=True)
class HistoryPoint:
    """The pools at ``at`` (Unix seconds, a whole second)."""

    at: int
    pools: dict[str, PoolSample]

    def as_json(self, keep: Callable[[str], bool] | None = None) -> dict[str, Any]:
        return {
            "at": self.at,
            "pools": {n: s.as_json() for n, s in self.pools.items() if keep is None or keep(n)},
        }


def sample_of(snap: Snapshot) -> dict[str, PoolSample]:
    """The figures of every pool of an engine snapshot."""
    out: dict[str, PoolSample] = {}
    for p in snap.pools:
        out[p.name] = PoolSample(
            busy=p.busy,
            capacity=p.capacity,
            desired=p.desired,
            held=p.held,
            pending=p.pending,
            pending_by_class=tuple(p.pending_by_class),
            dispatched=p.dispatched,
            succeeded=p.succeeded,
            failed=p.failed,
            # (PoolSnapshot.paused arrives with pause/resume; absent = never paused)
            paused=bool(getattr(p, "paused", False)),
        )
    return out


class HistoryRing:
    """A bounded ring of per-second points (see the module docstring)."""

    __slots__ = ("_points", "capacity")

    def __init__(self, capacity: int = HISTORY_S) -> None:
        if isinstance(capacity, bool) or not isinstance(capacity, int) or capacity < 1:
            raise ValueError(f"capacity must be an int >= 1 (got {capacity!r})")
        self.capacity = capacity
        self._points: deque[HistoryPoint] = deque(maxlen=capacity)

    def __len__(self) -> int:
        return len(self._points)

    def record(self, at: float, snap: Snapshot) -> bool:
        """Keep ``snap`` as the point of the whole second ``at`` falls in; False (nothing kept)
        when that second is older than the newest point."""
        return self.record_sample(at, sample_of(snap))

    def record_sample(self, at: float, pools: dict[str, PoolSample]) -> bool:
        sec = int(at // 1)
        pts = self._points
        if pts and sec < pts[-1].at:
            return False
        point = HistoryPoint(sec, pools)
        if pts and sec == pts[-1].at:
            pts[-1] = point
        else:
            pts.append(point)
        return True

    def since(self, at: float) -> list[HistoryPoint]:
        """The points at or after ``at`` (Unix seconds), oldest first."""
        return [p for p in self._points if p.at >= at]

    def latest(self) -> HistoryPoint | None:
        return self._points[-1] if self._points else None

    def points(self) -> Iterable[HistoryPoint]:
        return tuple(self._points)


async def run_sampler(app: ServerApp, ring: HistoryRing, interval_s: float = 1.0) -> None:
    """Fill ``ring`` once per ``interval_s`` while ``app`` leads, until cancelled or stopped."""
    while not app.stopping:
        sched = app.sched  # (a new scheduler per leadership term)
        clock = sched.clock
        if app.leading and sched.started:
            try:
                snap = await sched.snapshot()
            except Exception as e:  # stopped or fenced between the check and the call
                log.debug("history sample skipped: %s", e)
            else:
                ring.record(clock.time_ns() / 1e9, snap)
        now = clock.time_ns() / 1e9
        wait = interval_s - (now % interval_s)
        await clock.sleep(wait if wait > 0.001 else interval_s)
