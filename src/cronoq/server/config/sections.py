"""The tables of ``[server]``, ``[store]``, ``[limits]`` and ``[outputs]`` (see :mod:`.base`
for how a table validates; :mod:`.values` for the key types).

Each key is one field: its type is its rule, its default the server's, its ``description``
the line of the reference page (docs/reference/config.md, generated from these models).
The store URL is kept out of ``repr`` (``repr=False``): it may carry a password.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import Any, ClassVar, Final

from pydantic import Field

from cronoq.proto.protocol import DEFAULT_MAX_MESSAGE_BYTES

from .base import Section, Valid
from .errors import Bad
from .translate import Problem
from .values import (
    DAY,
    Addr,
    Bool,
    Duration,
    EnvName,
    ExistingFile,
    Int0,
    Int1,
    MessageBytes,
    Name,
    Origins,
    PositiveDuration,
    SqliteSync,
    SqlSchema,
    StoreKind,
    Str,
    check_pg_url,
    is_env_name,
)

__all__ = [
    "GrpcWebConfig",
    "LimitsConfig",
    "OutputsConfig",
    "PeerTlsConfig",
    "ServerSection",
    "StoreConfig",
    "TlsConfig",
]

MIB: Final = 1024 * 1024


class TlsConfig(Section):
    """``[server.tls]``: PEM files; ``client_ca`` turns on mutual TLS."""

    required_notes: ClassVar[Mapping[str, str]] = {"cert": "(a PEM file)", "key": "(a PEM file)"}

    cert: ExistingFile = Field(description="server certificate (PEM)")
    key: ExistingFile = Field(description="its private key (PEM)")
    client_ca: ExistingFile | None = Field(
        None, description="CA bundle that client certificates must chain to (mutual TLS)"
    )


class GrpcWebConfig(Section):
    """``[server.grpc_web]``: gRPC-Web for browser clients on the HTTP listener
    (docs/how-to/grpc-web.md); CORS preflights are answered for ``allowed_origins`` only."""

    allowed_origins: Origins = Field(
        (), description="browser origins (`https://host[:port]`) answered CORS preflights"
    )

    @classmethod
    def prepare(cls, raw: dict[str, Any], env: Mapping[str, str]) -> tuple[dict[str, Any], list[Problem]]:
        if "allowed_origins" in raw:
            return raw, []
        return raw, [(("allowed_origins",), 'required (e.g. ["https://dash.example.com"])')]


class PeerTlsConfig(Section):
    """``[server.peer_tls]``: the TLS of calls to ``https://`` peer shards (``ca`` None: the
    system roots; ``cert`` + ``key``: a client certificate)."""

    ca: ExistingFile | None = Field(
        None, description="CA bundle that peers' certificates must chain to (default: system roots)"
    )
    cert: ExistingFile | None = Field(
        None, description="client certificate presented to peers (PEM, with `key`)"
    )
    key: ExistingFile | None = Field(None, description="its private key (PEM, with `cert`)")

    @classmethod
    def rules(cls, raw: Mapping[str, Any], valid: Valid) -> list[Problem]:
        if ("cert" in raw) == ("key" in raw):
            return []
        missing = "key" if "cert" in raw else "cert"
        return [((missing,), "required with cert and key together (PEM files)")]


class ServerSection(Section):
    """``[server]``: listeners, TLS, shutdown and the keys of shards."""

    grpc_addr: Addr = Field(
        "127.0.0.1:7070", description="gRPC listener `host:port` (port 0 = any free port)"
    )
    http_addr: Addr = Field("127.0.0.1:7071", description="HTTP/JSON, SSE, dashboard and `/metrics` listener")
    metrics_addr: Addr | None = Field(
        None, description="an extra listener serving only `/metrics`, `/healthz`, `/readyz`, unauthenticated"
    )
    tls: TlsConfig | None = Field(None, description="the `[server.tls]` table")
    insecure_no_auth: Bool = Field(
        False, description="allow listening beyond loopback without tokens (also `--insecure-no-auth`)"
    )
    shutdown_grace_s: Duration = Field(
        10.0, description="on SIGTERM/SIGINT, how long running attempts may finish"
    )
    #: ``[server.grpc_web]``; None = off
    grpc_web: GrpcWebConfig | None = Field(
        None, description="the `[server.grpc_web]` table (gRPC-Web for browsers; off when absent)"
    )
    # -- shards (docs/how-to/shards.md)
    #: the server's own shard (also ``--shard`` / ``$CRONOQ_SHARD``); None without [[shards]]
    shard: Name | None = Field(
        None,
        description="this server's shard, a `[[shards]]` name (also `--shard`, `$CRONOQ_SHARD`; "
        "the flag wins)",
    )
    peer_tls: PeerTlsConfig | None = Field(None, description="the `[server.peer_tls]` table")
    #: allow forwarding callers' tokens to plain http:// peers beyond loopback
    insecure_peer_http: Bool = Field(
        False, description="forward callers' tokens to plain `http://` peers beyond loopback"
    )


class OutputsConfig(Section):
    """``[outputs]`` (ours: the defaults): the leader's in-memory cache of recent outputs and
    finished task records, which answers ``Wait``/``Get`` after completion
    (docs/reference/config.md#outputs). Beyond ``cache_entries`` outputs or ``cache_bytes``
    bytes the oldest outputs are dropped (the task stays known, ``output_available`` false; the
    newest output always stays); beyond ``info_entries`` (or ``limits.key_retention_max``, the
    smaller) the oldest finished tasks are forgotten."""

    cache_entries: Int1 = Field(100_000, description="outputs kept in memory (oldest dropped first)")
    cache_bytes: Int1 = Field(256 * MIB, description="bytes of outputs kept in memory (oldest dropped first)")
    info_entries: Int1 = Field(
        1_000_000, description="finished task records kept in memory (`limits.key_retention_max` if smaller)"
    )


with warnings.catch_warnings():  # the key ``schema`` shadows BaseModel.schema() (deprecated)
    warnings.simplefilter("ignore", UserWarning)

    class StoreConfig(Section):
        """``[store]``. ``url`` is resolved (from ``url`` or ``$url_env``) for ``postgres``."""

        kind: StoreKind = Field("sqlite", description="`memory` (nothing persisted), `sqlite` or `postgres`")
        path: Str = Field("./cronoq.db", description="SQLite file")
        url: Str | None = Field(None, repr=False, description="PostgreSQL URL (`postgresql://...`)")
        url_env: EnvName = Field(
            "DATABASE_URL",
            description="environment variable holding the PostgreSQL URL when `url` is not given",
        )
        schema: SqlSchema = Field("public", description="PostgreSQL schema (one cluster per schema)")  # type: ignore[assignment]
        keep_finished_s: Duration = Field(
            7.0 * DAY, description="how long the store keeps finished tasks and their outputs"
        )
        #: (ours) a commit that takes longer makes the leader step down; its waiters get UNAVAILABLE
        commit_timeout_s: PositiveDuration = Field(
            15.0, description="a slower commit: the leader steps down, its callers get UNAVAILABLE"
        )
        #: (ours, postgres) every statement's bound (server and client side) and connecting's
        statement_timeout_s: PositiveDuration = Field(
            30.0, description="PostgreSQL: bound of every statement (a hung database)"
        )
        connect_timeout_s: PositiveDuration = Field(10.0, description="PostgreSQL: bound of connecting")
        #: (ours, sqlite) PRAGMA synchronous in WAL mode (docs/concepts/durability.md#sqlite-sync)
        sqlite_sync: SqliteSync = Field(
            "full",
            description="SQLite: `full` (an acknowledged task survives power loss) or `normal` "
            "(it survives a crash or kill of the server, not of the host; faster)",
        )

        @classmethod
        def prepare(cls, raw: dict[str, Any], env: Mapping[str, str]) -> tuple[dict[str, Any], list[Problem]]:
            """``url`` from ``$url_env`` for postgres (the file's ``url`` wins; not both)."""
            if "url" in raw and "url_env" in raw:
                return raw, [((), "give url or url_env, not both")]
            if raw.get("kind") != "postgres" or "url" in raw:
                return raw, []
            name = raw.get("url_env")
            if not is_env_name(name):
                name = "DATABASE_URL"
            value = env.get(name)
            if not value:
                msg = (
                    f"environment variable {name!r} is not set "
                    '(store.kind = "postgres" needs store.url or store.url_env)'
                )
                return raw, [(("url_env",), msg)]
            try:
                check_pg_url(value)
            except Bad as e:
                return raw, [(("url_env",), f"${name} {e}")]
            return {**raw, "url": value}, []

        @classmethod
        def rules(cls, raw: Mapping[str, Any], valid: Valid) -> list[Problem]:
            url = valid("url")
            if valid("kind") == "postgres" and url is not None:
                try:
                    check_pg_url(url)
                except Bad as e:
                    return [(("url",), str(e))]
            return []


class LimitsConfig(Section):
    """``[limits]`` (docs/reference/config.md#limits). The fields keep their positional order;
    :attr:`file_keys` is the order of the file (and of the reference page)."""

    file_keys: ClassVar[tuple[str, ...] | None] = (
        *("max_tasks_per_batch", "max_pending_total", "max_pending_per_pool", "max_message_bytes"),
        *("max_http_body_bytes", "max_key_len", "max_kind_len", "max_tags", "max_tag_len", "max_deps"),
        *("max_resources", "max_labels", "max_label_len", "max_tenant_len", "max_connections"),
        *("header_timeout_s", "max_streams_per_principal", "max_worker_sessions", "max_pending_bytes"),
        *("max_wait_s", "request_timeout_s", "max_concurrent_requests", "max_concurrent_streams"),
        *("max_slots_per_worker", "keepalive_interval_s", "keepalive_timeout_s", "key_retention_s"),
        *("key_retention_max", "max_list", "max_request_key_len", "max_filter_items"),
        *("peer_timeout_s", "max_peer_calls", "peer_breaker_failures", "peer_breaker_reset_s"),
        *("max_requests_per_principal", "max_connections_per_address", "max_report_message_len"),
    )

    max_tasks_per_batch: Int1 = Field(1000, description="tasks in one `SubmitBatch`")
    max_pending_total: Int1 = Field(1_000_000, description="not-yet-running tasks over all pools")
    max_pending_per_pool: Int1 = Field(100_000, description="default `max_pending` of a pool")
    max_message_bytes: MessageBytes = Field(
        DEFAULT_MAX_MESSAGE_BYTES, description="largest gRPC message (both directions)"
    )
    max_http_body_bytes: MessageBytes = Field(4 * MIB, description="largest HTTP request body (413 beyond)")
    max_key_len: Int1 = Field(256, description="longest task key")
    max_kind_len: Int1 = Field(128, description="longest task kind")
    max_tags: Int0 = Field(64, description="tags per task")
    max_tag_len: Int1 = Field(1024, description="longest tag key or value")
    max_deps: Int0 = Field(1024, description="dependencies per task")
    max_resources: Int0 = Field(16, description="resources per task")
    max_wait_s: PositiveDuration = Field(
        300.0, description="longest wait of `Wait` / `?wait=true` / `/result`"
    )
    request_timeout_s: PositiveDuration = Field(30.0, description="deadline of one unary request")
    max_concurrent_requests: Int1 = Field(
        1024, description="unary requests in flight (RESOURCE_EXHAUSTED / 429 beyond)"
    )
    max_concurrent_streams: Int1 = Field(1024, description="open Watch, worker and SSE streams")
    max_slots_per_worker: Int1 = Field(1024, description="slots granted to one worker at most")
    keepalive_interval_s: PositiveDuration = Field(20.0, description="gRPC keepalive ping interval")
    keepalive_timeout_s: PositiveDuration = Field(10.0, description="gRPC keepalive ping timeout")
    key_retention_s: Duration = Field(
        3600.0, description="how long a finished task's key stays reserved (dedup, deps, lookups)"
    )
    key_retention_max: Int0 = Field(
        1_000_000, description="at most this many retained finished tasks (oldest dropped first)"
    )
    max_list: Int1 = Field(1000, description="largest `ListTasks` page")
    # (ours, hardening; after the documented limits so positional construction keeps working)
    max_labels: Int0 = Field(64, description="worker labels a task may require")
    max_label_len: Int1 = Field(1024, description="longest label key or value, or key of a keyed resource")
    max_tenant_len: Int1 = Field(256, description="longest tenant name")
    #: open connections per listener (HTTP; gRPC) and how long a request head (HTTP) or the
    #: connection handshake (gRPC) may take: slowloris without a token
    max_connections: Int1 = Field(4096, description="open connections per listener (HTTP and gRPC)")
    header_timeout_s: PositiveDuration = Field(
        10.0, description="a request head (HTTP) or handshake (gRPC) must arrive within this"
    )
    #: Watch streams of one token (all callers together without auth); worker sessions have
    #: their own budget, so clients can never lock workers out
    max_streams_per_principal: Int1 = Field(
        256, description="Watch / SSE streams of one token (of all callers without auth)"
    )
    max_worker_sessions: Int1 = Field(
        1024, description="worker sessions: their own budget, so clients never lock workers out"
    )
    #: payload bytes the leader holds for live tasks (payloads of 256 bytes and more count)
    max_pending_bytes: Int1 = Field(
        256 * MIB, description="payload bytes held by not-yet-running tasks (`overloaded` beyond)"
    )
    #: calls to peer shards (shards/breaker.py): their own deadline and budget, and the breaker
    #: that makes calls to a peer known to be down fail at once
    peer_timeout_s: PositiveDuration = Field(
        10.0, description="deadline of one call to a peer shard (plus the wait it asks for)"
    )
    max_peer_calls: Int1 = Field(64, description="calls in flight to one peer shard (503 beyond)")
    peer_breaker_failures: Int1 = Field(
        3, description="consecutive calls a peer shard did not answer before its breaker opens"
    )
    peer_breaker_reset_s: PositiveDuration = Field(
        5.0, description="how long an open breaker fails calls at once before one probe call"
    )
    #: each caller's share of the budgets (principal_shares.py)
    max_requests_per_principal: Int1 = Field(
        256, description="unary requests in flight of one token or certificate principal (with auth)"
    )
    max_connections_per_address: Int1 = Field(
        1024, description="open HTTP connections from one client address (closed at once beyond)"
    )
    #: (ours, hardening round 2) what one request may make the server keep or scan: a bulk
    #: action's request key is remembered (and stored), a Watch keeps its filter for its life
    max_request_key_len: Int1 = Field(256, description="longest bulk `request_key`")
    max_filter_items: Int1 = Field(
        1000,
        description="items of one filter: Watch / `/v1/events` ids, keys and pools; list and bulk filters",
    )
    max_report_message_len: Int1 = Field(
        4096, description="longest failure message or Nack reason a worker reports (longer: cut)"
    )
