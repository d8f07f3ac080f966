"""Engine objects from the server configuration: a ``[[pools]]`` entry's ``PoolConfig`` and
``AutoscaleConfig``, the ``ResourceConfig`` of the server's resources."""

from __future__ import annotations

from typing import TYPE_CHECKING

from cronoq.engine.config import AutoscaleConfig, PoolConfig
from cronoq.engine.resources import ResourceConfig

from .pools import PoolSpec

if TYPE_CHECKING:
    from .document import ServerConfig

__all__ = ["autoscale_config", "pool_config", "resource_configs"]


def autoscale_config(p: PoolSpec) -> AutoscaleConfig | None:
    """The pool's ``AutoscaleConfig`` (None when ``autoscale = false``)."""
    if not p.autoscale:
        return None
    return AutoscaleConfig(
        target_utilization=p.target_utilization,
        drain_time=p.drain_time_s,
        cooldown=p.cooldown_s,
        cost_per_worker_second=p.cost_per_worker_second,
    )


def pool_config(p: PoolSpec, *, initial: int | None = 0) -> PoolConfig:
    """The engine ``PoolConfig`` of a ``[[pools]]`` entry.

    ``initial`` defaults to 0: a server pool's capacity is the granted slots of its connected
    workers (docs/reference/behaviour.md#server-details), 0 until one registers. An unknown dependency is
    awaited for ``await_unknown_dependencies_s`` when set, else rejected.
    """
    awaits = p.await_unknown_dependencies_s is not None
    autoscale = autoscale_config(p)
    return PoolConfig(
        p.name,
        min=p.min,
        max=p.max,
        initial=initial,
        autoscale=autoscale if autoscale is not None else False,
        lease_ttl=p.lease_ttl_s,
        max_pending=p.max_pending,
        overflow=p.overflow,
        retry=p.retry,
        unknown_dependency="await" if awaits else "reject",
        await_timeout=p.await_unknown_dependencies_s,
        default_duration=p.default_duration_s,
        reservable_fraction=p.reservable_fraction,
        tenant_weights=dict(p.tenant_weights),
        fair_share=p.fair_share,
    )


def resource_configs(cfg: ServerConfig) -> list[ResourceConfig]:
    """The engine resources (``Resource.semaphore`` / ``Resource.token_bucket``)."""
    return [r.to_engine() for r in cfg.resources if r.shard is None or r.shard == cfg.server.shard]
