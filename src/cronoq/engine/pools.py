"""Pool and worker-group state, with the pool's autoscaler evaluation
(docs/reference/behaviour.md#autoscaling, docs/reference/behaviour.md#labels).

Theory of operation
-------------------
A :class:`PoolState` is the live state of one configured pool: its worker groups (one
unlabelled group first, then labelled ones by number of labels and creation order), the
per-class counters the core keeps exact on every transition (pending, ready, retrying), the
class lanes ready tasks queue in, the due heap of fixed-start tasks, the reservation windows
of not-yet-started fixed-start tasks, and the quality window and capacity integral the
snapshot reads.  The core mutates the counters on its hot path directly (they are plain
slots); what changes a pool's shape is done here: :meth:`PoolState.resize_group` sizes,
adds or removes a group and keeps ``capacity`` the sum over groups.

The autoscaler (``autoscale.py``) owns the control law; :meth:`PoolState.evaluate_scale`
gathers its inputs from the pool - the backlog per class, the service time ``s`` estimated
from the expected durations of up to ``SERVICE_SAMPLE`` queued tasks per class (or the
pool's learned run time), the peak of reservations within the horizon - and records the
desired capacity.  The core emits the ``Scale`` action and re-arms the evaluation timer
until :meth:`PoolState.scale_idle`.  Nothing here emits actions or touches timers.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from itertools import chain, islice
from typing import Any

from cronoq.engine.autoscale import Autoscaler
from cronoq.engine.config import PoolConfig
from cronoq.engine.fairness import FairLane
from cronoq.engine.lanes import IN_FIFO, Lane
from cronoq.engine.model import NUM_CLASSES, READY, TaskOptions, TaskState
from cronoq.engine.reservations import max_overlap
from cronoq.engine.stats import CapacityIntegral, PoolWindow
from cronoq.engine.time import NS, to_ns
from cronoq.engine.timers import T_SCALE, Timers

#: the task kinds a worker group serves; None: any kind (a plain handler; docs/how-to/deploys.md)
Kinds = frozenset[str] | None

SERVICE_SAMPLE = 64  # queued tasks per class and lane structure the autoscaler's s is estimated from


class Group:
    """Worker slots of a pool that share one label set and one set of served task kinds
    (docs/reference/behaviour.md#labels; ``kinds`` None: any kind, as a plain handler)."""

    __slots__ = ("labels", "capacity", "busy", "order", "kinds")

    def __init__(self, labels: dict[str, str], capacity: int, order: int, kinds: Kinds = None) -> None:
        self.labels = labels
        self.capacity = capacity
        self.busy = 0
        self.order = order
        self.kinds = kinds

    def serves(self, kind: str) -> bool:
        """Whether this group's workers run tasks of ``kind`` (docs/how-to/deploys.md)."""
        kinds = self.kinds
        return kinds is None or kind in kinds

    def accepts(self, need: dict[str, str] | None) -> bool:
        if not need:
            return True
        lab = self.labels
        return all(lab.get(k) == v for k, v in need.items())


class PoolState:
    """Live state of one pool."""

    __slots__ = (
        "busy",
        "capacity",
        "capacity_integral",
        "cfg",
        "desired",
        "due",
        "held",
        "index",
        "lane_ready",
        "lanes",
        "name",
        "pending",
        "pending_by_class",
        "queued",
        "ready",
        "ready_by_class",
        "resource_held",
        "resource_held_by_class",
        "res",
        "waiting_space",
        "window",
        "groups",
        "label_waiters",
        "fair",
        "scaler",
        "scale_armed",
        "retrying",
        "retrying_by_class",
        "run_ewma",
        "group_order",
        "paused",
        "kinded",
    )

    def __init__(self, index: int, cfg: PoolConfig, now: int, window_ns: int) -> None:
        self.index = index
        self.name = cfg.name
        self.cfg = cfg
        # worker groups: [unlabelled, then labelled by (#labels, creation order)]
        self.groups = [Group({}, cfg.initial_capacity, 0)]
        self.group_order = 1
        self.capacity = cfg.initial_capacity  # sum over groups
        self.busy = 0  # sum over groups
        self.held = 0
        self.desired = self.capacity
        self.pending = 0
        self.pending_by_class = [0] * NUM_CLASSES
        self.ready = 0
        self.ready_by_class = [0] * NUM_CLASSES
        self.lane_ready = [0] * NUM_CLASSES  # ready tasks queued in each class lane
        self.queued = 0  # sum of lane_ready
        # ready fixed-start tasks before their miss deadline: (start, id, task), dispatched first
        self.due: list[tuple[int, int, TaskState]] = []
        self.res: dict[int, tuple[int, int]] = {}  # reservation windows of not-yet-started tasks
        self.fair = cfg.fair_share
        self.lanes: list[Any] = [
            FairLane(cfg.tenant_weights) if cfg.fair_share else Lane() for _ in range(NUM_CLASSES)
        ]
        self.label_waiters: list[tuple[int, TaskState]] = []  # ready tasks no group can take now
        # ready tasks parked on a resource (id -> class): work that cannot run, not backlog
        self.resource_held: dict[int, int] = {}
        self.resource_held_by_class = [0] * NUM_CLASSES
        self.scaler = Autoscaler(cfg.autoscale, cfg.min, cfg.max, now) if cfg.autoscale else None
        self.scale_armed = False
        self.retrying = 0
        self.retrying_by_class = [0] * NUM_CLASSES
        self.run_ewma = 0.0  # ns, successful run times of the whole pool (autoscaler service time)
        self.window = PoolWindow(window_ns)
        self.capacity_integral = CapacityIntegral(now, self.capacity)
        self.waiting_space = False
        self.paused = False  # dispatches nothing new while True (docs/how-to/operations.md)
        self.kinded = False  # some group serves only some task kinds (docs/how-to/deploys.md)

    # ---------------------------------------------------------------- fixed-start tasks

    def arrived(self) -> None:
        """New work became ready (not a retry): one arrival for the autoscaler's λ
        (docs/reference/behaviour.md#autoscaling). Counted then rather than at submission, so that tasks
        blocked on dependencies or with a start ahead (R covers those) do not inflate the arrival rate."""
        sc = self.scaler
        if sc is not None:
            sc.arrivals += 1

    def to_due(self, t: TaskState, now: int) -> None:
        """A ready fixed-start task: queue it where free slots go first, holding one for it."""
        f = t.fixed
        t.ready_at = now
        f.in_due = True
        # (by id, not seq: sequences restart in each epoch, ids are unique and ordered by them)
        heapq.heappush(self.due, (f.start, t.id, t))
        self.hold(t)

    def hold(self, t: TaskState) -> None:
        """Keep a slot free for fixed-start task ``t`` (from start - max_hold on)."""
        f = t.fixed
        if not f.holding:
            f.holding = True
            self.held += 1

    def unhold(self, t: TaskState) -> None:
        f = t.fixed
        if f.holding:
            f.holding = False
            self.held -= 1

    def release_fixed(self, t: TaskState) -> None:
        """Drop the hold and the reservation of a fixed-start task that started or ended."""
        self.unhold(t)
        f = t.fixed
        if f.reserved:
            f.reserved = False
            del self.res[t.id]

    # ---------------------------------------------------------------- groups and scaling

    def resize_group(
        self,
        labels: dict[str, str] | None,
        n: int,
        now: int,
        window_ns: int,
        kinds: Kinds = None,
    ) -> bool:
        """Size the group with ``labels`` serving ``kinds`` (None/{} and None: the unlabelled
        group serving any kind); ``n = 0`` removes another group.  False when nothing changed
        (removing a group that does not exist); ValueError when ``n`` is not an int >= 0.  The
        capacity integral records the change."""
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            raise ValueError(f"capacity must be an int >= 0 (got {n!r})")
        groups = self.groups
        if not labels and kinds is None:
            groups[0].capacity = n
            if self.scaler is None:
                self.desired = n
        else:
            lab = {str(k): str(v) for k, v in (labels or {}).items()}
            found = next((g for g in groups[1:] if g.labels == lab and g.kinds == kinds), None)
            if found is None:
                if n == 0:
                    return False
                groups.append(Group(lab, n, self.group_order, kinds))
                self.group_order += 1
                groups[1:] = sorted(groups[1:], key=lambda g: (len(g.labels), g.order))
            elif n == 0:
                groups.remove(found)
            else:
                found.capacity = n
        self.kinded = any(g.kinds is not None for g in groups)
        self.capacity = sum(g.capacity for g in groups)
        self.capacity_integral.change(now, self.capacity, window_ns)
        return True

    def unpark_labels(self) -> list[TaskState]:
        """The parked tasks (labelled, or of a kind not every group serves) some group can
        take now, out of the parking list."""
        out: list[TaskState] = []
        if not self.label_waiters:
            return out
        keep: list[tuple[int, TaskState]] = []
        for token, t in self.label_waiters:
            if t.status != READY or t.lane_token != token:
                continue
            need, kind = t.opts.labels, t.opts.kind
            if any(g.busy < g.capacity and g.accepts(need) and g.serves(kind) for g in self.groups):
                out.append(t)
            else:
                keep.append((token, t))
        self.label_waiters = keep
        return out

    def space_freed(self) -> bool:
        """A pending task of this full pool left ``pending``: True when a submitter waiting
        for space (``overflow="wait"``) can be told (``SpaceAvailable``); it waits no more."""
        mp = self.cfg.max_pending
        if mp is None or self.pending < mp:
            self.waiting_space = False
            return True
        return False

    def dequeued(self, t: TaskState) -> None:
        """``t`` left its class lane (its lane entry is stale from now on)."""
        c = t.opts.priority
        self.lane_ready[c] -= 1
        self.queued -= 1
        if self.fair:
            self.lanes[c].removed(t)

    def hold_for_resource(self, t: TaskState) -> TaskState:
        """Ready ``t`` is parked until a resource (semaphore, bucket) can serve it; returns
        ``t`` (to park)."""
        c = t.opts.priority
        self.resource_held[t.id] = c
        self.resource_held_by_class[c] += 1
        return t

    def unhold_for_resource(self, t: TaskState) -> PoolState:
        """``t`` left a resource's waiters (back to its lane, or out of ``ready``); else a no-op.
        Returns this pool (to queue ``t`` in)."""
        c = self.resource_held.pop(t.id, None)
        if c is not None:
            self.resource_held_by_class[c] -= 1
        return self

    def backlog_by_class(self) -> list[int]:
        """B_c of docs/reference/behaviour.md#autoscaling: the ready and retrying tasks of each
        class that could run on another worker, so none while the pool is paused, and not those
        parked on a resource (blocked tasks, waiting for an edge, are not ready)."""
        if self.paused:
            return [0] * NUM_CLASSES
        held = self.resource_held_by_class
        return [self.ready_by_class[c] - held[c] + self.retrying_by_class[c] for c in range(NUM_CLASSES)]

    def move_slot(self, t: TaskState, labels: dict[str, str], kinds: Kinds = None) -> bool | None:
        """Move running ``t`` to the slot of the group with exactly ``labels`` and ``kinds``.

        None: no such group, it does not accept ``t``'s labels or kind, or it has no free slot
        (nothing changes); False: nothing to do (already there); True: moved, a slot was given back.
        """
        old = t.group
        if old is not None and old.labels == labels and old.kinds == kinds:
            return False
        for g in self.groups:
            if g.labels == labels and g.kinds == kinds:
                if g.busy >= g.capacity or not g.accepts(t.opts.labels) or not g.serves(t.opts.kind):
                    return None
                g.busy += 1
                t.group = g
                if old is None:
                    return False
                old.busy -= 1
                return True
        return None

    def evaluate_scale(self, now: int, expected: Callable[[TaskOptions], int]) -> int | None:
        """Run the autoscaler (docs/reference/behaviour.md#autoscaling) and record its desired capacity
        (never above the current one while the pool is paused); None: no autoscaler."""
        sc = self.scaler
        if sc is None:
            return None
        by_class = self.backlog_by_class()
        service = self.service_time(by_class, expected)
        horizon = now + to_ns(sc.cfg.reservation_horizon)
        upcoming = [w for w in self.res.values() if w[0] <= horizon and w[1] >= now]
        peak = max_overlap(upcoming, -(1 << 62), 1 << 62) if upcoming else 0
        cap, busy = self.unlabelled()
        desired = sc.evaluate(
            now,
            cap,
            service_s=service / NS,
            backlog=sum(by_class),
            backlog_by_class=by_class,
            busy=busy,
            reservations_peak=peak,
        )
        if self.paused and desired > cap:  # nothing to dispatch to new workers
            desired = cap
        self.desired = desired
        return desired

    def autoscale(self, now: int, timers: Timers, expected: Callable[[TaskOptions], int]) -> int | None:
        """The evaluation timer fired: the new desired capacity when it differs from the
        unlabelled groups' (the shell is told: ``Scale``), else None; the next evaluation is
        armed unless the pool is idle (docs/reference/behaviour.md#autoscaling)."""
        self.scale_armed = False
        desired = self.evaluate_scale(now, expected)
        if desired is None:
            return None
        if not self.scale_idle():
            self.arm_scale(timers, now)
        return desired if desired != self.unlabelled()[0] else None

    def unlabelled(self) -> tuple[int, int]:
        """(capacity, busy) of the unlabelled groups, what the autoscaler sizes: the unlabelled
        group, and the server's unlabelled workers that serve some task kinds only (their
        releases come and go together in a rolling deploy: docs/how-to/deploys.md)."""
        if not self.kinded:
            g0 = self.groups[0]
            return g0.capacity, g0.busy
        unl = [g for g in self.groups if not g.labels]
        return sum(g.capacity for g in unl), sum(g.busy for g in unl)

    def arm_scale(self, timers: Timers, now: int) -> None:
        """Arm the autoscaler's next evaluation of this pool, one interval from ``now``."""
        sc = self.scaler
        if sc is None:
            return
        self.scale_armed = True
        timers.push(now + to_ns(sc.cfg.interval), T_SCALE, None, self.index)

    def scale_idle(self) -> bool:
        """Nothing to scale for until work arrives: the evaluation timer need not be re-armed."""
        sc = self.scaler
        return sc is None or (
            self.pending == 0 and self.busy == 0 and self.unlabelled()[0] <= sc.lo and sc.rate < 0.01
        )

    def service_time(self, by_class: list[int], expected: Callable[[TaskOptions], int]) -> float:
        """s of docs/reference/behaviour.md#autoscaling: the mean expected duration
        (docs/reference/behaviour.md#expected-duration: hint, learned, default) of the pool's backlog,
        estimated from up to SERVICE_SAMPLE queued tasks per class and weighted by each class's backlog; with
        no backlog, the pool's learned run time or its default."""
        total = weight = 0.0
        for c, lane in enumerate(self.lanes):
            if not by_class[c]:
                continue
            n = 0
            acc = 0
            parts = lane.lanes.values() if self.fair else (lane,)  # a FairLane: one Lane per tenant
            for ln in parts:
                for t in islice(ln.fifo, SERVICE_SAMPLE):
                    if t.status == READY and t.lane_token == IN_FIFO:
                        acc += expected(t.opts)
                        n += 1
            for entry in chain.from_iterable(
                chain(islice(ln.late, SERVICE_SAMPLE), islice(ln.dl, SERVICE_SAMPLE)) for ln in parts
            ):
                t = entry[-1]
                if t.status == READY and t.lane_token == entry[-2]:
                    acc += expected(t.opts)
                    n += 1
            if n:
                total += by_class[c] * acc / n
                weight += by_class[c]
        if weight:
            return total / weight
        return self.run_ewma if self.run_ewma > 0 else float(self.cfg.default_duration)
