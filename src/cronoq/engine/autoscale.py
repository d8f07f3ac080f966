"""Desired-capacity policy of a pool (docs/reference/behaviour.md#autoscaling), evaluated every ``interval``.

``raw = max(slots(λ·s/target_utilization + B·s/drain_time), max_c slots(B_c·s/slo[c]), busy) + R``
clamped to ``[min, max]``, with ``slots(x) = 0 if x < 0.01 else ceil(x)``, where λ is an EWMA
of the arrival rate, s the mean expected duration of the pool's work, B the backlog (ready +
due + retrying that a worker could start: not parked on a resource, none in a paused pool;
``PoolState.backlog_by_class``), B_c the backlog of class c and more important classes, and R the peak number
of concurrent reservations starting within ``reservation_horizon``.

Steps are limited: up by at most ``max(ceil(capacity × max_step_up_ratio), max_step_up_abs)``
per evaluation; down only to the highest ``raw`` seen within ``stabilization_window``, by at most
``max_step_down`` per ``cooldown``.
"""

from __future__ import annotations

import math
from collections import deque

from cronoq.engine.config import AutoscaleConfig
from cronoq.engine.time import NS


def slots(x: float) -> int:
    return 0 if x < 0.01 else math.ceil(x - 1e-9)


class Autoscaler:
    """Per-pool autoscaler state; pure arithmetic, fed by the core."""

    __slots__ = ("cfg", "lo", "hi", "rate", "arrivals", "last_eval", "history", "last_down")

    def __init__(self, cfg: AutoscaleConfig, lo: int, hi: int, now: int) -> None:
        self.cfg = cfg
        self.lo = lo
        self.hi = hi
        self.rate = 0.0  # EWMA of arrivals per second
        self.arrivals = 0  # since the last evaluation
        self.last_eval = now
        self.history: deque[tuple[int, int]] = deque()  # (time, raw) within the stabilization window
        self.last_down: int | None = None

    def raw(
        self,
        *,
        service_s: float,
        backlog: int,
        backlog_by_class: list[int],
        busy: int,
        reservations_peak: int,
    ) -> int:
        cfg = self.cfg
        base = slots(self.rate * service_s / cfg.target_utilization + backlog * service_s / cfg.drain_time)
        slo_term = 0
        cum = 0
        for c, b in enumerate(backlog_by_class):
            cum += b
            slo = cfg.slo.get(c)
            if slo:
                slo_term = max(slo_term, slots(cum * service_s / slo))
        return max(base, slo_term, busy) + reservations_peak

    def evaluate(
        self,
        now: int,
        capacity: int,
        *,
        service_s: float,
        backlog: int,
        backlog_by_class: list[int],
        busy: int,
        reservations_peak: int,
    ) -> int:
        """Update the arrival EWMA and return the desired capacity for ``now``."""
        cfg = self.cfg
        dt = (now - self.last_eval) / NS
        if dt > 0:
            inst = self.arrivals / dt
            self.rate += cfg.ewma_alpha * (inst - self.rate)
        self.arrivals = 0
        self.last_eval = now
        raw = self.raw(
            service_s=service_s,
            backlog=backlog,
            backlog_by_class=backlog_by_class,
            busy=busy,
            reservations_peak=reservations_peak,
        )
        raw = min(max(raw, self.lo), self.hi)
        hist = self.history
        hist.append((now, raw))
        horizon = now - round(cfg.stabilization_window * NS)
        while hist and hist[0][0] < horizon:
            hist.popleft()
        if raw > capacity:
            step = max(math.ceil(capacity * cfg.max_step_up_ratio), cfg.max_step_up_abs)
            return min(raw, capacity + step)
        if raw < capacity:
            floor = max(r for _, r in hist)
            target = max(raw, floor)
            if target >= capacity:
                return capacity
            cooldown = round(cfg.cooldown * NS)
            if self.last_down is not None and now - self.last_down < cooldown:
                return capacity
            if cfg.max_step_down <= 0:
                return capacity
            self.last_down = now
            return max(target, capacity - cfg.max_step_down)
        return capacity
