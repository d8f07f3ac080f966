"""The whole file (:class:`ConfigFile`) and the whole validated configuration
(:class:`ServerConfig`).

``ConfigFile`` is the file's shape: its top-level tables, each a model of :mod:`.sections`,
:mod:`.pools` or :mod:`.principals`. ``ServerConfig`` is what the server runs with, built by
:mod:`.load` from a valid ``ConfigFile`` and the rules of :mod:`.checks`: tokens as digests,
``server.shard`` resolved (flag, file, ``$CRONOQ_SHARD``), the store's ``{shard}`` placeholder
filled in, each pool's ``max_pending`` defaulting to ``limits.max_pending_per_pool``.
"""

from __future__ import annotations

from typing import Annotated, ClassVar

from pydantic import Field

from .base import Section
from .pools import DEFAULT_POOL, PoolSpec, ResourceSpec, ShardSpec
from .principals import AuthSection, CertConfig, TokenConfig, tables
from .sections import LimitsConfig, OutputsConfig, ServerSection, StoreConfig

__all__ = ["DEFAULT_POOL", "ConfigFile", "ServerConfig"]


def _default_pools() -> tuple[PoolSpec, ...]:
    return (PoolSpec(name=DEFAULT_POOL),)


class ConfigFile(Section):
    """The TOML file of ``cronoq serve``: its top-level tables."""

    #: problems are reported in this order of the tables (as the file is read)
    report_order: ClassVar[tuple[str, ...]] = (
        "limits",
        "pools",
        "auth",
        "outputs",
        "store",
        "server",
        "resources",
        "shards",
    )

    server: ServerSection = Field(default_factory=ServerSection, description="the `[server]` table")
    auth: AuthSection = Field(
        default_factory=AuthSection, description="the `[auth]` table (`[[auth.tokens]]`, `[[auth.certs]]`)"
    )
    store: StoreConfig = Field(default_factory=StoreConfig, description="the `[store]` table")
    limits: LimitsConfig = Field(default_factory=LimitsConfig, description="the `[limits]` table")
    pools: Annotated[
        tuple[PoolSpec, ...],
        tables("[[pools]]", "at least one pool is required (leave out [[pools]] for one pool 'default')"),
    ] = Field(default_factory=_default_pools, description="the `[[pools]]` array of tables")
    resources: Annotated[tuple[ResourceSpec, ...], tables("[[resources]]")] = Field(
        (), description="the `[[resources]]` array of tables"
    )
    shards: Annotated[
        tuple[ShardSpec, ...],
        tables("[[shards]]", "at least one shard is required (leave out [[shards]] for one server group)"),
    ] = Field((), description="the `[[shards]]` array of tables (pools split between leaders)")
    outputs: OutputsConfig = Field(default_factory=OutputsConfig, description="the `[outputs]` table")


class ServerConfig(Section):
    """The whole validated configuration of ``cronoq serve``."""

    server: ServerSection = Field(default_factory=ServerSection)
    tokens: tuple[TokenConfig, ...] = ()
    store: StoreConfig = Field(default_factory=StoreConfig)
    limits: LimitsConfig = Field(default_factory=LimitsConfig)
    pools: tuple[PoolSpec, ...] = Field(default_factory=_default_pools)
    resources: tuple[ResourceSpec, ...] = ()
    #: the file it was read from (None: defaults / a string).
    source: str | None = None
    #: ``[[auth.certs]]`` certificate principals (mutual TLS)
    certs: tuple[CertConfig, ...] = ()
    outputs: OutputsConfig = Field(default_factory=OutputsConfig)
    #: ``[[shards]]`` (empty: one unsharded server group)
    shards: tuple[ShardSpec, ...] = ()

    @property
    def own_shard(self) -> ShardSpec | None:
        """This server's shard (``server.shard``), None without shards."""
        for s in self.shards:
            if s.name == self.server.shard:
                return s
        return None

    @property
    def local_pools(self) -> tuple[PoolSpec, ...]:
        """The pools this server's engine runs: its shard's (every pool without shards)."""
        own = self.own_shard
        if own is None:
            return self.pools
        return tuple(p for p in self.pools if p.name in own.pools)

    @property
    def auth_enabled(self) -> bool:
        """docs/reference/behaviour.md#server-details: once any token (or certificate principal) is
        configured, auth applies on every address."""
        return bool(self.tokens) or bool(self.certs)

    @property
    def pool_names(self) -> list[str]:
        return [p.name for p in self.pools]

    @property
    def default_pool(self) -> str:
        """docs/reference/behaviour.md#concepts: the first pool, unless one is named ``default``."""
        for p in self.pools:
            if p.name == DEFAULT_POOL:
                return p.name
        return self.pools[0].name

    def pool(self, name: str) -> PoolSpec | None:
        for p in self.pools:
            if p.name == name:
                return p
        return None
