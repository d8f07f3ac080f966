"""Shadow model and invariants of the autoscaler (docs/reference/behaviour.md#autoscaling) for the feature
simulator.

The shadow recomputes every evaluation from docs/reference/behaviour.md#autoscaling with its own inputs: λ,
the EWMA (α = 0.3) of arrivals per second, counted from the ``ready`` event of new work (from blocked or
scheduled; a retry is not an arrival);
s, the service time; B and B_c, the pool's ready + retrying tasks by class, less those the
engine parked on a resource (each checked to be a ready task that needs one), none while the
pool is paused; busy, the
unlabelled group's running attempts; R, the peak overlap of the pool's reservation windows that
start within ``reservation_horizon`` (and have not ended).  Then
``raw = max(slots(λ·s/target_utilization + B·s/drain_time), max_c slots(B_c·s/slo[c]), busy) + R``
clamped to ``[min, max]``, the step-up limit, and the stabilization window / cooldown /
``max_step_down`` for steps down.

s: the reference says "the mean expected duration of the pool's work"
(docs/reference/behaviour.md#expected-duration).  The engine estimates it from a sample (up to 64 queued tasks
per class and lane structure, weighted by each class's backlog), falling back to the pool's run-time EWMA or
``default_duration`` when no ready task is queued.  Which tasks the sample holds is an engine detail (parked
tasks, due fixed starts and retrying ones are not in the lanes), so the shadow does not predict s exactly: it
records the s the engine used (a recording proxy around the pool's ``Autoscaler``) and checks it is either
the fallback or within the expected durations of the pool's ready tasks, which the shadow
computes itself (hint, else its own EWMA α = 0.2 of successful runs per (pool, kind), else the
pool default).  Everything else is recomputed exactly with that s.

Invariants (``autoscale``):

* evaluations happen exactly every ``interval`` while the pool is not idle: armed at start when
  the pool starts off ``min``, else by the first arrival or capacity change; re-armed after
  each evaluation unless idle (nothing pending or running, capacity at ``min``, λ < 0.01);
  never early, never late, never when disarmed;
* each evaluation's desired capacity equals the shadow's; ``Scale(pool, desired)`` is emitted
  iff it differs from the unlabelled group's capacity; ``PoolSnapshot.desired`` shows it;
* bounds: a desired capacity is within ``[min, max]`` whenever the capacity it starts from is,
  and otherwise moves towards that range; it never scales down below the running attempts;
* steps: up by at most ``max(ceil(capacity × 1.0), max_step_up_abs)``; down by at most
  ``max_step_down``, at most once per ``cooldown``, never below a raw value of the
  stabilization window.

The simulator plays the pool's scaler: it applies each ``Scale`` at once (``SlotScaler``),
after a delay and in request order (a slow external scaler), capped at a quota, or not at all
(an external scaler that never follows); the applied capacity must then hold (``groups``).
"""

from __future__ import annotations

import math
from collections import deque
from typing import TYPE_CHECKING, Any

from cronoq.engine.actions import Scale
from cronoq.engine.time import NS

if TYPE_CHECKING:
    from cronoq.engine.config import AutoscaleConfig

    from .feature_invariants import FeatureShadow

NUM_CLASSES = 4


def slots(x: float) -> int:
    """docs/reference/behaviour.md#autoscaling: ``0 if x < 0.01 else ceil(x)`` (with a 1e-9 tolerance for
    float noise)."""
    return 0 if x < 0.01 else math.ceil(x - 1e-9)


class Recorder:
    """Stands in for a pool's ``Autoscaler`` and records the inputs of each evaluation."""

    __slots__ = ("_inner", "last")

    def __init__(self, inner: Any) -> None:
        object.__setattr__(self, "_inner", inner)
        object.__setattr__(self, "last", None)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def __setattr__(self, name: str, value: Any) -> None:
        if name == "last":
            object.__setattr__(self, name, value)
        else:
            setattr(self._inner, name, value)

    def evaluate(self, now: int, capacity: int, **kw: Any) -> int:
        self.last = (now, kw)
        result: int = self._inner.evaluate(now, capacity, **kw)
        return result


class PoolScaler:
    __slots__ = (
        "arrivals",
        "armed_at",
        "cfg",
        "hi",
        "history",
        "last_down",
        "last_eval",
        "lo",
        "pool",
        "rate",
        "run_ewma",
    )

    def __init__(self, pool: int, cfg: AutoscaleConfig, lo: int, hi: int, now: int) -> None:
        self.pool = pool
        self.cfg = cfg
        self.lo = lo
        self.hi = hi
        self.reset(now)

    def reset(self, now: int) -> None:
        self.rate = 0.0
        self.arrivals = 0
        self.last_eval = now
        self.history: deque[tuple[int, int]] = deque()
        self.last_down: int | None = None
        self.armed_at: int | None = None
        self.run_ewma = 0.0

    def arm(self, now: int) -> None:
        if self.armed_at is None:
            self.armed_at = now + round(self.cfg.interval * NS)


