"""Prometheus exposition of the scheduler snapshot (``GET /metrics``, docs/reference/metrics.md#prometheus).

Every scrape takes a fresh :meth:`Scheduler.snapshot` and renders it through a one-shot
``prometheus_client`` collector (nothing is kept between scrapes, so a standby or restarted
process never reports stale series).  Per-pool series carry ``pool="<name>"``, per keyed
resource ``resource="<name>"`` (never a key: bounded cardinality); per-class
series add ``class="critical|high|normal|low"``; quantile series add ``quantile``; per worker
group series add ``group`` (the group's labels as ``k=v,k2=v2``, ``""`` for the unlabelled
group).  Totals since start are ``cronoq_tasks_<name>_total`` counters.  A standby exports
only ``cronoq_leader 0`` and ``cronoq_workers_connected``.  With shards every series carries
``shard="<name>"`` too (docs/how-to/shards.md), so one Prometheus scraping every shard's
servers keeps them apart.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.exposition import generate_latest
from prometheus_client.registry import Collector, CollectorRegistry

from cronoq.engine.model import CLASS_NAMES
from cronoq.engine.snapshot import Snapshot

__all__ = ["CONTENT_TYPE", "SnapshotCollector", "render"]

#: docs/reference/metrics.md#prometheus: the classic text format.
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

#: (metric suffix, PoolSnapshot attribute, help) of the plain per-pool gauges.
_POOL_GAUGES: tuple[tuple[str, str, str], ...] = (
    ("capacity", "capacity", "Worker slots of the pool (granted slots of connected workers)."),
    ("desired", "desired", "Desired worker slots computed by the autoscaler (for KEDA/HPA)."),
    ("busy", "busy", "Slots running an attempt."),
    ("held", "held", "Slots held back for upcoming fixed-start reservations."),
    ("ready", "ready", "Tasks ready to run now."),
    ("reservations", "reservations", "Active fixed-start reservations."),
    ("utilization", "utilization", "Busy share of capacity over the window (0..1)."),
    ("priority_adherence", "priority_adherence", "Share of dispatches in priority order over the window."),
    (
        "fixed_start_hit_rate",
        "fixed_start_hit_rate",
        "Share of fixed starts within tolerance over the window.",
    ),
    ("schedule_efficiency", "schedule_efficiency", "Work over provisioned worker-seconds over the window."),
    ("wait_mean_seconds", "wait_mean", "Mean queue wait over the window."),
    ("worker_seconds", "worker_seconds", "Provisioned worker-seconds over the window."),
    ("cost", "cost", "Cost of the provisioned worker-seconds over the window."),
    ("dispatched_window", "dispatched", "Attempts dispatched in the window."),
    ("succeeded_window", "succeeded", "Tasks succeeded in the window."),
    ("failed_window", "failed", "Attempts failed in the window."),
    ("retried_window", "retried", "Retries scheduled in the window."),
    ("window_seconds", "window", "Length of the metrics window."),
    ("paused", "paused", "1 while the pool is paused (dispatches nothing new), else 0."),
)

_TOTAL_HELP = {
    "submitted": "Tasks submitted.",
    "dispatched": "Attempts dispatched.",
    "succeeded": "Tasks succeeded.",
    "failed": "Tasks failed.",
    "dead_lettered": "Tasks dead-lettered.",
    "cancelled": "Tasks cancelled.",
    "skipped": "Tasks skipped (a dependency ended unsatisfied).",
    "missed": "Fixed starts missed.",
    "shed": "Tasks shed by overflow policy.",
    "retries": "Retries scheduled.",
    "timeouts": "Attempts timed out.",
    "lease_expiries": "Leases expired (no heartbeat).",
    "stale_completions": "Reports for stale leases ignored.",
    "recurring_conflicts": "Recurring occurrences dropped: they could not get a reservation.",
    "recurring_rejected": (
        "Recurring occurrences dropped: their pool refused them for another reason "
        "(full or overloaded, a resource it cannot hold)."
    ),
    "recurring_invalid": (
        "Recurring schedules with no next occurrence (a cron that never fires again), or not "
        "resumed from the store (a cron, time zone or pool no longer valid)."
    ),
}


def _num(v: Any) -> float:
    try:
        f = float(v)
    except (TypeError, ValueError):
        return math.nan
    return f


def _group_label(labels: Any) -> str:
    return ",".join(f"{k}={v}" for k, v in sorted(dict(labels or {}).items()))


class SnapshotCollector(Collector):
    """One scrape's worth of series from a snapshot (None on a standby)."""

    def __init__(
        self,
        snap: Snapshot | None,
        workers_by_pool: dict[str, int],
        *,
        leader: bool,
        pools: Iterable[str] | None = None,
        shard: str | None = None,
    ) -> None:
        self.shard = shard
        self.snap = snap
        self.workers_by_pool = workers_by_pool
        self.leader = leader
        self.pools = None if pools is None else set(pools)

    def collect(self) -> Iterator[Metric]:
        shard = self.shard
        for m in self._collect():
            if shard is not None:
                m.samples = [s._replace(labels={"shard": shard, **s.labels}) for s in m.samples]
            yield m

    def _collect(self) -> Iterator[Metric]:
        yield GaugeMetricFamily(
            "cronoq_leader", "1 while this process leads, else 0.", value=1 if self.leader else 0
        )
        visible = {k: v for k, v in self.workers_by_pool.items() if self.pools is None or k in self.pools}
        yield GaugeMetricFamily("cronoq_workers_connected", "Connected workers.", value=sum(visible.values()))
        snap = self.snap
        if snap is None:
            return
        pools = [p for p in snap.pools if self.pools is None or p.name in self.pools]

        for suffix, attr, help_ in _POOL_GAUGES:
            g = GaugeMetricFamily(f"cronoq_pool_{suffix}", help_, labels=["pool"])
            for p in pools:
                g.add_metric([p.name], _num(getattr(p, attr, math.nan)))
            yield g

        g = GaugeMetricFamily(
            "cronoq_pool_workers_connected", "Connected workers of the pool.", labels=["pool"]
        )
        for p in pools:
            g.add_metric([p.name], visible.get(p.name, 0))
        yield g

        g = GaugeMetricFamily(
            "cronoq_pool_pending", "Pending tasks by priority class.", labels=["pool", "class"]
        )
        for p in pools:
            for cls, n in zip(CLASS_NAMES, p.pending_by_class):
                g.add_metric([p.name, cls], n)
        yield g

        g = GaugeMetricFamily(
            "cronoq_pool_wait_seconds", "Queue wait quantiles over the window.", labels=["pool", "quantile"]
        )
        for p in pools:
            for q, v in (("0.5", p.wait_p50), ("0.9", p.wait_p90), ("0.99", p.wait_p99)):
                g.add_metric([p.name, q], _num(v))
        yield g

        g = GaugeMetricFamily(
            "cronoq_pool_run_seconds",
            "Attempt run-time quantiles over the window.",
            labels=["pool", "quantile"],
        )
        for p in pools:
            for q, v in (("0.5", p.run_p50), ("0.99", p.run_p99)):
                g.add_metric([p.name, q], _num(v))
        yield g

        cap = GaugeMetricFamily("cronoq_group_capacity", "Slots of a worker group.", labels=["pool", "group"])
        busy = GaugeMetricFamily(
            "cronoq_group_busy", "Busy slots of a worker group.", labels=["pool", "group"]
        )
        for p in pools:
            for grp in p.groups:
                lab = _group_label(getattr(grp, "labels", None))
                cap.add_metric([p.name, lab], _num(grp.capacity))
                busy.add_metric([p.name, lab], _num(grp.busy))
        yield cap
        yield busy
        if self.pools is None:  # resources are shared by every pool: not for a pool-scoped token
            yield from _resource_gauges(snap)

        yield GaugeMetricFamily("cronoq_live_tasks", "Live (non-terminal) tasks.", value=snap.live_tasks)
        yield GaugeMetricFamily("cronoq_running", "Attempts running.", value=snap.running)
        yield GaugeMetricFamily("cronoq_pending", "Tasks pending.", value=snap.pending)

        for name, value in sorted(snap.totals.items()):
            c = CounterMetricFamily(
                f"cronoq_tasks_{name}", _TOTAL_HELP.get(name, f"Total {name.replace('_', ' ')}.")
            )
            c.add_metric([], _num(value))
            yield c


