"""Snapshots (docs/reference/behaviour.md#metrics): the records, and how they are built from the live engine
state.

Theory of operation
-------------------
A snapshot is a plain, immutable (frozen, slotted) copy of what an operator reads: per pool its
capacity, counters and the quality metrics of the sliding window (dispatch waits, run times,
priority adherence, fixed-start hit rate, utilisation against the capacity provisioned over
the window, cost), plus engine-wide totals.  :func:`build_snapshot` reads the core's pools
and current leases and never mutates them: attempts still running count their elapsed part
(capped at the window) as busy time, so utilisation does not lag behind long attempts.
:func:`status_counts` counts the tasks the core holds (live and retained) by status name.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from cronoq.engine.model import STATUS_NAMES
from cronoq.engine.time import NS

if TYPE_CHECKING:
    from cronoq.engine.model import TaskState
    from cronoq.engine.pools import PoolState


@dataclass(frozen=True, slots=True)
class GroupSnapshot:
    """Capacity of the workers of a pool that share one label set."""

    labels: dict[str, str]
    capacity: int
    busy: int


@dataclass(frozen=True, slots=True)
class PoolSnapshot:
    """State and windowed quality metrics of one pool."""

    name: str
    capacity: int
    busy: int
    held: int
    desired: int
    pending: int
    pending_by_class: list[int]
    ready: int
    reservations: int
    window: float
    dispatched: int
    succeeded: int
    failed: int
    retried: int
    priority_adherence: float
    fixed_start_hit_rate: float
    utilization: float
    schedule_efficiency: float
    wait_mean: float
    wait_p50: float
    wait_p90: float
    wait_p99: float
    run_p50: float
    run_p99: float
    worker_seconds: float
    cost: float
    groups: list[GroupSnapshot] = field(default_factory=list)
    paused: bool = False  # dispatches nothing new (docs/how-to/operations.md#pause)


@dataclass(frozen=True, slots=True)
class ResourceSnapshot:
    """Use of one shared resource: ``in_use`` of its ``capacity`` units (a semaphore's held
    permits, a token bucket's spent tokens) and ``waiting`` ready tasks parked until it can
    serve them (engine/waiting.py).  A keyed resource (``per_key``,
    docs/concepts/resources.md#keyed-resources) has one row for all its keys: ``capacity`` is a
    key's default, ``in_use`` the units its running attempts hold, ``waiting`` the units of its
    live tasks not running, ``keys`` its live keys (no per-key rows: cardinality stays bounded)."""

    name: str
    kind: str
    capacity: int
    in_use: int
    waiting: int
    per_key: bool = False
    keys: int = 0


@dataclass(frozen=True, slots=True)
class Snapshot:
    """Engine-wide snapshot."""

    pools: list[PoolSnapshot]
    live_tasks: int
    running: int
    pending: int
    totals: dict[str, int]
    resources: list[ResourceSnapshot] = field(default_factory=list)

    def pool(self, name: str) -> PoolSnapshot | None:
        for p in self.pools:
            if p.name == name:
                return p
        return None


TOTAL_NAMES = (
    "submitted",
    "dispatched",
    "succeeded",
    "failed",
    "dead_lettered",
    "cancelled",
    "skipped",
    "missed",
    "shed",
    "retries",
    "timeouts",
    "lease_expiries",
    "stale_completions",
    "recurring_conflicts",
    "recurring_rejected",
    "recurring_invalid",
)


def build_snapshot(
    now: int,
    window: int,
    pools: Iterable[PoolState],
    running_attempts: Iterable[TaskState],
    live: int,
    running: int,
    totals: dict[str, int],
    resources: list[ResourceSnapshot] | None = None,
) -> Snapshot:
    """The snapshot at ``now`` of ``pools`` (``window``: the metrics window, ns) and of the
    ``resources``' use."""
    running_by_pool: dict[int, int] = {}
    for t in running_attempts:
        el = now - t.attempt_started
        pi = t.opts.pool_index
        running_by_pool[pi] = running_by_pool.get(pi, 0) + (el if el < window else window)
    out = [_pool_snapshot(pool, now, window, running_by_pool.get(pool.index, 0)) for pool in pools]
    return Snapshot(
        pools=out,
        live_tasks=live,
        running=running,
        pending=sum(p.pending for p in out),
        totals=totals,
        resources=resources or [],
    )


def _pool_snapshot(pool: PoolState, now: int, window: int, running_ns: int) -> PoolSnapshot:
    tot = pool.window.totals(now)
    wait = tot.wait
    dispatched = tot.dispatched
    fs_total = tot.fs_total
    busy_ns = tot.busy_ns + running_ns
    w50, w90, w99 = wait.quantiles((0.5, 0.9, 0.99))
    r50, r99 = tot.run.quantiles((0.5, 0.99))
    provisioned = pool.capacity_integral.provisioned_ns(now, window)
    util = min(1.0, busy_ns / provisioned) if provisioned > 0 else 0.0
    eff = min(1.0, tot.useful_ns / provisioned) if provisioned > 0 else 0.0
    ws = pool.capacity_integral.worker_ns(now) / NS
    return PoolSnapshot(
        name=pool.name,
        capacity=pool.capacity,
        busy=pool.busy,
        held=min(pool.held, max(0, pool.capacity - pool.busy)),
        desired=pool.desired,
        pending=pool.pending,
        pending_by_class=list(pool.pending_by_class),
        ready=pool.ready,
        reservations=len(pool.res),
        window=window / NS,
        dispatched=dispatched,
        succeeded=tot.succeeded,
        failed=tot.failed,
        retried=tot.retried,
        priority_adherence=1.0 - tot.jumped / dispatched if dispatched else 1.0,
        fixed_start_hit_rate=tot.fs_hits / fs_total if fs_total else 1.0,
        utilization=util,
        schedule_efficiency=eff,
        wait_mean=wait.mean() / NS,
        wait_p50=w50 / NS,
        wait_p90=w90 / NS,
        wait_p99=w99 / NS,
        run_p50=r50 / NS,
        run_p99=r99 / NS,
        worker_seconds=ws,
        cost=ws * pool.cfg.cost_per_worker_second,
        groups=[GroupSnapshot(labels=dict(g.labels), capacity=g.capacity, busy=g.busy) for g in pool.groups],
        paused=pool.paused,
    )


def status_counts(tasks: Iterable[TaskState]) -> dict[str, int]:
    """How many of ``tasks`` are in each status (by name; statuses with none are absent)."""
    out: dict[str, int] = {}
    for t in tasks:
        n = STATUS_NAMES[t.status]
        out[n] = out.get(n, 0) + 1
    return out
