"""Snapshot records (SPEC §14): plain, immutable-by-convention value objects."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class GroupSnapshot:
    """Capacity of the workers of a pool that share one label set."""

    labels: dict[str, str]
    capacity: int
    busy: int


@dataclass(frozen=True)
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


@dataclass(frozen=True)
class Snapshot:
    """Engine-wide snapshot."""

    pools: list[PoolSnapshot]
    live_tasks: int
    running: int
    pending: int
    totals: dict[str, int]

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
    "recurring_invalid",
)
