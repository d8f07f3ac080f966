"""Which shard owns a request (docs/how-to/shards.md#ownership).

A pool belongs to the shard that lists it; a task id to the shard whose number it carries
(``id >> 56``); a resource to its ``shard``; a key to no shard in particular (every shard is
asked, see :mod:`cronoq.server.shards.router`).  The refusal messages and metadata of a
request this server may not forward (``cronoq-shard``, ``cronoq-shard-endpoint``) are built
here too, so the gRPC, HTTP and worker front ends say exactly the same thing.
"""

from __future__ import annotations

from typing import Final

from cronoq.engine.ids import SHARD_SHIFT
from cronoq.server.config import ServerConfig, ShardSpec

__all__ = [
    "FORWARDED_KEY",
    "SERVED_BY_KEY",
    "SHARD_ENDPOINT_KEY",
    "SHARD_KEY",
    "TO_SHARD_KEY",
    "Topology",
    "WrongShard",
    "not_this_shard",
]

#: metadata of a forwarded call: the forwarding server's shard name (ours)
FORWARDED_KEY: Final = "cronoq-forwarded"
#: trailing metadata of a refusal: the owning shard and its endpoint
SHARD_KEY: Final = "cronoq-shard"
SHARD_ENDPOINT_KEY: Final = "cronoq-shard-endpoint"
#: trailing metadata of a forwarded call's answer: the answering server's shard (ours)
SERVED_BY_KEY: Final = "cronoq-served-by"
#: metadata of a forwarded call: the shard it is meant for; a server of another shard refuses
#: it before acting (UNAVAILABLE, :func:`not_this_shard`), so a misrouted call does nothing (ours)
TO_SHARD_KEY: Final = "cronoq-to-shard"
#: the start of that refusal's message
NOT_THIS_SHARD: Final = "this server is shard"


def not_this_shard(own: str, wanted: str) -> str:
    """The refusal of a forwarded call meant for shard ``wanted`` by a server of shard ``own``."""
    return f"{NOT_THIS_SHARD} {own!r}, not {wanted!r}: the call was not run"


class WrongShard(Exception):
    """A request for another shard that this server does not forward: FAILED_PRECONDITION with
    ``cronoq-shard`` / ``cronoq-shard-endpoint`` (HTTP 421 ``wrong_shard``)."""

    def __init__(self, message: str, shard: ShardSpec, endpoint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.shard = shard
        self.endpoint = endpoint or shard.endpoint

    @property
    def metadata(self) -> tuple[tuple[str, str], ...]:
        return ((SHARD_KEY, self.shard.name), (SHARD_ENDPOINT_KEY, self.endpoint))


class Topology:
    """The shards of a configuration, seen from this server's own shard."""

    def __init__(self, config: ServerConfig) -> None:
        self.config = config
        self.shards: tuple[ShardSpec, ...] = tuple(sorted(config.shards, key=lambda s: s.number))
        own = config.own_shard
        self.own: ShardSpec | None = own
        self.by_name = {s.name: s for s in self.shards}
        self.by_number = {s.number: s for s in self.shards}
        self._pool_owner = {p: s for s in self.shards for p in s.pools}
        self._resource_owner = {
            r.name: self.by_name[r.shard] for r in config.resources if r.shard in self.by_name
        }
        #: pool order of the configuration (a merged snapshot lists pools in it)
        self.pool_order = {p.name: i for i, p in enumerate(config.pools)}

    @property
    def sharded(self) -> bool:
        return self.own is not None

    @property
    def peers(self) -> tuple[ShardSpec, ...]:
        """The other shards, by number."""
        return tuple(s for s in self.shards if s is not self.own)

    def is_local(self, shard: ShardSpec | None) -> bool:
        return shard is None or shard is self.own

    def of_pool(self, pool: str) -> ShardSpec | None:
        """The shard serving ``pool`` ("" = the default pool); None for an unknown pool."""
        return self._pool_owner.get(pool or self.config.default_pool)

    def of_id(self, task_id: int) -> ShardSpec | None:
        """The shard a task id names (``id >> 56``); None when no shard has that number."""
        return self.by_number.get(task_id >> SHARD_SHIFT)

    def of_resource(self, name: str) -> ShardSpec | None:
        """The shard owning resource ``name``; a key ``"name:key"`` of a keyed one is its
        resource's (docs/concepts/resources.md#keyed-resources)."""
        owner = self._resource_owner.get(name)
        if owner is None and ":" in name:
            owner = self._resource_owner.get(name.partition(":")[0])
        return owner

    # -- refusals ------------------------------------------------------------------------------

    def pool_refusal(self, pool: str, shard: ShardSpec, endpoint: str | None = None) -> WrongShard:
        """``endpoint``: the shard's address to name (default its first endpoint)."""
        name = pool or self.config.default_pool
        at = endpoint or shard.endpoint
        return WrongShard(f"pool '{name}' is served by shard '{shard.name}' at {at}", shard, at)

    def task_refusal(self, task_id: int, shard: ShardSpec) -> WrongShard:
        return WrongShard(f"task {task_id} belongs to shard '{shard.name}' at {shard.endpoint}", shard)

    def unreachable(self, shard: ShardSpec) -> str:
        return f"shard '{shard.name}' is unreachable"