_RESOURCE_GAUGES: tuple[tuple[str, str, str], ...] = (
    ("capacity", "capacity", "Units of a shared resource (semaphore permits, bucket burst)."),
    ("in_use", "in_use", "Units in use: permits held by running attempts, or tokens spent and not refilled."),
    ("waiting", "waiting", "Ready tasks parked until the resource can serve them (keyed: units waiting)."),
    ("keys", "keys", "Live keys of a keyed resource (with tasks, or used within idle_ttl); 0 if unkeyed."),
)


def _resource_gauges(snap: Snapshot) -> Iterator[Metric]:
    """``cronoq_resource_*{resource}``: each shared resource's use (engine/waiting.py)."""
    for suffix, attr, help_ in _RESOURCE_GAUGES:
        g = GaugeMetricFamily(f"cronoq_resource_{suffix}", help_, labels=["resource"])
        for r in snap.resources:
            g.add_metric([r.name], _num(getattr(r, attr)))
        yield g


def render(
    snap: Snapshot | None,
    workers_by_pool: dict[str, int],
    *,
    leader: bool,
    pools: Iterable[str] | None = None,
    shard: str | None = None,
) -> bytes:
    """The Prometheus text exposition (format 0.0.4) of one snapshot (``shard``: the label of
    every series)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(SnapshotCollector(snap, workers_by_pool, leader=leader, pools=pools, shard=shard))
    return generate_latest(registry)