class AutoscaleShadow:
    def __init__(self, sh: FeatureShadow) -> None:
        self.sh = sh
        self.pools: dict[int, PoolScaler] = {}
        for i, p in enumerate(sh.config.pools):
            if p.autoscale is not None:
                self.pools[i] = PoolScaler(i, p.autoscale, p.min, p.max, 0)
        self.stats = {"evaluations": 0, "scales": 0, "ups": 0, "downs": 0}
        self.pred: dict[int, tuple[int, int, int, int, bool]] | None = None
        # docs/reference/behaviour.md#expected-duration EWMA per (pool, kind)
        self.learned: dict[tuple[int, str], float] = {}
        self.recorders: dict[int, Recorder] = {}

    def fail(self, detail: str) -> None:
        self.sh.fail("autoscale", detail)

    def reset(self, now: int) -> None:
        """A fresh engine: its autoscalers start over (and are recorded)."""
        core = self.sh.core
        for i, ps in self.pools.items():
            ps.reset(now)
            if core.pools[i].capacity != ps.lo:  # starts off its floor: evaluated from the start
                ps.arm(now)
        self.learned = {}
        self.recorders = {}
        for i in self.pools:
            rec = Recorder(core.pools[i].scaler)
            core.pools[i].scaler = rec
            self.recorders[i] = rec

    # ------------------------------------------------------------------ inputs

    def created(self, pool: int) -> None:
        """A new task: the pool's evaluations are armed (its arrival counts when it is ready)."""
        ps = self.pools.get(pool)
        if ps is not None:
            ps.arm(self.sh.now)

    def arrival(self, pool: int) -> None:
        """New work became ready (blocked/scheduled -> ready; not a retry): one arrival."""
        ps = self.pools.get(pool)
        if ps is not None:
            ps.arrivals += 1

    def capacity_changed(self, pool: int) -> None:
        ps = self.pools.get(pool)
        if ps is not None:
            ps.arm(self.sh.now)

    def succeeded(self, pool: int, kind: str, run: int) -> None:
        key = (pool, kind)
        prev = self.learned.get(key)
        self.learned[key] = float(run) if prev is None else prev + self.sh.config.ewma_alpha * (run - prev)
        ps = self.pools.get(pool)
        if ps is not None:
            ew = ps.run_ewma
            ps.run_ewma = float(run) if ew == 0.0 else ew + 0.2 * (run - ew)

    # ------------------------------------------------------------------ evaluation

    def _resource_held(self, ps: PoolScaler) -> set[int]:
        """The ready tasks the engine parked on a resource (not backlog: no worker can start
        them), each checked to be a ready task of the pool that needs a resource."""
        held = set(self.sh.core.pools[ps.pool].resource_held)
        for tid in held:
            t = self.sh.tasks.get(tid)
            if t is None or t.pool != ps.pool or t.status != "ready" or not t.spec.resources:
                self.fail(f"task {tid} held by a resource in the engine but not a ready task needing one")
        return held

    def _desired(self, ps: PoolScaler, now: int) -> tuple[int, int]:
        """One evaluation as docs/reference/behaviour.md#autoscaling describes it: (desired, raw)."""
        sh = self.sh
        cfg = ps.cfg
        dt = (now - ps.last_eval) / NS
        if dt > 0:
            ps.rate += cfg.ewma_alpha * (ps.arrivals / dt - ps.rate)
        ps.arrivals = 0
        ps.last_eval = now
        by_class = [0] * NUM_CLASSES
        held = self._resource_held(ps)
        for t in sh.tasks.values():
            if t.pool == ps.pool and t.status in ("ready", "retrying") and t.id not in held:
                by_class[t.spec.priority] += 1
        if sh.core.pools[ps.pool].paused:
            by_class = [0] * NUM_CLASSES
        backlog = sum(by_class)
        s = self._service_s(ps, now)
        g0 = sh.groups[ps.pool][0]
        base = slots(ps.rate * s / cfg.target_utilization + backlog * s / cfg.drain_time)
        slo_term = 0
        cum = 0
        for c in range(NUM_CLASSES):
            cum += by_class[c]
            slo = cfg.slo.get(c)
            if slo:
                slo_term = max(slo_term, slots(cum * s / slo))
        horizon = now + round(cfg.reservation_horizon * NS)
        upcoming = [w for w in sh.res[ps.pool].values() if w[0] <= horizon and w[1] >= now]
        from .feature_invariants import max_overlap

        peak = max_overlap(upcoming, -(1 << 62), 1 << 62)
        raw = max(base, slo_term, g0.running) + peak
        raw = min(max(raw, ps.lo), ps.hi)
        hist = ps.history
        hist.append((now, raw))
        while hist and hist[0][0] < now - round(cfg.stabilization_window * NS):
            hist.popleft()
        cap = g0.capacity
        if raw > cap:
            return min(raw, cap + max(math.ceil(cap * cfg.max_step_up_ratio), cfg.max_step_up_abs)), raw
        if raw < cap:
            target = max(raw, max(r for _, r in hist))
            if target >= cap:
                return cap, raw
            if ps.last_down is not None and now - ps.last_down < round(cfg.cooldown * NS):
                return cap, raw
            if cfg.max_step_down <= 0:
                return cap, raw
            ps.last_down = now
            return max(target, cap - cfg.max_step_down), raw
        return cap, raw

    def _service_s(self, ps: PoolScaler, now: int) -> float:
        """The s the engine used, checked against the expected durations of the ready work."""
        sh = self.sh
        rec = self.recorders[ps.pool]
        if rec.last is None or rec.last[0] != now:
            self.fail(f"pool {sh.config.pools[ps.pool].name}: no evaluation at {now} (last {rec.last})")
        assert rec.last is not None
        s: float = rec.last[1]["service_s"]
        default = sh.config.pools[ps.pool].default_duration
        fallback = (ps.run_ewma if ps.run_ewma > 0 else float(default)) / NS
        if s == fallback:
            return s
        exp = []
        for t in sh.tasks.values():
            if t.pool == ps.pool and t.status == "ready":
                hint = t.spec.hint
                learned = self.learned.get((ps.pool, t.spec.kind))
                exp.append(hint if hint is not None else int(learned) if learned is not None else default)
        if not exp or not min(exp) / NS * (1 - 1e-9) <= s <= max(exp) / NS * (1 + 1e-9):
            lo, hi = (min(exp) / NS, max(exp) / NS) if exp else (None, None)
            self.fail(
                f"pool {sh.config.pools[ps.pool].name}: service time s={s} is neither the fallback "
                f"{fallback} nor within the ready work's expected durations [{lo}, {hi}]"
            )
        return s

    def begin_tick(self) -> None:
        self.pred: dict[int, tuple[int, int, int, int, bool]] | None = None

    def evaluate_due(self) -> None:
        """The tick's timers fire before its dispatches: evaluate the due pools now (once)."""
        if self.pred is not None:
            return
        self.pred = {}
        now = self.sh.now
        for i, ps in self.pools.items():
            if ps.armed_at is not None and ps.armed_at <= now:
                g0 = self.sh.groups[i][0]
                cap, busy = g0.capacity, g0.running
                desired, raw = self._desired(ps, now)
                pending = sum(1 for t in self.sh.tasks.values() if t.pool == i and t.status in PENDING)
                running = sum(g.running for g in self.sh.groups[i])
                idle = pending == 0 and running == 0 and cap <= ps.lo and ps.rate < 0.01
                self.pred[i] = (desired, raw, cap, busy, idle)

    def after_tick(self, actions: list[Any]) -> None:
        """Evaluations due at this tick happened, with the predicted outcome; none other."""
        sh = self.sh
        now = sh.now
        self.evaluate_due()
        assert self.pred is not None
        scales = {a.pool: a.desired for a in actions if type(a) is Scale}
        for i, ps in self.pools.items():
            name = sh.config.pools[i].name
            got = sh.core.pools[i].desired
            if i not in self.pred:
                if name in scales:
                    self.fail(f"pool {name}: Scale({scales[name]}) with no evaluation due ({ps.armed_at})")
                continue
            if ps.armed_at != now:
                self.fail(f"pool {name}: evaluation due at {ps.armed_at} ran late at {now}")
            ps.armed_at = None
            self.stats["evaluations"] += 1
            desired, raw, cap, busy, idle = self.pred[i]
            if got != desired:
                self.fail(f"pool {name}: desired {got}, expected {desired} (raw {raw}, capacity {cap})")
            if (name in scales) != (desired != cap) or scales.get(name, desired) != desired:
                self.fail(f"pool {name}: actions {scales} for desired {desired} at capacity {cap}")
            self._check_bounds(ps, name, cap, desired, busy)
            if desired != cap:
                self.stats["scales"] += 1
                self.stats["ups" if desired > cap else "downs"] += 1
            if not idle:
                ps.arm(now)
        self.check_wakeup()

    def _check_bounds(self, ps: PoolScaler, name: str, cap: int, desired: int, busy: int) -> None:
        cfg = ps.cfg
        lo, hi = ps.lo, ps.hi
        if lo <= cap <= hi and not lo <= desired <= hi:
            self.fail(f"pool {name}: desired {desired} outside [{lo}, {hi}] (capacity {cap})")
        if not min(cap, lo) <= desired <= max(cap, hi):
            self.fail(f"pool {name}: desired {desired} moves away from [{lo}, {hi}] (capacity {cap})")
        if desired > cap and desired - cap > max(math.ceil(cap * cfg.max_step_up_ratio), cfg.max_step_up_abs):
            self.fail(f"pool {name}: step up {cap} -> {desired} too large")
        if desired < cap and (cap - desired > cfg.max_step_down or desired < min(busy, hi)):
            self.fail(
                f"pool {name}: step down {cap} -> {desired} (busy {busy}, max_step_down {cfg.max_step_down})"
            )

    def check_wakeup(self) -> None:
        """After a tick the engine's next wake-up is not after a pending evaluation."""
        nw = self.sh.core.next_wakeup()
        for ps in self.pools.values():
            if ps.armed_at is not None and (nw is None or nw > ps.armed_at):
                self.fail(f"next_wakeup {nw} after the evaluation due at {ps.armed_at}")


PENDING = frozenset({"blocked", "scheduled", "ready", "retrying"})
