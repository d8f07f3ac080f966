"""Weighted fair sharing of a priority class between tenants (docs/reference/behaviour.md#fairness).

A :class:`FairLane` replaces a class's plain :class:`~cronoq.engine.lanes.Lane` when the pool
has ``fair_share=True``.  Each tenant has its own Lane and a virtual time; the head offered
for dispatch is the best head of the tenant with the lowest virtual time that has ready work
(ties: lower sequence).  Each dispatch adds ``1 / weight`` to its tenant's virtual time.  A
tenant that becomes active again starts at the current minimum virtual time of the active
tenants, or at the virtual time of the last dispatch when none is active (no banked credit).
Tasks without a tenant form one tenant (``None``).
"""

from __future__ import annotations

from cronoq.engine.lanes import Lane
from cronoq.engine.model import TaskState


class FairLane:
    __slots__ = ("weights", "lanes", "vt", "active", "clock")

    def __init__(self, weights: dict[str, float]) -> None:
        self.weights = weights
        self.lanes: dict[str | None, Lane] = {}
        self.vt: dict[str | None, float] = {}
        self.active: dict[str | None, int] = {}  # tenant -> ready tasks in its lane
        # virtual time of the last dispatch (its tenant had the minimum): the floor for a tenant
        # that becomes active while no other tenant has ready work, so that such a moment does
        # not hand out credit (SFQ's system virtual time)
        self.clock = 0.0

    def _min_active_vt(self) -> float | None:
        vals = [self.vt[t] for t, n in self.active.items() if n > 0]
        return min(vals) if vals else None

    def push(self, t: TaskState, token: int) -> None:
        tenant = t.opts.tenant
        lane = self.lanes.get(tenant)
        if lane is None:
            lane = self.lanes[tenant] = Lane()
        n = self.active.get(tenant, 0)
        if n == 0:
            floor = self._min_active_vt()
            if floor is None:
                floor = self.clock
            cur = self.vt.get(tenant, 0.0)
            self.vt[tenant] = cur if floor is None or cur >= floor else floor
        self.active[tenant] = n + 1
        lane.push(t, token)

    def removed(self, t: TaskState) -> None:
        """A task of this lane left the ready state (dispatched, cancelled, shed, ...)."""
        tenant = t.opts.tenant
        self.active[tenant] = self.active.get(tenant, 1) - 1

    def dispatched(self, t: TaskState) -> None:
        tenant = t.opts.tenant
        v = self.vt.get(tenant, 0.0)
        if v > self.clock:
            self.clock = v
        self.vt[tenant] = v + 1.0 / self.weights.get(tenant or "", 1.0)

    def _choose(self) -> Lane | None:
        best: Lane | None = None
        best_key: tuple[float, int] | None = None
        for tenant, n in self.active.items():
            if n <= 0:
                continue
            lane = self.lanes[tenant]
            h = lane.fifo_head()
            d = lane.dl_head()
            seq = min(x.id for x in (h, d) if x is not None) if (h or d) else None
            if seq is None:
                continue
            key = (self.vt[tenant], seq)
            if best_key is None or key < best_key:
                best, best_key = lane, key
        return best

    def fifo_head(self) -> TaskState | None:
        lane = self._choose()
        return None if lane is None else lane.fifo_head()

    def dl_head(self) -> TaskState | None:
        lane = self._choose()
        return None if lane is None else lane.dl_head()

    @property
    def dl(self) -> list[object]:
        return [1] if any(lane.dl for lane in self.lanes.values()) else []

    def newest(self) -> TaskState | None:
        best: TaskState | None = None
        for lane in self.lanes.values():
            t = lane.newest()
            if t is not None and (best is None or t.id > best.id):
                best = t
        return best

    def oldest(self) -> TaskState | None:
        best: TaskState | None = None
        for lane in self.lanes.values():
            t = lane.oldest()
            if t is not None and (best is None or t.id < best.id):
                best = t
        return best

    def __len__(self) -> int:
        return sum(len(lane) for lane in self.lanes.values())
